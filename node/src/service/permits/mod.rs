//! Permits: how a task type's `concurrentExecLimit` and `rateLimitPerFrequency` hold across the
//! cluster. Every lease of a limited type needs a permit from the type's *keeper*: the leader of
//! the partition the type's name hashes to, which keeps a [`Ledger`] per type in memory.
//!
//! A poll claims tasks, asks the keeper for permits for them, leases those granted (the lease
//! carries the permits' deadline, past which the engine refuses it) and puts the rest back. The
//! keeper counts the tasks IN_PROGRESS from the partitions' leaders (each confirms its
//! leadership) before its first grant and whenever the limit is reached, and adds the permits it
//! granted since. A new keeper in a cluster grants nothing until an earlier keeper's permits have
//! lapsed and their leases are visible; a rate's window is taken from the start times of the
//! tasks IN_PROGRESS, so tasks that started and ended in the window before a keeper changed are
//! not counted. The limits are the registered definition's, read at each ask.

mod ledger;

use crate::error::{Error, Result};
use crate::host::Host;
use crate::queue::TaskQueues;
use engine::NowMs;
use ledger::Ledger;
pub use ledger::PERMIT_VALID_MS;
use proto::model::TaskLimits;
use proto::peer::{InProgressTasks, PermitGrant, Reply, Request, HOPS_MAX, POLL_PEER_TIMEOUT_MS};
use proto::{PartitionId, TaskId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How soon a poll for a limited type looks again when its tasks are held back and the keeper
/// did not say when (its permits are not announced the way published tasks are).
pub const LIMITED_POLL_RECHECK_MS: u64 = 250;
/// Longest a keeper waits for a partition leader's count: a poll that asked for permits waits
/// for the keeper no longer than [`POLL_PEER_TIMEOUT_MS`], so a slower count is of no use.
pub const COUNT_PEER_TIMEOUT_MS: u64 = 1_000;
/// Most task ids one ask for permits names (a poll's batch at most).
pub const PERMITS_ASKED_MAX: usize = proto::limits::POLL_BATCH_MAX;

/// The node's side of permits: it asks keepers, and keeps the types whose keeper it is.
pub struct Permits {
    host: Arc<Host>,
    queues: Arc<TaskQueues>,
    /// One ledger per limited type this node keeps, each behind its own lock (a count awaits
    /// the peers while holding it, so grants of one type are decided one at a time).
    ledgers: Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<Option<Ledger>>>>>,
}

impl Permits {
    pub fn new(host: Arc<Host>, queues: Arc<TaskQueues>) -> Self {
        Self {
            host,
            queues,
            ledgers: Mutex::default(),
        }
    }

    /// The limits of a task type, from its registered definition; `None` when it has none.
    pub fn limits_of(&self, task_type: &str) -> Option<TaskLimits> {
        if engine::mutation::active(engine::mutation::Mutation::LeaseWithoutPermit) {
            return None;
        }
        self.host.defs.task_def(task_type).and_then(|d| d.limits())
    }

    /// Asks the keeper of `task_type` for permits to lease `task_ids`; the answer's `valid_ms`
    /// counts from before the ask.
    pub async fn ask(&self, task_type: &str, task_ids: Vec<TaskId>) -> Result<PermitGrant> {
        let keeper = self.keeper_of(task_type);
        if let Some(replica) = self.host.partition(keeper) {
            if let Some(epoch) = replica.leader_epoch().await {
                return self.keep(task_type, &task_ids, epoch).await;
            }
        }
        let leader = self.host.locate(keeper).await.ok_or_else(|| {
            Error::Unavailable(format!(
                "partition {keeper}, which keeps the permits of {task_type}, has no leader now; retry"
            ))
        })?;
        let ask = Request::Permits {
            task_type: task_type.to_owned(),
            task_ids,
        };
        let within = Duration::from_millis(POLL_PEER_TIMEOUT_MS);
        match self.host.forward_within(leader, 0, ask, within).await {
            Ok(Reply::Permits(grant)) => Ok(grant),
            Ok(other) => Err(Error::Internal(format!("unexpected answer {other:?}"))),
            Err(e) => {
                self.host.forget_leader(keeper);
                Err(e)
            }
        }
    }

    /// Answers a peer's ask as the keeper of `task_type`; fails when this node is not.
    pub async fn answer(&self, task_type: &str, task_ids: &[TaskId]) -> Result<PermitGrant> {
        if task_ids.len() > PERMITS_ASKED_MAX {
            return Err(Error::Invalid(format!(
                "{} permits asked at once; at most {PERMITS_ASKED_MAX}",
                task_ids.len()
            )));
        }
        let keeper = self.keeper_of(task_type);
        let epoch = match self.host.partition(keeper) {
            Some(replica) => replica.leader_epoch().await,
            None => None,
        };
        let epoch = epoch.ok_or_else(|| {
            Error::Unavailable(format!(
                "this node does not lead partition {keeper}, which keeps the permits of {task_type}; retry"
            ))
        })?;
        self.keep(task_type, task_ids, epoch).await
    }

    fn keeper_of(&self, task_type: &str) -> PartitionId {
        self.host
            .key_partition(proto::hash::stable_hash(task_type.as_bytes()))
    }

    /// Grants as the keeper, in leadership spell `epoch` of the keeper's partition.
    async fn keep(&self, task_type: &str, task_ids: &[TaskId], epoch: u64) -> Result<PermitGrant> {
        let Some(limits) = self.limits_of(task_type) else {
            return Ok(PermitGrant {
                granted: task_ids.to_vec(),
                valid_ms: PERMIT_VALID_MS,
                retry_in_ms: 0,
            });
        };
        let ledger = self.ledger(task_type);
        let mut ledger = ledger.lock().await;
        let now = self.host.clock.now_ms();
        let fresh = ledger.as_ref().is_none_or(|l| l.epoch != epoch);
        if fresh {
            let follows = self.host.transport.is_some();
            *ledger = Some(Ledger::new(epoch, now, follows));
        }
        let l = ledger.as_mut().expect("set above");
        if l.needs_count(&limits, now) {
            let counted = self.count(task_type, l.pending()).await?;
            l.counted(counted.running, &counted.ended, now);
        }
        let grant = l.grant(&limits, task_ids, self.host.clock.now_ms());
        tracing::debug!(
            task_type,
            asked = task_ids.len(),
            granted = grant.granted.len(),
            retry_in_ms = grant.retry_in_ms,
            "permits"
        );
        Ok(PermitGrant {
            granted: grant.granted,
            valid_ms: PERMIT_VALID_MS,
            retry_in_ms: grant.retry_in_ms,
        })
    }

    fn ledger(&self, task_type: &str) -> Arc<tokio::sync::Mutex<Option<Ledger>>> {
        let mut ledgers = self.ledgers.lock().unwrap_or_else(|e| e.into_inner());
        ledgers.entry(task_type.to_owned()).or_default().clone()
    }

    /// The tasks of `task_type` IN_PROGRESS on every partition, each counted by its leader, and
    /// which of `pending` were seen ending; fails unless every partition is counted.
    async fn count(&self, task_type: &str, pending: Vec<TaskId>) -> Result<InProgressTasks> {
        let led = self.host.led_partitions().await;
        let mine: Vec<PartitionId> = led.iter().copied().collect();
        let mut out = self.in_progress_in(task_type, &mine, &pending).await?;
        let elsewhere = self.host.led_elsewhere(&led).await?;
        let covered = led.len() + elsewhere.values().map(Vec::len).sum::<usize>();
        if covered < usize::from(self.host.partition_count()) {
            return Err(Error::Unavailable(format!(
                "a partition is becoming led here; the tasks of {task_type} in progress cannot all be counted yet"
            )));
        }
        let asks = elsewhere.into_iter().map(|(peer, partitions)| {
            let ask = Request::InProgress {
                task_type: task_type.to_owned(),
                partitions: partitions.clone(),
                pending: pending.clone(),
            };
            async move {
                let within = Duration::from_millis(COUNT_PEER_TIMEOUT_MS);
                let answer = self
                    .host
                    .forward_within(peer, HOPS_MAX - 1, ask, within)
                    .await;
                if answer.is_err() {
                    partitions.iter().for_each(|p| self.host.forget_leader(*p));
                }
                answer
            }
        });
        for answer in futures::future::join_all(asks).await {
            match answer? {
                Reply::InProgress(tasks) => {
                    out.running.extend(tasks.running);
                    out.ended.extend(tasks.ended);
                }
                other => return Err(Error::Internal(format!("unexpected answer {other:?}"))),
            }
        }
        Ok(out)
    }

    /// The tasks of `task_type` IN_PROGRESS on `partitions`, which this node must lead (each
    /// confirmed with a quorum, so a deposed leader's stale view is never counted), and which of
    /// `pending` were seen ending here.
    pub async fn in_progress_in(
        &self,
        task_type: &str,
        partitions: &[PartitionId],
        pending: &[TaskId],
    ) -> Result<InProgressTasks> {
        let confirms = partitions.iter().map(|p| async move {
            let replica = self.host.partition(*p).ok_or_else(|| {
                Error::Unavailable(format!("partition {p} is not hosted here any more; retry"))
            })?;
            if !replica.is_local_leader().await {
                return Err(Error::Unavailable(format!(
                    "partition {p} is not led here; retry"
                )));
            }
            replica.confirm_leadership().await
        });
        for confirmed in futures::future::join_all(confirms).await {
            confirmed?;
        }
        let n = self.host.partition_count();
        let asked: BTreeSet<PartitionId> = partitions.iter().copied().collect();
        Ok(InProgressTasks {
            running: self
                .queues
                .in_progress(task_type, |task| asked.contains(&task.partition(n))),
            ended: self.queues.ended(task_type, pending),
        })
    }
}

/// Until when a grant's permits hold for a lease decided on this node: `valid_ms` from before
/// the ask, by this node's clock, so they never outlast the keeper's count of them (which adds
/// its commit slack on top).
pub fn permit_until(asked_at: NowMs, grant: &PermitGrant) -> NowMs {
    asked_at + i64::try_from(grant.valid_ms).unwrap_or(0)
}
