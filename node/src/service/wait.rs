//! Waiting for a workflow to get somewhere: `POST /api/workflow/execute/{name}/{version}` starts a
//! workflow and answers once it has finished, has reached one of the tasks the caller named, or the
//! caller's wait is over (then with the workflow as it stands, still RUNNING).
//!
//! The wait runs where the workflow's actor runs, on its partition's leader: the actor publishes
//! after every committed decision, which hands the record to the waiter once the workflow got
//! where it waits ([`crate::watch`]). The waiter reads the stored record only when its watch may
//! have missed a change: when it begins (unless the watch began before the workflow existed, as
//! an unkeyed execute's does) and after this node lost and regained the leadership, which it
//! looks for every second. A node that does not lead the partition forwards the wait there
//! ([`Request::Wait`]); if that fails (the leader moved or died, or is a build that does not know
//! the request) it reads the record through the usual routing and tries again after a pause that
//! grows.
//!
//! An execute whose wait fails (no leader within the routing's deadline) answers an error although
//! its start committed: a client that retries it should send an `idempotencyKey`, so the retry
//! waits for the same run instead of starting another.

use super::Workflows;
use crate::error::{Error, Result};
use crate::host::Target;
pub use crate::watch::Until;
use crate::watch::{Seen, Watch};
use proto::model::{StartWorkflowRequest, Workflow};
use proto::peer::{Reply, Request, FORWARD_TIMEOUT_MS, HOPS_MAX};
use proto::record::WorkflowRecord;
use proto::{NodeId, WorkflowId};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Longest one execute request may wait.
pub const EXECUTE_WAIT_MAX_S: u64 = 300;
/// How long an execute request waits when the caller does not say (Conductor's clients send 10).
pub const EXECUTE_WAIT_DEFAULT_S: u64 = 10;
/// Most task reference names one wait may name.
pub const WAIT_REFS_MAX: usize = 64;
/// How often the leader looks again at a workflow it waits for without being woken (it reads
/// the record only if its leadership changed meanwhile).
const RECHECK_MS: u64 = 1_000;
/// First and longest pause between reads when the wait could not run on the leader.
const FALLBACK_PAUSE_MIN_MS: u64 = 10;
const FALLBACK_PAUSE_MAX_MS: u64 = 500;

/// A watch begun before the workflow it watches was created here, with the spell of this node's
/// leadership of the partition it began in.
pub(super) struct Fresh {
    watch: Watch,
    epoch: Option<u64>,
}

impl Workflows {
    /// Starts a workflow and waits up to `wait` for it to reach `until`; answers it as it stands
    /// then (Conductor's `POST /api/workflow/execute/{name}/{version}`).
    pub async fn execute_workflow(
        &self,
        request: StartWorkflowRequest,
        until: &Until,
        wait: Duration,
    ) -> Result<Workflow> {
        let deadline = Instant::now() + wait;
        let start = self.prepare_start(request, None).await?;
        self.execute_prepared(start, until, deadline).await
    }

    /// [`Workflows::execute_workflow`] of a start already prepared (a DSL instance's).
    pub(crate) async fn execute_prepared(
        &self,
        start: super::workflows::PreparedStart,
        until: &Until,
        deadline: Instant,
    ) -> Result<Workflow> {
        // A start without a key creates a workflow under a new id, on a partition this node
        // leads where it can: watched from before it exists, every change of it is published to
        // the watch, and the wait reads nothing from storage. A keyed run may exist already.
        let fresh = if start.keyed() {
            None
        } else {
            let watch = self.host.env.watches.watch(&start.id, until);
            let epoch = match self.host.partition_of(&start.id) {
                Some(p) => p.leader_epoch().await,
                None => None,
            };
            Some(Fresh { watch, epoch })
        };
        let id = super::workflows::parse_workflow_id(&self.submit_start(start).await?)?;
        Ok(self
            .wait_hops(&id, until, deadline, 0, fresh)
            .await?
            .workflow)
    }

    /// How many workflows requests on this node wait for.
    pub(crate) fn watched_workflows(&self) -> usize {
        self.host.env.watches.len()
    }

    /// Waits until `deadline` for the workflow `id` to reach `until`; answers its committed
    /// record as it stands then (404 if there is no such workflow). `fresh`: a watch begun before
    /// the workflow existed.
    pub(super) async fn wait_hops(
        &self,
        id: &WorkflowId,
        until: &Until,
        deadline: Instant,
        hops: u8,
        fresh: Option<Fresh>,
    ) -> Result<WorkflowRecord> {
        let partition = self.host.partition_id_of(id);
        let mut fallback = Duration::from_millis(FALLBACK_PAUSE_MIN_MS);
        // Watch before reading, so a change committed after a read wakes the wait below.
        // `seen_in`: the spell of leadership here since which the watch saw every change (all
        // changes since the last read, or since the workflow was created).
        let (watch, mut seen_in) = match fresh {
            Some(f) => (f.watch, f.epoch),
            None => (self.host.env.watches.watch(id, until), None),
        };
        let reached = loop {
            let woken = watch.notify().notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let now = Instant::now();
            let (record, pause) = match self.host.target(partition).await {
                Ok(Target::Local) => {
                    let p = self.host.partition_of(id).ok_or_else(|| {
                        Error::Internal(format!("partition of {id} is led here but not hosted"))
                    })?;
                    let epoch = p.leader_epoch().await;
                    match watch.latest() {
                        Some(Seen::Reached(r)) if until.reached(&r.workflow) => break r,
                        Some(Seen::Removed) => seen_in = None,
                        _ => {}
                    }
                    if epoch.is_some() && epoch == seen_in && now < deadline {
                        // Led here all along: no change since reached `until`.
                        let recheck = (now + Duration::from_millis(RECHECK_MS)).min(deadline);
                        tokio::select! {
                            _ = &mut woken => {}
                            _ = tokio::time::sleep_until(recheck) => {}
                        }
                        continue;
                    }
                    let record = p.read(id)?.ok_or_else(|| not_found(id))?;
                    seen_in = epoch;
                    (record, Duration::from_millis(RECHECK_MS))
                }
                Ok(Target::Peer(peer)) if hops < HOPS_MAX => {
                    match self.wait_on(peer, id, until, deadline, hops).await? {
                        Asked::Waited(r) => return Ok(r),
                        Asked::Read(r) => (r, next_fallback(&mut fallback)),
                    }
                }
                Ok(Target::Peer(_)) => {
                    return Err(Error::Unavailable(format!(
                        "workflow {id}: its partition's leader moved; retry"
                    )))
                }
                Err(e) if hops > 0 => return Err(e),
                Err(_) => (self.host.record(id).await?, next_fallback(&mut fallback)),
            };
            if until.reached(&record.workflow) || now >= deadline {
                return Ok(record);
            }
            let wake = (now + pause).min(deadline);
            tokio::select! {
                _ = &mut woken => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
        };
        // The last watcher of the workflow holds the only other reference: no copy then.
        drop(watch);
        Ok(Arc::unwrap_or_clone(reached))
    }
}

/// What asking the leader to wait came to.
enum Asked {
    /// The leader waited and answered the record.
    Waited(WorkflowRecord),
    /// It could not; the record as read through the routing instead.
    Read(WorkflowRecord),
}

impl Workflows {
    /// Asks `peer`, the partition's leader, to wait for the workflow in our stead.
    async fn wait_on(
        &self,
        peer: NodeId,
        id: &WorkflowId,
        until: &Until,
        deadline: Instant,
        hops: u8,
    ) -> Result<Asked> {
        let left = deadline.saturating_duration_since(Instant::now());
        let (task_refs, wait_ms) = (until.task_refs.clone(), left.as_millis() as u64);
        let request = if until.listening {
            Request::WaitSettled {
                id: id.clone(),
                task_refs,
                wait_ms,
            }
        } else {
            Request::Wait {
                id: id.clone(),
                task_refs,
                wait_ms,
            }
        };
        let within = left + Duration::from_millis(FORWARD_TIMEOUT_MS);
        let partition = self.host.partition_id_of(id);
        match self
            .host
            .forward_for(partition, peer, hops, request, within)
            .await
        {
            Ok(Reply::Record(Some(r))) => Ok(Asked::Waited(*r)),
            Ok(Reply::Record(None)) | Err(Error::NotFound(_)) => Err(not_found(id)),
            answer => {
                tracing::debug!(%id, %peer, ?answer, "leader could not wait; reading");
                Ok(Asked::Read(self.host.record(id).await?))
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
