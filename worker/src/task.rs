//! [`Task`]: what a handler gets: the leased task, a place for log lines, and heartbeats.
//!
//! A `Task` is a cheap handle (clone it into helper tasks freely). Its logs travel with the
//! handler's final result; heartbeats go through the worker's connection like results do.

use crate::outbox::Waiter;
use crate::outcome::{self, Logs, Outcome};
use crate::Error;
use proto::model::{Json, Task as ModelTask, TaskResult};
use proto::worker::Lease;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// What tasks ask of the worker's connection.
#[derive(Debug)]
pub(crate) enum Command {
    /// Send this heartbeat; answer `reply` when the node acknowledges or refuses it.
    Heartbeat {
        lease: Lease,
        result: TaskResult,
        reply: Waiter,
    },
}

/// One leased task, as a handler sees it.
#[derive(Debug, Clone)]
pub struct Task {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    task: Box<ModelTask>,
    lease: Lease,
    worker_id: Arc<str>,
    logs: Mutex<Logs>,
    commands: mpsc::Sender<Command>,
}

impl Task {
    pub(crate) fn new(
        task: Box<ModelTask>,
        lease: Lease,
        worker_id: Arc<str>,
        commands: mpsc::Sender<Command>,
    ) -> Task {
        let inner = Inner {
            task,
            lease,
            worker_id,
            logs: Mutex::default(),
            commands,
        };
        Task {
            inner: Arc::new(inner),
        }
    }

    /// The task's input map.
    pub fn input(&self) -> &Json {
        &self.inner.task.input_data
    }

    /// The whole task as the node leased it (Conductor's model).
    pub fn task(&self) -> &ModelTask {
        &self.inner.task
    }

    /// The task (attempt) id.
    pub fn task_id(&self) -> &str {
        self.inner.task.task_id.as_str()
    }

    /// The id of the workflow the task belongs to.
    pub fn workflow_id(&self) -> &str {
        self.inner.task.workflow_instance_id.as_str()
    }

    /// The task type.
    pub fn task_type(&self) -> &str {
        &self.inner.lease.task_type
    }

    /// The lease the task was pushed with; every report quotes it.
    pub fn lease(&self) -> &Lease {
        &self.inner.lease
    }

    /// Adds a log line, reported with the task's result (kept within
    /// [`LOG_LINE_BYTES_MAX`](crate::LOG_LINE_BYTES_MAX) per line,
    /// [`LOGS_BYTES_MAX`](crate::LOGS_BYTES_MAX) and the node's line limit in all).
    pub fn log(&self, line: impl Into<String>) {
        self.lock_logs().push(self.task_id(), line.into(), now_ms());
    }

    /// Tells the node the task is still being worked on, which extends its response timeout
    /// (IN_PROGRESS, no callback delay; the task is not handed out again). Returns when the node
    /// has recorded it, which may wait through a reconnect: bound it with a timeout if needed.
    ///
    /// `Err(Error::Stale)` means the lease has ended (the task timed out, or another worker
    /// holds it now): stop working on it. [`Error::Closed`]: the worker stopped.
    pub async fn heartbeat(&self) -> Result<(), Error> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Heartbeat {
            lease: self.inner.lease.clone(),
            result: outcome::heartbeat_result(&self.inner.task, &self.inner.worker_id),
            reply,
        };
        self.inner
            .commands
            .send(command)
            .await
            .map_err(|_| Error::Closed)?;
        answer.await.map_err(|_| Error::Closed)?
    }

    /// The result reporting `outcome`, with the logs collected so far.
    pub(crate) fn result(&self, outcome: Outcome) -> TaskResult {
        let logs = self.lock_logs().take(self.task_id(), now_ms());
        outcome.into_result(&self.inner.task, &self.inner.worker_id, logs)
    }

    fn lock_logs(&self) -> std::sync::MutexGuard<'_, Logs> {
        // A panic while pushing a line leaves the lines intact: keep using them.
        self.inner.logs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
