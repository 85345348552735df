//! `Flusher`: group commit for a group's log. `LogStore::append` writes entries into sled (memory)
//! and hands openraft's "flushed" callback to this task instead of flushing itself; the task takes
//! every callback queued so far, flushes the database once, then completes them in order. openraft
//! 0.9 appends one client write at a time, so flushing inside `append` would cost one disk flush
//! per proposal; here concurrent proposals share one.
//!
//! Nothing is acknowledged before its flush: openraft counts an entry as stored on this node only
//! when its callback completes, and commits (and answers the proposer) only after that. Operations
//! that must not overtake earlier appends — saving a vote, truncating the log — first wait on a
//! barrier: a flush that completes every callback queued before it, which gives them the same
//! ordering as a store that flushed inside `append`.

use crate::types::TypeConfig;
use openraft::storage::LogFlushed;
use tokio::sync::{mpsc, oneshot};

/// One request to the flush task.
enum Flush {
    /// Complete this callback after the next flush.
    Appended(LogFlushed<TypeConfig>),
    /// Flush, complete every earlier callback, then answer.
    Barrier(oneshot::Sender<Result<(), String>>),
}

/// Handle to a group's flush task; cheap to clone. The task ends when every handle is dropped.
#[derive(Clone)]
pub struct Flusher {
    tx: mpsc::Sender<Flush>,
}

impl Flusher {
    /// Starts the flush task for `db`. At most `queue_max` callbacks wait for a flush (appends
    /// beyond it wait: back-pressure), and one flush completes at most `queue_max` of them.
    pub fn spawn(db: sled::Db, queue_max: usize) -> Self {
        let (tx, rx) = mpsc::channel(queue_max.max(1));
        tokio::spawn(run(db, rx, queue_max.max(1)));
        Flusher { tx }
    }

    /// Queues `callback` for the next flush.
    pub async fn appended(&self, callback: LogFlushed<TypeConfig>) -> Result<(), String> {
        self.tx
            .send(Flush::Appended(callback))
            .await
            .map_err(|_| "the flush task has stopped".to_string())
    }

    /// Flushes the database and waits until every earlier callback is completed.
    pub async fn barrier(&self) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Flush::Barrier(tx))
            .await
            .map_err(|_| "the flush task has stopped".to_string())?;
        rx.await
            .map_err(|_| "the flush task has stopped".to_string())?
    }
}

async fn run(db: sled::Db, mut rx: mpsc::Receiver<Flush>, batch_max: usize) {
    let mut pending = Vec::with_capacity(batch_max);
    while let Some(first) = rx.recv().await {
        pending.push(first);
        while pending.len() < batch_max {
            match rx.try_recv() {
                Ok(more) => pending.push(more),
                Err(_) => break,
            }
        }
        // Every write whose callback is in `pending` was applied to sled before the callback was
        // queued, so this one flush makes all of them durable.
        let result = db
            .flush_async()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string());
        tracing::trace!(requests = pending.len(), ok = result.is_ok(), "log flushed");
        for request in pending.drain(..) {
            match request {
                Flush::Appended(callback) => {
                    callback.log_io_completed(result.clone().map_err(std::io::Error::other));
                }
                Flush::Barrier(tx) => {
                    let _ = tx.send(result.clone());
                }
            }
        }
    }
}
