//! Handlers: the user's async functions, one per task type, type-erased so that a worker can hold
//! many; and running one so that an error or a panic becomes a FAILED outcome instead of a lost
//! task.

use crate::outcome::{error_reason, Outcome};
use crate::Task;
use futures::future::BoxFuture;
use futures::FutureExt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// The error a handler may return: anything convertible with `?` or `.into()` (every
/// `std::error::Error + Send + Sync`, `anyhow::Error`, `String`, `&str`). It fails the attempt
/// (FAILED, retried per the task definition) with its text, sources included, as the reason.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A type-erased handler.
pub(crate) type HandlerFn =
    Arc<dyn Fn(Task) -> BoxFuture<'static, Result<Outcome, BoxError>> + Send + Sync>;

/// Erases `f`'s type.
pub(crate) fn erase<F, Fut>(f: F) -> HandlerFn
where
    F: Fn(Task) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Outcome, BoxError>> + Send + 'static,
{
    Arc::new(move |task| f(task).boxed())
}

/// Runs `handler` on `task`: an `Err` or a panic fails the attempt with its text as the reason.
pub(crate) async fn run(handler: &HandlerFn, task: Task) -> Outcome {
    // The call itself may panic as well as the future: both happen inside catch_unwind. Nothing
    // the handler touched is looked at after a panic except the task's logs, which stay usable.
    let call = AssertUnwindSafe(async { handler(task).await }).catch_unwind();
    match call.await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(error)) => Outcome::failed(error_reason(error.as_ref())),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-text panic payload".to_owned());
            tracing::warn!(%message, "task handler panicked");
            Outcome::failed(format!("the task handler panicked: {message}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::model::TaskResultStatus;
    use proto::worker::Lease;
    use serde_json::json;
    use tokio::sync::mpsc;

    fn task() -> Task {
        let model = serde_json::from_value(json!({
            "taskType": "t", "status": "IN_PROGRESS", "inputData": {"x": 1},
            "referenceTaskName": "t_ref", "retryCount": 0, "seq": 1, "pollCount": 1,
            "taskDefName": "t", "scheduledTime": 0, "startTime": 0, "endTime": 0,
            "updateTime": 0, "startDelayInSeconds": 0, "retried": false, "executed": false,
            "callbackFromWorker": true, "responseTimeoutSeconds": 60,
            "workflowInstanceId": "wf", "workflowType": "w", "taskId": "tk",
            "callbackAfterSeconds": 0, "outputData": {},
            "workflowTask": {"name": "t", "taskReferenceName": "t_ref", "type": "SIMPLE"},
            "workflowPriority": 0, "iteration": 0, "firstScheduledTime": 0
        }))
        .expect("a task");
        let lease = Lease {
            task_id: "tk".into(),
            task_type: "t".into(),
            poll_count: 1,
        };
        let (commands, _) = mpsc::channel(1);
        Task::new(Box::new(model), lease, "w1".into(), commands)
    }

    #[tokio::test]
    async fn errors_and_panics_fail_the_attempt_and_keep_the_logs() {
        let ok = erase(|t: Task| async move {
            t.log("working");
            Ok(Outcome::completed(json!({"echo": t.input()})))
        });
        let err = erase(|t: Task| async move {
            t.log("about to fail");
            Err("card declined".into())
        });
        let panics = erase(|t: Task| async move {
            t.log("about to panic");
            if t.task_id() == "tk" {
                panic!("bug {}", 7);
            }
            Ok(Outcome::completed(json!({})))
        });
        let cases = [
            (ok, TaskResultStatus::Completed, None, "working"),
            (
                err,
                TaskResultStatus::Failed,
                Some("card declined"),
                "about to fail",
            ),
            (
                panics,
                TaskResultStatus::Failed,
                Some("the task handler panicked: bug 7"),
                "about to panic",
            ),
        ];
        for (handler, status, reason, line) in cases {
            let t = task();
            let outcome = run(&handler, t.clone()).await;
            let r = t.result(outcome);
            assert_eq!(r.status, status);
            assert_eq!(r.reason_for_incompletion.as_deref(), reason);
            assert_eq!(r.logs.len(), 1);
            assert_eq!(r.logs[0].log, line);
            assert_eq!(r.logs[0].task_id, "tk");
        }
    }

    #[tokio::test]
    async fn a_heartbeat_without_a_worker_reports_closed() {
        assert_eq!(task().heartbeat().await, Err(crate::Error::Closed));
    }
}
