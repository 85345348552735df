//! Task limits (Conductor's `concurrentExecLimit`): never more tasks of a limited type
//! IN_PROGRESS at once than its limit, across every workflow and partition. Checked on the
//! partition leaders' records read at one instant ([`check_live`]), and over the whole run from
//! the final records ([`check`]): there a task is held from its start to its end (one still
//! IN_PROGRESS at the end, to the end), and since the times come from the clocks of possibly
//! different leaders, a task counts as held at another's start only when it started twice the
//! run's skew before it and ended twice the skew after it.

use proto::model::TaskStatus;
use proto::record::WorkflowRecord;
use std::collections::BTreeMap;

/// The tasks of `task_type` IN_PROGRESS in `records` (the leaders' at one instant).
pub fn check_live(
    records: &BTreeMap<String, WorkflowRecord>,
    task_type: &str,
    limit: u32,
) -> Vec<(&'static str, String)> {
    let held: Vec<String> = records
        .values()
        .flat_map(|r| r.workflow.tasks.iter())
        .filter(|t| t.task_def_name == task_type && t.status == TaskStatus::InProgress)
        .map(|t| t.task_id.to_string())
        .collect();
    if held.len() <= limit as usize {
        return Vec::new();
    }
    vec![(
        "a task type's concurrency limit holds",
        format!(
            "{} {task_type} tasks IN_PROGRESS at once ({held:?}), limit {limit}",
            held.len()
        ),
    )]
}

pub fn check(
    records: &BTreeMap<String, WorkflowRecord>,
    task_type: &str,
    limit: u32,
    skew_ms: u64,
) -> Vec<(&'static str, String)> {
    let slack = super::ms(2 * skew_ms);
    let spans: Vec<(i64, i64, String)> = records
        .values()
        .flat_map(|r| r.workflow.tasks.iter())
        .filter(|t| t.task_def_name == task_type && t.start_time > 0)
        .map(|t| {
            let end = if t.status.is_terminal() {
                t.end_time.max(t.start_time)
            } else {
                i64::MAX
            };
            (t.start_time, end, t.task_id.to_string())
        })
        .collect();
    spans
        .iter()
        .filter_map(|(start, _, id)| {
            let held: Vec<&str> = spans
                .iter()
                .filter(|(s, e, other)| other != id && *s + slack <= *start && *e > *start + slack)
                .map(|(_, _, other)| other.as_str())
                .collect();
            (held.len() >= limit as usize).then(|| {
                (
                    "a task type's concurrency limit holds",
                    format!(
                        "{task_type} task {id} started at {start} while {} were IN_PROGRESS ({held:?}), limit {limit}",
                        held.len()
                    ),
                )
            })
        })
        .collect()
}
