//! SUB_WORKFLOW: a task whose work is a child workflow.
//!
//! The child starts under an id derived from the parent's task (`sub:` + the task's id), on a
//! partition chosen by that id's hash, so it usually runs elsewhere in the cluster and a
//! repeated start (the parent's leader died between its commit and the child's start, or the
//! `Perform` timer asked again) finds it started: one child per task attempt. The start
//! reports the child's id; the task is then IN_PROGRESS with `subWorkflowId` until the child
//! ends. The child's end is sent to the parent (`Input::ChildEnded`, [`parent_notice`]) after
//! the child's final write commits; should that be lost with a leader, the parent's task asks
//! for the child's state on a timer that backs off from 15 s to a minute ([`CHECK_FIRST_MS`]).
//! A parent that ends terminates its running children; pausing and resuming it does the same
//! to them ([`to_children`]).
//!
//! A retry with `resumeSubworkflowTasks` (`ops::retry`) puts a failed task back IN_PROGRESS with
//! `subworkflowChanged`: its work is then to retry the same child ([`Work::RetryChild`], on the
//! child's partition, the same way: a grandchild that failed is resumed in its turn), and once
//! that is reported the task waits for the child's next end as after its start.

use super::derived::spread_id;
use super::{Effect, Input, NowMs, StartRequest, Work};
use proto::model::{task_type, Json, Task, TaskStatus, Workflow, WorkflowStatus};
use proto::{TaskId, WorkflowId};
use serde_json::Value;

/// How long after its start (or its last check) a running child is first asked about.
pub(crate) const CHECK_FIRST_MS: NowMs = 15_000;
/// The longest wait between two checks of a running child.
pub(crate) const CHECK_MAX_MS: NowMs = 60_000;

/// The child of `t` (a SUB_WORKFLOW task) as its start asks for it.
pub(crate) fn start_request(wf: &Workflow, t: &Task) -> StartRequest {
    let input = &t.input_data;
    let text = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_owned);
    // Version 0, like none, is the latest (as in Conductor).
    let version = input
        .get("subWorkflowVersion")
        .and_then(|v| match v {
            Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        })
        .filter(|v| *v > 0);
    let definition = input
        .get("subWorkflowDefinition")
        .and_then(|d| serde_json::from_value(d.clone()).ok())
        .map(Box::new);
    // A DSL instance's child gets exactly the input its `run` gives, even an empty one.
    let dsl = wf.workflow_definition.dsl.is_some();
    let child_input = match input.get("workflowInput") {
        Some(Value::Object(m)) if !m.is_empty() || dsl => m.clone(),
        _ => input.clone(),
    };
    let task_to_domain = input
        .get("subWorkflowTaskToDomain")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_else(|| wf.task_to_domain.clone());
    let mut workflow_id = child_id(&wf.workflow_id, &t.task_id);
    if crate::mutation::active(crate::mutation::Mutation::SubWorkflowTwice) {
        workflow_id = spread_id(&format!(
            "sub:{}:{}:{}",
            wf.workflow_id, t.task_id, wf.update_time
        ));
    }
    StartRequest {
        workflow_id,
        name: text("subWorkflowName").unwrap_or_default(),
        version,
        input: child_input,
        correlation_id: wf.correlation_id.clone(),
        task_to_domain,
        parent: Some((wf.workflow_id.clone(), t.task_id.clone())),
        definition,
    }
}

/// The child's id: from the parent's task, on the partition its hash picks.
fn child_id(parent: &WorkflowId, task: &TaskId) -> WorkflowId {
    spread_id(&format!("sub:{parent}:{task}"))
}

/// The child a SUB_WORKFLOW task waits for, while it waits.
pub(crate) fn watched_child(t: &Task) -> Option<WorkflowId> {
    let waiting =
        t.workflow_task.task_type == task_type::SUB_WORKFLOW && t.status == TaskStatus::InProgress;
    let id = t.sub_workflow_id.as_deref().filter(|_| waiting)?;
    WorkflowId::parse(id).ok()
}

/// The child whose end a SUB_WORKFLOW task takes: the one it waits for, or, while its start is
/// not yet reported, the one its start creates (a child may end before the parent hears that
/// it started).
pub(crate) fn expected_child(wf: &Workflow, t: &Task) -> Option<WorkflowId> {
    let sub = t.workflow_task.task_type == task_type::SUB_WORKFLOW;
    match t.status {
        TaskStatus::Scheduled if sub => Some(child_id(&wf.workflow_id, &t.task_id)),
        _ => watched_child(t),
    }
}

/// When a waiting SUB_WORKFLOW task asks for its child's state next (not while the child's
/// retry is pending: the child still shows the end that is being retried).
pub(crate) fn check_due(t: &Task) -> Option<NowMs> {
    watched_child(t).filter(|_| !t.subworkflow_changed)?;
    let wait = CHECK_FIRST_MS.saturating_mul(1 << t.poll_count.min(16));
    Some(t.update_time.saturating_add(wait.min(CHECK_MAX_MS)))
}

/// The message to its parent that a workflow which just ended sends, if it is a child.
pub(crate) fn parent_notice(wf: &Workflow) -> Option<Effect> {
    let parent = WorkflowId::parse(wf.parent_workflow_id.as_deref()?).ok()?;
    let task_id = TaskId::parse(wf.parent_workflow_task_id.as_deref()?).ok()?;
    let input = Input::ChildEnded {
        task_id,
        child: wf.workflow_id.clone(),
        status: wf.status,
        output: wf.output.clone(),
        reason: wf.reason_for_incompletion.clone(),
    };
    Some(Effect::Notify {
        workflow_id: parent,
        input: Box::new(input),
    })
}

/// `input` sent to every child `wf`'s SUB_WORKFLOW tasks wait for.
pub(crate) fn to_children(wf: &Workflow, input: &Input) -> Vec<Effect> {
    wf.tasks
        .iter()
        .filter_map(watched_child)
        .map(|child| Effect::Notify {
            workflow_id: child,
            input: Box::new(input.clone()),
        })
        .collect()
}

/// The parent task's status and output for its child's end.
pub(crate) fn outcome_of(
    status: WorkflowStatus,
    child: &WorkflowId,
    output: Json,
) -> (TaskStatus, Json) {
    let mut out = output;
    out.insert("subWorkflowId".into(), child.as_str().into());
    let status = match status {
        WorkflowStatus::Completed => TaskStatus::Completed,
        WorkflowStatus::TimedOut => TaskStatus::TimedOut,
        WorkflowStatus::Terminated => TaskStatus::Canceled,
        _ => TaskStatus::Failed,
    };
    (status, out)
}

/// The work of a SUB_WORKFLOW task resumed by a retry: retry its child.
pub(crate) fn retry_work(t: &Task) -> Option<Work> {
    let resumed = t.workflow_task.task_type == task_type::SUB_WORKFLOW
        && t.status == TaskStatus::InProgress
        && t.subworkflow_changed;
    let child = t.sub_workflow_id.as_deref().filter(|_| resumed)?;
    WorkflowId::parse(child).ok().map(Work::RetryChild)
}
