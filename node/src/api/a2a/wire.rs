//! A task, its status, messages, parts and stream events as JSON, in the spelling of the protocol
//! version the request used: v0.3 (`kind` fields, `completed`, `user`, results as they are) or
//! v1.0 (`TASK_STATE_COMPLETED`, `ROLE_USER`, parts without `kind`, results wrapped in a field
//! that names their type).

use proto::model::{EpochMs, Json, Workflow, WorkflowStatus};
use serde_json::{json, Value};

/// The protocol version a request was spelled in; the answer is spelled the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    V03,
    V10,
}

/// An A2A task's state (those a workflow can be in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Working,
    /// A Serverless Workflow instance waits in a `listen`: a message continuing the task
    /// (`taskId`) delivers the event it waits for.
    InputRequired,
    Completed,
    Failed,
    Canceled,
}

impl TaskState {
    /// The state of the task `wf` runs.
    pub fn of(wf: &Workflow) -> Self {
        if crate::watch::listens(wf) {
            return TaskState::InputRequired;
        }
        Self::of_status(wf.status)
    }

    /// The state of a task whose workflow is in `status` (a paused workflow still works).
    pub fn of_status(status: WorkflowStatus) -> Self {
        match status {
            WorkflowStatus::Running | WorkflowStatus::Paused => TaskState::Working,
            WorkflowStatus::Completed => TaskState::Completed,
            WorkflowStatus::Failed | WorkflowStatus::TimedOut => TaskState::Failed,
            WorkflowStatus::Terminated => TaskState::Canceled,
        }
    }

    pub fn spelled(self, dialect: Dialect) -> &'static str {
        match (self, dialect) {
            (TaskState::Working, Dialect::V03) => "working",
            (TaskState::Completed, Dialect::V03) => "completed",
            (TaskState::Failed, Dialect::V03) => "failed",
            (TaskState::Canceled, Dialect::V03) => "canceled",
            (TaskState::InputRequired, Dialect::V03) => "input-required",
            (TaskState::Working, Dialect::V10) => "TASK_STATE_WORKING",
            (TaskState::InputRequired, Dialect::V10) => "TASK_STATE_INPUT_REQUIRED",
            (TaskState::Completed, Dialect::V10) => "TASK_STATE_COMPLETED",
            (TaskState::Failed, Dialect::V10) => "TASK_STATE_FAILED",
            (TaskState::Canceled, Dialect::V10) => "TASK_STATE_CANCELED",
        }
    }

    /// The workflow statuses of tasks in a state named in either spelling (a filter).
    pub fn parse(name: &str) -> Option<Vec<WorkflowStatus>> {
        let bare = name.trim_start_matches("TASK_STATE_").to_ascii_lowercase();
        Some(match bare.as_str() {
            "working" => vec![WorkflowStatus::Running, WorkflowStatus::Paused],
            // A filter by workflow status: the running ones, listening or not.
            "input-required" | "input_required" => vec![WorkflowStatus::Running],
            "completed" => vec![WorkflowStatus::Completed],
            "failed" => vec![WorkflowStatus::Failed, WorkflowStatus::TimedOut],
            "canceled" | "cancelled" => vec![WorkflowStatus::Terminated],
            _ => return None,
        })
    }
}

/// The id of the artifact that holds a completed task's output.
pub const OUTPUT_ARTIFACT: &str = "output";

/// A time as A2A writes it (RFC 3339, UTC, milliseconds).
pub fn timestamp(ms: EpochMs) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub fn data_part(data: &Json, dialect: Dialect) -> Value {
    match dialect {
        Dialect::V03 => json!({"kind": "data", "data": data}),
        Dialect::V10 => json!({"data": data, "mediaType": "application/json"}),
    }
}

pub fn text_part(text: &str, dialect: Dialect) -> Value {
    match dialect {
        Dialect::V03 => json!({"kind": "text", "text": text}),
        Dialect::V10 => json!({"text": text}),
    }
}

/// A message of `role` (`user` or `agent`) in the task of `wf`.
pub fn message(wf: &Workflow, role: &str, id: &str, parts: Vec<Value>, d: Dialect) -> Value {
    let mut m = json!({
        "messageId": id,
        "taskId": wf.workflow_id.to_string(),
        "contextId": context_id(wf),
        "parts": parts,
    });
    m["role"] = match d {
        Dialect::V03 => json!(role),
        Dialect::V10 => json!(format!("ROLE_{}", role.to_ascii_uppercase())),
    };
    if d == Dialect::V03 {
        m["kind"] = json!("message");
    }
    m
}

/// The request as the workflow received it: its input, as a data part.
pub fn request_message(wf: &Workflow, d: Dialect) -> Value {
    let id = format!("{}-request", wf.workflow_id);
    message(wf, "user", &id, vec![data_part(&wf.input, d)], d)
}

/// A task's context: the workflow's correlation id, or its id when it has none.
pub fn context_id(wf: &Workflow) -> String {
    match &wf.correlation_id {
        Some(c) if !c.is_empty() => c.clone(),
        _ => wf.workflow_id.to_string(),
    }
}

/// The task's status; a failed or canceled one says why in an agent message.
pub fn status(wf: &Workflow, d: Dialect) -> Value {
    let state = TaskState::of(wf);
    let mut status = json!({"state": state.spelled(d), "timestamp": timestamp(wf.update_time)});
    let reason = wf
        .reason_for_incompletion
        .as_deref()
        .filter(|r| !r.is_empty());
    if let (TaskState::Failed | TaskState::Canceled, Some(reason)) = (state, reason) {
        let id = format!("{}-status", wf.workflow_id);
        status["message"] = message(wf, "agent", &id, vec![text_part(reason, d)], d);
    }
    status
}

/// A completed task's output, as its one artifact.
pub fn artifact(wf: &Workflow, d: Dialect) -> Option<Value> {
    (wf.status == WorkflowStatus::Completed).then(|| {
        json!({
            "artifactId": OUTPUT_ARTIFACT,
            "name": OUTPUT_ARTIFACT,
            "parts": [data_part(&wf.output, d)],
        })
    })
}

/// The task of `wf`, with `history` (the messages it was sent).
pub fn task(wf: &Workflow, history: Vec<Value>, d: Dialect) -> Value {
    let mut task = json!({
        "id": wf.workflow_id.to_string(),
        "contextId": context_id(wf),
        "status": status(wf, d),
        "artifacts": artifact(wf, d).into_iter().collect::<Vec<_>>(),
        "history": history,
        "metadata": {
            "workflowName": wf.workflow_name,
            "workflowVersion": wf.workflow_version,
            "workflowStatus": wf.status,
        },
    });
    if d == Dialect::V03 {
        task["kind"] = json!("task");
    }
    task
}

/// `message/send`'s result: the task (v1.0 wraps it in `task`).
pub fn send_result(task: Value, d: Dialect) -> Value {
    wrap("task", task, d)
}

/// A stream's event carrying the whole task.
pub fn task_event(task: Value, d: Dialect) -> Value {
    wrap("task", task, d)
}

/// A stream's event saying the task's status; `last` on the final one (v0.3's `final`; a v1.0
/// stream just ends).
pub fn status_event(wf: &Workflow, last: bool, d: Dialect) -> Value {
    let mut event = json!({
        "taskId": wf.workflow_id.to_string(),
        "contextId": context_id(wf),
        "status": status(wf, d),
    });
    match d {
        Dialect::V03 => {
            event["kind"] = json!("status-update");
            event["final"] = json!(last);
            event
        }
        Dialect::V10 => json!({"statusUpdate": event}),
    }
}

/// A stream's event carrying a completed task's output artifact.
pub fn artifact_event(wf: &Workflow, d: Dialect) -> Option<Value> {
    let mut event = json!({
        "taskId": wf.workflow_id.to_string(),
        "contextId": context_id(wf),
        "artifact": artifact(wf, d)?,
        "lastChunk": true,
    });
    Some(match d {
        Dialect::V03 => {
            event["kind"] = json!("artifact-update");
            event
        }
        Dialect::V10 => json!({"artifactUpdate": event}),
    })
}

fn wrap(field: &str, value: Value, d: Dialect) -> Value {
    match d {
        Dialect::V03 => value,
        Dialect::V10 => json!({ field: value }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::{PartitionId, WorkflowId};

    fn workflow(status: WorkflowStatus) -> Workflow {
        let wf = json!({
            "workflowId": WorkflowId::new(PartitionId(1), 7).to_string(),
            "workflowName": "sum", "workflowVersion": 2, "status": status,
            "createTime": 0, "updateTime": 1_700_000_000_123_i64, "startTime": 0, "endTime": 0,
            "input": {"a": 1}, "output": {"sum": 3}, "correlationId": "ctx-1",
            "reasonForIncompletion": "boom", "taskToDomain": {}, "failedReferenceTaskNames": [],
            "failedTaskNames": [], "priority": 0, "variables": {}, "lastRetriedTime": 0,
        });
        serde_json::from_value(wf).expect("a workflow")
    }

    #[test]
    fn workflow_statuses_map_to_task_states() {
        use WorkflowStatus::*;
        let states =
            [Running, Paused, Completed, Failed, TimedOut, Terminated].map(TaskState::of_status);
        let v03 = states.map(|s| s.spelled(Dialect::V03));
        let want = [
            "working",
            "working",
            "completed",
            "failed",
            "failed",
            "canceled",
        ];
        assert_eq!(v03, want);
        assert_eq!(
            TaskState::Canceled.spelled(Dialect::V10),
            "TASK_STATE_CANCELED"
        );
        assert_eq!(
            TaskState::parse("TASK_STATE_COMPLETED"),
            Some(vec![Completed])
        );
        assert_eq!(TaskState::parse("failed"), Some(vec![Failed, TimedOut]));
        assert_eq!(TaskState::parse("rejected"), None);
    }

    #[test]
    fn a_completed_task_carries_its_output() {
        let wf = workflow(WorkflowStatus::Completed);
        let task = task(&wf, vec![request_message(&wf, Dialect::V03)], Dialect::V03);
        assert_eq!(task["kind"], "task");
        assert_eq!(task["contextId"], "ctx-1");
        assert_eq!(task["status"]["state"], "completed");
        assert_eq!(task["status"]["timestamp"], "2023-11-14T22:13:20.123Z");
        assert_eq!(
            task["artifacts"][0]["parts"][0],
            json!({"kind": "data", "data": {"sum": 3}})
        );
        assert_eq!(task["history"][0]["role"], "user");
        assert_eq!(task["history"][0]["parts"][0]["data"], json!({"a": 1}));
        assert!(task["status"].get("message").is_none());
    }

    #[test]
    fn v1_spells_states_roles_and_results_its_way() {
        let wf = workflow(WorkflowStatus::Failed);
        let task = task(&wf, vec![request_message(&wf, Dialect::V10)], Dialect::V10);
        assert!(task.get("kind").is_none());
        assert_eq!(task["status"]["state"], "TASK_STATE_FAILED");
        assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
        assert_eq!(
            task["status"]["message"]["parts"][0],
            json!({"text": "boom"})
        );
        assert_eq!(task["artifacts"], json!([]));
        assert_eq!(send_result(task.clone(), Dialect::V10)["task"], task);
        let update = status_event(&wf, true, Dialect::V10);
        assert_eq!(
            update["statusUpdate"]["status"]["state"],
            "TASK_STATE_FAILED"
        );
        assert!(update["statusUpdate"].get("final").is_none());
    }

    #[test]
    fn v03_stream_events_say_their_kind() {
        let wf = workflow(WorkflowStatus::Completed);
        let update = status_event(&wf, true, Dialect::V03);
        assert_eq!(
            (&update["kind"], &update["final"]),
            (&json!("status-update"), &json!(true))
        );
        let artifact = artifact_event(&wf, Dialect::V03).expect("completed");
        assert_eq!(artifact["kind"], "artifact-update");
        assert_eq!(artifact["artifact"]["artifactId"], OUTPUT_ARTIFACT);
        assert!(artifact_event(&workflow(WorkflowStatus::Running), Dialect::V03).is_none());
    }
}
