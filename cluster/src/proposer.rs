//! `Proposer`: group commit for one group. Callers hand it single commands; it packs the commands
//! that arrived meanwhile into one log entry (up to `batch_commands_max` / `batch_bytes_max`), so
//! many concurrent proposals cost one Raft round and one disk flush instead of one each. openraft
//! 0.9 appends one client write at a time and waits for its flush before the next, which is why the
//! batching lives here rather than in the log store.
//!
//! At most `batches_in_flight_max` batches are submitted and not yet applied; while they are in
//! flight new commands queue (up to `proposals_in_flight_max`, then callers wait) and form the next
//! batch. An idle group sends a lone command at once, so batching adds no latency when there is
//! nothing to batch. Batches are submitted in arrival order, so commands are applied in the order
//! they reached the proposer.

use crate::error::Error;
use crate::types::{Request, TypeConfig};
use openraft::Raft;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// What a caller gets back: the log index of the entry that carried its command (shared with the
/// other commands of that batch) and the state machine's answer.
pub type Proposed = Result<(u64, Vec<u8>), Error>;

/// One command waiting for a batch.
struct Proposal {
    command: Vec<u8>,
    reply: oneshot::Sender<Proposed>,
}

/// Limits of one proposer (copied from the group's options).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Commands queued for batching before callers wait.
    pub queue_max: usize,
    /// Commands per batch.
    pub batch_commands_max: usize,
    /// Bytes per batch; the batch closes once reached (one command may overshoot it).
    pub batch_bytes_max: usize,
    /// Batches submitted and not yet applied.
    pub batches_in_flight_max: usize,
}

/// Handle to a group's proposer task; cheap to clone. The task ends when every handle is dropped
/// or when it is aborted.
#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::Sender<Proposal>,
    task: tokio::task::AbortHandle,
}

impl Proposer {
    /// Starts the proposer of `raft`.
    pub fn spawn(raft: Raft<TypeConfig>, limits: Limits, group: String) -> Self {
        let (tx, rx) = mpsc::channel(limits.queue_max.max(1));
        let task = tokio::spawn(run(raft, rx, limits, group)).abort_handle();
        Proposer { tx, task }
    }

    /// Queues `command` for the next batch and waits until it is committed and applied.
    pub async fn propose(&self, command: Vec<u8>) -> Proposed {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Proposal { command, reply })
            .await
            .map_err(|_| Error::ShuttingDown)?;
        answer.await.map_err(|_| Error::ShuttingDown)?
    }

    /// Stops the task; queued proposals fail with `ShuttingDown`.
    pub fn stop(&self) {
        self.task.abort();
    }
}

async fn run(
    raft: Raft<TypeConfig>,
    mut rx: mpsc::Receiver<Proposal>,
    limits: Limits,
    group: String,
) {
    let in_flight = Arc::new(Semaphore::new(limits.batches_in_flight_max.max(1)));
    while let Some(first) = rx.recv().await {
        // Waiting here, not before `recv`, lets commands pile up in the queue while earlier
        // batches are in flight: they all go into the next batch.
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            break;
        };
        let mut bytes = first.command.len();
        let mut batch = vec![first];
        while batch.len() < limits.batch_commands_max && bytes < limits.batch_bytes_max {
            match rx.try_recv() {
                Ok(more) => {
                    bytes += more.command.len();
                    batch.push(more);
                }
                Err(_) => break,
            }
        }
        let (commands, replies): (Vec<_>, Vec<_>) =
            batch.into_iter().map(|p| (p.command, p.reply)).unzip();
        tracing::trace!(commands = commands.len(), bytes, "proposing batch");
        crate::metrics::proposed(&group, commands.len());
        let proposed_at = std::time::Instant::now();
        match raft
            .client_write_ff(Request(crate::pack::pack(commands)))
            .await
        {
            Err(fatal) => {
                let error = Error::from(fatal);
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
            Ok(written) => {
                let group = group.clone();
                tokio::spawn(async move {
                    let outcome = match written.await {
                        Ok(Ok(response)) => Ok((response.log_id.index, response.data.0)),
                        Ok(Err(e)) => Err(Error::from(e)),
                        Err(_) => Err(Error::ShuttingDown),
                    };
                    drop(permit);
                    if outcome.is_ok() {
                        let took = proposed_at.elapsed();
                        crate::metrics::timed(crate::metrics::COMMIT_SECONDS, &group, took);
                    }
                    answer(replies, outcome);
                });
            }
        }
    }
}

/// Hands each caller its command's answer (or the batch's error).
fn answer(replies: Vec<oneshot::Sender<Proposed>>, outcome: Result<(u64, Vec<Vec<u8>>), Error>) {
    match outcome {
        Ok((index, answers)) => {
            let mut answers = answers.into_iter();
            for reply in replies {
                let result = answers.next().map(|a| (index, a)).ok_or_else(|| {
                    Error::Raft(format!(
                        "entry {index} answered fewer commands than it carried"
                    ))
                });
                let _ = reply.send(result);
            }
        }
        Err(error) => {
            for reply in replies {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}
