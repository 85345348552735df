//! [`Outcome`]: what a handler decides about a task, and its mapping to the
//! [`TaskResult`] the worker reports.
//!
//! The mapping enforces the limits a node would otherwise refuse the whole result for: an output
//! above [`PAYLOAD_BYTES_MAX`] becomes a terminal failure (Conductor does the same; the same
//! input would produce it again), reasons and log lines are truncated, and logs stop at
//! [`TASK_LOGS_MAX`] lines and [`LOGS_BYTES_MAX`] bytes. Together they keep every result frame
//! well under [`proto::worker::FRAME_BYTES_MAX`].

use proto::limits::{PAYLOAD_BYTES_MAX, TASK_LOGS_MAX};
use proto::model::{Json, Task as ModelTask, TaskExecLog, TaskResult, TaskResultStatus};
use serde_json::Value;

/// Longest reason for incompletion reported, in bytes; longer ones are cut.
pub const REASON_BYTES_MAX: usize = 16 * 1024;
/// Longest log line kept, in bytes; longer ones are cut.
pub const LOG_LINE_BYTES_MAX: usize = 8 * 1024;
/// Most log bytes kept per task; lines past it are dropped.
pub const LOGS_BYTES_MAX: usize = 256 * 1024;

/// What a handler decided about a task.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    status: TaskResultStatus,
    output: Json,
    reason: Option<String>,
    callback_after_seconds: u64,
}

impl Outcome {
    /// The task succeeded with `output`. A JSON object is the output map; any other value is
    /// reported as `{"result": value}` (as Conductor's Python SDK does).
    pub fn completed(output: impl Into<Value>) -> Outcome {
        Outcome {
            status: TaskResultStatus::Completed,
            output: output_map(output.into()),
            reason: None,
            callback_after_seconds: 0,
        }
    }

    /// The attempt failed; the task is retried if its definition allows.
    pub fn failed(reason: impl Into<String>) -> Outcome {
        Outcome {
            status: TaskResultStatus::Failed,
            output: Json::new(),
            reason: Some(reason.into()),
            callback_after_seconds: 0,
        }
    }

    /// The task failed for good: no retry, whatever its definition says.
    pub fn failed_terminal(reason: impl Into<String>) -> Outcome {
        Outcome {
            status: TaskResultStatus::FailedWithTerminalError,
            ..Outcome::failed(reason)
        }
    }

    /// Not done yet: the node hands the task out again (to any worker) after
    /// `callback_after_seconds`, with `output` recorded meanwhile. The handler's slot is freed.
    pub fn in_progress(callback_after_seconds: u64, output: impl Into<Value>) -> Outcome {
        Outcome {
            status: TaskResultStatus::InProgress,
            output: output_map(output.into()),
            reason: None,
            callback_after_seconds,
        }
    }

    /// The same outcome with `output` (for example, details of a failure).
    pub fn with_output(mut self, output: impl Into<Value>) -> Outcome {
        self.output = output_map(output.into());
        self
    }

    /// The status reported.
    pub fn status(&self) -> TaskResultStatus {
        self.status
    }

    /// The output reported.
    pub fn output(&self) -> &Json {
        &self.output
    }

    /// The reason for incompletion reported, if any.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// The result reporting this outcome for `task`, with `logs` and the worker's id.
    pub(crate) fn into_result(
        self,
        task: &ModelTask,
        worker_id: &str,
        logs: Vec<TaskExecLog>,
    ) -> TaskResult {
        let Outcome {
            mut status,
            mut output,
            mut reason,
            callback_after_seconds,
        } = self;
        // Serialising a JSON map cannot fail; a failure would only skip the check.
        let output_bytes = serde_json::to_vec(&output).map_or(0, |b| b.len());
        if output_bytes > PAYLOAD_BYTES_MAX {
            status = TaskResultStatus::FailedWithTerminalError;
            output = Json::new();
            reason = Some(format!(
                "the task's output of {output_bytes} bytes exceeds the {PAYLOAD_BYTES_MAX}-byte \
                 limit; store large data elsewhere and output a reference"
            ));
        }
        TaskResult {
            workflow_instance_id: task.workflow_instance_id.as_str().to_owned(),
            task_id: task.task_id.as_str().to_owned(),
            reason_for_incompletion: reason.map(|r| truncate(r, REASON_BYTES_MAX)),
            callback_after_seconds: if status == TaskResultStatus::InProgress {
                callback_after_seconds
            } else {
                0
            },
            worker_id: Some(worker_id.to_owned()),
            status,
            output_data: output,
            logs,
            sub_workflow_id: None,
            extend_lease: false,
        }
    }
}

/// The result of a heartbeat: IN_PROGRESS with no callback delay, which extends the task's
/// response timeout without handing it out again. It carries no output (the node records a
/// result's output, so a heartbeat clears earlier progress output) and no logs (they travel
/// with the final result, so a resent heartbeat cannot duplicate them).
pub(crate) fn heartbeat_result(task: &ModelTask, worker_id: &str) -> TaskResult {
    TaskResult {
        workflow_instance_id: task.workflow_instance_id.as_str().to_owned(),
        task_id: task.task_id.as_str().to_owned(),
        worker_id: Some(worker_id.to_owned()),
        status: TaskResultStatus::InProgress,
        callback_after_seconds: 0,
        extend_lease: true,
        ..TaskResult::default()
    }
}

/// A handler's error (or panic message) as the reason of a FAILED outcome: the error and its
/// chain of sources, `outer: inner: root`.
pub(crate) fn error_reason(error: &(dyn std::error::Error + 'static)) -> String {
    let mut reason = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        reason.push_str(": ");
        reason.push_str(&e.to_string());
        source = e.source();
    }
    reason
}

/// Log lines collected for one task, within the limits above.
#[derive(Debug, Default)]
pub(crate) struct Logs {
    lines: Vec<TaskExecLog>,
    bytes: usize,
    /// Lines dropped for the limits; reported as one last line.
    dropped: usize,
}

impl Logs {
    pub(crate) fn push(&mut self, task_id: &str, line: String, created_time: i64) {
        let line = truncate(line, LOG_LINE_BYTES_MAX);
        // One line is kept back for the "dropped" notice.
        if self.lines.len() + 1 >= TASK_LOGS_MAX || self.bytes + line.len() > LOGS_BYTES_MAX {
            self.dropped += 1;
            return;
        }
        self.bytes += line.len();
        self.lines.push(TaskExecLog {
            log: line,
            task_id: task_id.to_owned(),
            created_time,
        });
    }

    pub(crate) fn take(&mut self, task_id: &str, now_ms: i64) -> Vec<TaskExecLog> {
        let mut lines = std::mem::take(&mut self.lines);
        if self.dropped > 0 {
            lines.push(TaskExecLog {
                log: format!(
                    "({} more log lines dropped: over the log limits)",
                    self.dropped
                ),
                task_id: task_id.to_owned(),
                created_time: now_ms,
            });
        }
        *self = Logs::default();
        lines
    }
}

fn output_map(value: Value) -> Json {
    match value {
        Value::Object(map) => map,
        Value::Null => Json::new(),
        other => Json::from_iter([("result".to_owned(), other)]),
    }
}

/// `s` cut to at most `max` bytes on a character boundary, marked when cut.
fn truncate(mut s: String, max: usize) -> String {
    const MARK: &str = "…";
    if s.len() <= max {
        return s;
    }
    let mut end = max.saturating_sub(MARK.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str(MARK);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task() -> ModelTask {
        serde_json::from_value(json!({
            "taskType": "charge", "status": "IN_PROGRESS", "inputData": {"amount": 3},
            "referenceTaskName": "charge_ref", "retryCount": 0, "seq": 1, "pollCount": 1,
            "taskDefName": "charge", "scheduledTime": 0, "startTime": 0, "endTime": 0,
            "updateTime": 0, "startDelayInSeconds": 0, "retried": false, "executed": false,
            "callbackFromWorker": true, "responseTimeoutSeconds": 60,
            "workflowInstanceId": "wf-1", "workflowType": "billing", "taskId": "task-1",
            "callbackAfterSeconds": 0, "outputData": {},
            "workflowTask": {"name": "charge", "taskReferenceName": "charge_ref", "type": "SIMPLE"},
            "workflowPriority": 0, "iteration": 0, "firstScheduledTime": 0
        }))
        .expect("a task")
    }

    fn log(line: &str) -> TaskExecLog {
        TaskExecLog {
            log: line.into(),
            task_id: "task-1".into(),
            created_time: 5,
        }
    }

    /// Table: outcome -> (status, output, reason, callback).
    #[test]
    fn outcomes_map_to_results() {
        let cases: Vec<(Outcome, TaskResultStatus, Value, Option<&str>, u64)> = vec![
            (
                Outcome::completed(json!({"ok": true})),
                TaskResultStatus::Completed,
                json!({"ok": true}),
                None,
                0,
            ),
            (
                Outcome::completed(json!(42)),
                TaskResultStatus::Completed,
                json!({"result": 42}),
                None,
                0,
            ),
            (
                Outcome::completed(Value::Null),
                TaskResultStatus::Completed,
                json!({}),
                None,
                0,
            ),
            (
                Outcome::failed("card declined"),
                TaskResultStatus::Failed,
                json!({}),
                Some("card declined"),
                0,
            ),
            (
                Outcome::failed_terminal("no such account").with_output(json!({"code": 7})),
                TaskResultStatus::FailedWithTerminalError,
                json!({"code": 7}),
                Some("no such account"),
                0,
            ),
            (
                Outcome::in_progress(30, json!({"step": 2})),
                TaskResultStatus::InProgress,
                json!({"step": 2}),
                None,
                30,
            ),
        ];
        for (outcome, status, output, reason, callback) in cases {
            let r = outcome.into_result(&task(), "w1", vec![log("hi")]);
            assert_eq!(r.status, status);
            assert_eq!(Value::Object(r.output_data), output);
            assert_eq!(r.reason_for_incompletion.as_deref(), reason);
            assert_eq!(r.callback_after_seconds, callback);
            assert_eq!(r.workflow_instance_id, "wf-1");
            assert_eq!(r.task_id, "task-1");
            assert_eq!(r.worker_id.as_deref(), Some("w1"));
            assert_eq!(r.logs, [log("hi")]);
            assert!(!r.extend_lease);
        }
    }

    #[test]
    fn an_oversized_output_fails_the_task_for_good() {
        let big = "x".repeat(PAYLOAD_BYTES_MAX);
        let r = Outcome::completed(json!({ "blob": big })).into_result(&task(), "w1", vec![]);
        assert_eq!(r.status, TaskResultStatus::FailedWithTerminalError);
        assert!(r.output_data.is_empty());
        assert!(r
            .reason_for_incompletion
            .expect("a reason")
            .contains("exceeds"));
    }

    #[test]
    fn long_reasons_are_cut_on_a_character_boundary() {
        let r = Outcome::failed("é".repeat(REASON_BYTES_MAX)).into_result(&task(), "w1", vec![]);
        let reason = r.reason_for_incompletion.expect("a reason");
        assert!(reason.len() <= REASON_BYTES_MAX && reason.ends_with('…'));
    }

    #[test]
    fn heartbeats_extend_without_callback_output_or_logs() {
        let r = heartbeat_result(&task(), "w1");
        assert_eq!(r.status, TaskResultStatus::InProgress);
        assert_eq!(r.callback_after_seconds, 0);
        assert!(r.extend_lease && r.output_data.is_empty() && r.logs.is_empty());
        assert_eq!(
            (r.task_id.as_str(), r.workflow_instance_id.as_str()),
            ("task-1", "wf-1")
        );
    }

    #[test]
    fn error_reasons_include_their_sources() {
        #[derive(Debug, thiserror::Error)]
        #[error("writing the file")]
        struct Write(#[source] std::io::Error);
        #[derive(Debug, thiserror::Error)]
        #[error("saving the receipt")]
        struct Save(#[source] Write);
        let root = std::io::Error::other("disk on fire");
        assert_eq!(
            error_reason(&Save(Write(root))),
            "saving the receipt: writing the file: disk on fire"
        );
    }

    #[test]
    fn logs_stop_at_their_limits_and_say_so() {
        let mut logs = Logs::default();
        for i in 0..TASK_LOGS_MAX + 10 {
            logs.push("task-1", format!("line {i}"), 1);
        }
        let lines = logs.take("task-1", 9);
        assert_eq!(lines.len(), TASK_LOGS_MAX);
        assert_eq!(lines[0].log, "line 0");
        assert!(lines[TASK_LOGS_MAX - 1]
            .log
            .starts_with("(11 more log lines dropped"));
        assert!(logs.take("task-1", 9).is_empty(), "taken once");

        let mut logs = Logs::default();
        for _ in 0..100 {
            logs.push("task-1", "y".repeat(LOG_LINE_BYTES_MAX * 2), 1);
        }
        let lines = logs.take("task-1", 9);
        let bytes: usize = lines.iter().map(|l| l.log.len()).sum();
        assert!(bytes <= LOGS_BYTES_MAX + 100);
        assert!(lines[0].log.len() <= LOG_LINE_BYTES_MAX);
    }
}
