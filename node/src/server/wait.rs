//! Waiting for a workflow to get somewhere: `POST /api/workflow/execute/{name}/{version}` starts a
//! workflow and answers once it has finished, has reached one of the tasks the caller named, or the
//! caller's wait is over (then with the workflow as it stands, still RUNNING).
//!
//! The wait runs where the workflow's actor runs, on its partition's leader: the actor publishes
//! after every committed decision, which wakes the waiter once the workflow got where it waits
//! ([`crate::watch`]); the waiter then re-reads the committed record. A node that does not lead
//! the partition forwards the wait there ([`Forward::Wait`]); if that fails (the leader moved or
//! died, or is a build that does not know the request) it reads the record through the usual
//! routing and tries again after a pause that grows. The leader re-reads now and then even
//! without a wake-up, so a leadership change while it waits costs at most that pause.
//!
//! An execute whose wait fails (no leader within the routing's deadline) answers an error although
//! its start committed: a client that retries it should send an `idempotencyKey`, so the retry
//! waits for the same run instead of starting another.

use super::routing::Target;
use super::Inner;
use crate::error::{Error, Result};
use crate::forward::{Forward, Reply, FORWARD_TIMEOUT_MS, HOPS_MAX};
pub use crate::watch::Until;
use proto::model::{StartWorkflowRequest, Workflow};
use proto::record::WorkflowRecord;
use proto::WorkflowId;
use std::time::Duration;
use tokio::time::Instant;

/// Longest one execute request may wait.
pub const EXECUTE_WAIT_MAX_S: u64 = 300;
/// How long an execute request waits when the caller does not say (Conductor's clients send 10).
pub const EXECUTE_WAIT_DEFAULT_S: u64 = 10;
/// Most task reference names one wait may name.
pub const WAIT_REFS_MAX: usize = 64;
/// How often the leader re-reads a workflow it waits for without being woken.
const RECHECK_MS: u64 = 1_000;
/// First and longest pause between reads when the wait could not run on the leader.
const FALLBACK_PAUSE_MIN_MS: u64 = 10;
const FALLBACK_PAUSE_MAX_MS: u64 = 500;

impl Inner {
    /// Starts a workflow and waits up to `wait` for it to reach `until`; answers it as it stands
    /// then (Conductor's `POST /api/workflow/execute/{name}/{version}`).
    pub async fn execute_workflow(
        &self,
        request: StartWorkflowRequest,
        until: &Until,
        wait: Duration,
    ) -> Result<Workflow> {
        let id = super::workflows::parse_workflow_id(&self.start_workflow(request).await?)?;
        Ok(self.wait_workflow(&id, until, wait).await?.workflow)
    }

    /// How many workflows requests on this node wait for.
    pub(crate) fn watched_workflows(&self) -> usize {
        self.env.watches.len()
    }

    /// Waits up to `wait` for the workflow `id` to reach `until`; answers its committed record as
    /// it stands then (404 if there is no such workflow).
    pub(crate) async fn wait_workflow(
        &self,
        id: &WorkflowId,
        until: &Until,
        wait: Duration,
    ) -> Result<WorkflowRecord> {
        self.wait_hops(id, until, Instant::now() + wait, 0).await
    }

    pub(super) async fn wait_hops(
        &self,
        id: &WorkflowId,
        until: &Until,
        deadline: Instant,
        hops: u8,
    ) -> Result<WorkflowRecord> {
        let partition = self.partition_id_of(id);
        let mut fallback = Duration::from_millis(FALLBACK_PAUSE_MIN_MS);
        loop {
            // Watch before reading, so a change committed after the read wakes the wait below.
            let watch = self.env.watches.watch(id, until);
            let woken = watch.notify().notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let now = Instant::now();
            let (record, pause) = match self.target(partition).await {
                Ok(Target::Local) => {
                    let record = self
                        .partition_of(id)
                        .ok_or_else(|| {
                            Error::Internal(format!("partition of {id} is led here but not hosted"))
                        })?
                        .read(id)?
                        .ok_or_else(|| not_found(id))?;
                    (record, Duration::from_millis(RECHECK_MS))
                }
                Ok(Target::Peer(peer)) if hops < HOPS_MAX => {
                    let left = deadline.saturating_duration_since(now);
                    let request = Forward::Wait {
                        id: id.clone(),
                        task_refs: until.task_refs.clone(),
                        wait_ms: left.as_millis() as u64,
                    };
                    let within = left + Duration::from_millis(FORWARD_TIMEOUT_MS);
                    match self
                        .forward_for(partition, peer, hops, request, within)
                        .await
                    {
                        // The leader waited for us.
                        Ok(Reply::Record(Some(r))) => return Ok(*r),
                        Ok(Reply::Record(None)) | Err(Error::NotFound(_)) => {
                            return Err(not_found(id))
                        }
                        answer => {
                            tracing::debug!(%id, %peer, ?answer, "leader could not wait; reading");
                            (self.record(id).await?, next_fallback(&mut fallback))
                        }
                    }
                }
                Ok(Target::Peer(_)) => {
                    return Err(Error::Unavailable(format!(
                        "workflow {id}: its partition's leader moved; retry"
                    )))
                }
                Err(e) if hops > 0 => return Err(e),
                Err(_) => (self.record(id).await?, next_fallback(&mut fallback)),
            };
            if until.reached(&record.workflow) || now >= deadline {
                return Ok(record);
            }
            let wake = (now + pause).min(deadline);
            tokio::select! {
                _ = &mut woken => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}

/// The pause before the next read of a wait that could not run on the leader; the one after is
/// twice as long (up to a bound).
fn next_fallback(pause: &mut Duration) -> Duration {
    let this = *pause;
    *pause = (*pause * 2).min(Duration::from_millis(FALLBACK_PAUSE_MAX_MS));
    this
}

fn not_found(id: &WorkflowId) -> Error {
    Error::NotFound(format!("No such workflow found by id: {id}"))
}
