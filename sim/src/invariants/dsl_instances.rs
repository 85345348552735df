//! Serverless Workflow instances (the workload's document, `crate::dsl_doc`), after the DSL's
//! semantics (dsl.md, "Listen", "Try", "Data Flow"): an instance that completed consumed the
//! event correlated to it and no other (its output names its own id, so the `correlate` of its
//! `listen` held across the event gate, redeliveries, crashes and failovers); its listen ran
//! once; its `try` ran the function (in distinct iterations) at most as often as its retry limit
//! allows; and an instance that faulted carries its error in the DSL's terms.

use crate::dsl_doc::{FLAKY_AT, TRY_RUNS_MAX};
use proto::model::WorkflowStatus;
use proto::record::WorkflowRecord;

/// Checks on the final record.
pub fn check(record: &WorkflowRecord) -> Vec<(&'static str, String)> {
    let wf = &record.workflow;
    let Some(run) = &wf.dsl else {
        return Vec::new();
    };
    let id = wf.workflow_id.as_str();
    let mut out = Vec::new();
    match wf.status {
        WorkflowStatus::Completed => {
            let heard = run.output.as_ref().and_then(|o| o.pointer("/heard"));
            if heard.and_then(|h| h.as_str()) != Some(id) {
                out.push((
                    "a listen consumes only the event correlated to it",
                    format!("instance {id} completed having heard {heard:?}"),
                ));
            }
        }
        WorkflowStatus::Failed | WorkflowStatus::TimedOut if run.error.is_none() => out.push((
            "a faulted instance carries its error",
            format!("instance {id} is {} without an error", wf.status.as_str()),
        )),
        _ => {}
    }
    let listens = wf
        .tasks
        .iter()
        .filter(|t| t.task_type == engine::dsl::run::LISTEN_TASK_TYPE)
        .count();
    if listens > 1 {
        out.push((
            "a listen runs once",
            format!("instance {id} ran its listen {listens} times"),
        ));
    }
    // A run of the try's function is one iteration at its pointer; the task type's own
    // `retryCount` may retry each run again, which `attempts` checks.
    let tries = wf
        .tasks
        .iter()
        .filter(|t| t.reference_task_name == FLAKY_AT)
        .map(|t| t.iteration)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if tries > TRY_RUNS_MAX {
        out.push((
            "a try runs its tasks at most as often as its retry limit allows",
            format!("instance {id} ran {FLAKY_AT} {tries} times (at most {TRY_RUNS_MAX})"),
        ));
    }
    out
}
