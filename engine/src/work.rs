//! Work a task asks of the runtime: things the decider must not do itself because they take
//! time, may not end, or reach outside the workflow — start another workflow (START_WORKFLOW),
//! run a script (INLINE and LAMBDA in JavaScript, SWITCH with a `javascript` or `graaljs`
//! evaluator) or a jq query (JSON_JQ_TRANSFORM).
//!
//! Such a task is SCHEDULED and its work *pending* until [`Input::Performed`] reports the
//! outcome. Like an EVENT task's message, pending work is derived from the state, never stored
//! ([`pending_work`]): the leader performs it after every commit that leaves it pending and
//! again at recovery, and a `Perform` timer repeats it when its report does not come (the
//! runtime lost it, or the leader changed in between), backing off from attempt to attempt.
//! Performing work twice is harmless: scripts and queries are pure, and a started workflow's id
//! is derived from the task, so a repeat finds it started.

use super::nav;
use super::schedule::complete_now;
use super::state::{derived_id, Ctx};
use super::*;
use proto::model::{task_type, Task, TaskStatus, Workflow, WorkflowStatus};
use serde_json::Value;

/// What the runtime is asked to do for one task.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Work {
    /// Start a workflow under `workflow_id`; report `{"workflowId": …}` or why it could not be.
    Start(StartRequest),
    /// Evaluate `script` (JavaScript) with `$` bound to `root`; report its value.
    Script { script: String, root: Value },
    /// Run the jq `query` on `input`; report the list of its outputs.
    Jq { query: String, input: Value },
}

/// A workflow a task starts.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StartRequest {
    /// Derived from the starting task's id, so performing the start twice starts one workflow.
    pub workflow_id: WorkflowId,
    pub name: String,
    /// The latest version when `None`.
    pub version: Option<u32>,
    pub input: Json,
    pub correlation_id: Option<String>,
    pub task_to_domain: BTreeMap<String, String>,
}

/// One task's pending work.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PendingWork {
    pub task_id: TaskId,
    pub work: Work,
}

/// Whether a task of this definition type waits for work the runtime performs.
pub(crate) fn is_work_type(wt: &proto::model::WorkflowTask) -> bool {
    match wt.task_type.as_str() {
        task_type::START_WORKFLOW | task_type::LAMBDA | task_type::JSON_JQ_TRANSFORM => true,
        task_type::INLINE => true,
        task_type::SWITCH => nav::is_script_evaluator(wt.evaluator_type.as_deref()),
        _ => false,
    }
}

/// The work a SCHEDULED task of a RUNNING workflow waits for (`None`: it waits for none).
pub(crate) fn work_of(wf: &Workflow, t: &Task) -> Option<Work> {
    if wf.status != WorkflowStatus::Running || t.status != TaskStatus::Scheduled {
        return None;
    }
    let wt = &t.workflow_task;
    let input = &t.input_data;
    let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    match wt.task_type.as_str() {
        task_type::START_WORKFLOW => Some(Work::Start(start_request(wf, t))),
        task_type::INLINE => Some(Work::Script {
            script: text("expression")?,
            root: Value::Object(input.clone()),
        }),
        // Conductor runs a LAMBDA's `scriptExpression` as the body of a function.
        task_type::LAMBDA => Some(Work::Script {
            script: format!("(function () {{ {} }})()", text("scriptExpression")?),
            root: Value::Object(input.clone()),
        }),
        task_type::JSON_JQ_TRANSFORM => Some(Work::Jq {
            query: text("queryExpression")?,
            input: Value::Object(input.clone()),
        }),
        task_type::SWITCH if nav::is_script_evaluator(wt.evaluator_type.as_deref()) => {
            Some(Work::Script {
                script: wt.expression.clone()?,
                root: Value::Object(input.clone()),
            })
        }
        _ => None,
    }
}

/// START_WORKFLOW's `startWorkflow` input: `name`, `version`, `input`, `correlationId`,
/// `taskToDomain`.
fn start_request(wf: &Workflow, t: &Task) -> StartRequest {
    let empty = Json::new();
    let spec = t
        .input_data
        .get("startWorkflow")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let text = |key: &str| spec.get(key).and_then(Value::as_str).map(str::to_owned);
    let version = spec.get("version").and_then(|v| match v {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    });
    let task_to_domain = spec
        .get("taskToDomain")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    StartRequest {
        workflow_id: derived_id(
            &wf.workflow_id,
            &format!("start:{}:{}", wf.workflow_id, t.task_id),
        ),
        name: text("name").unwrap_or_default(),
        version,
        input: spec
            .get("input")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        correlation_id: text("correlationId"),
        task_to_domain,
    }
}

/// Every pending work of `workflow` (none unless it is RUNNING).
pub fn pending_work(workflow: &Workflow) -> Vec<PendingWork> {
    workflow
        .tasks
        .iter()
        .filter(|t| is_work_type(&t.workflow_task))
        .filter_map(|t| {
            work_of(workflow, t).map(|work| PendingWork {
                task_id: t.task_id.clone(),
                work,
            })
        })
        .collect()
}

/// How long a task's work may go unreported before it is performed again.
pub(crate) const REDO_FIRST_MS: NowMs = 5_000;
/// The longest wait between two attempts of one task's work (the backoff doubles up to it).
pub(crate) const REDO_MAX_MS: NowMs = 60_000;

/// When a task's pending work is performed again: its last attempt (the task's `updateTime`;
/// `pollCount` counts the attempts after the first) plus a backoff.
pub(crate) fn redo_due(wf: &Workflow, t: &Task) -> Option<NowMs> {
    work_of(wf, t)?;
    let doubled = REDO_FIRST_MS.saturating_mul(1 << t.poll_count.min(16));
    Some(t.update_time.saturating_add(doubled.min(REDO_MAX_MS)))
}

/// The runtime performed a task's work: the task completes with what it produced, or fails
/// with the reason. A report for a task that no longer waits for work changes nothing.
pub(crate) fn performed(ctx: &mut Ctx<'_>, i: usize, outcome: Result<Value, String>) {
    let t = &ctx.wf.tasks[i];
    if work_of(&ctx.wf, t).is_none() {
        return;
    }
    let now = ctx.now;
    let wt = t.workflow_task.clone();
    let output = outcome.map(|value| output_of(&wt, value));
    let t = &mut ctx.wf.tasks[i];
    match output {
        Ok(output) => complete_now(now, t, output),
        Err(reason) => {
            t.status = TaskStatus::Failed;
            t.start_time = now;
            t.end_time = now;
            t.reason_for_incompletion = Some(reason);
        }
    }
    t.update_time = now;
    ctx.changed = true;
    super::advance::advance(ctx);
}

/// The task's output for what its work produced.
fn output_of(wt: &proto::model::WorkflowTask, value: Value) -> Json {
    let mut out = Json::new();
    match wt.task_type.as_str() {
        task_type::START_WORKFLOW => {
            if let Value::Object(m) = value {
                out = m;
            }
        }
        task_type::JSON_JQ_TRANSFORM => {
            let list = match value {
                Value::Array(list) => list,
                other => vec![other],
            };
            out.insert(
                "result".into(),
                list.first().cloned().unwrap_or(Value::Null),
            );
            out.insert("resultList".into(), Value::Array(list));
        }
        task_type::SWITCH => {
            let key = super::schedule::case_key(&value);
            out.insert("evaluationResult".into(), Value::Array(vec![key.into()]));
        }
        _ => {
            out.insert("result".into(), value);
        }
    }
    out
}
