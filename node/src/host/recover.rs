//! What the host does when one of its groups stops for good (openraft turns a storage error into a
//! fatal stop; a panic of a group's Raft core ends it too).
//!
//! - A partition's group: its replica here is stopped and reopened from what is durable, as a
//!   restart would, after a backoff that grows while reopening fails; the node's other partitions
//!   serve on. Until it runs again the replica is listed in `/health`, and the partition is served
//!   by its other replicas (a leader elsewhere) or not at all.
//! - The meta group, or storage every group shares (a failed tree flush, a failed write or sync of
//!   the Raft log, after which nothing more can be made durable): the node stops (fail-stop), and
//!   its supervisor restarts it from what is durable. A replica that cannot write must not keep
//!   answering.

use super::{write, Host};
use crate::error::Result;
use crate::partition::machine::WorkflowMachine;
use crate::partition::Partition;
use proto::PartitionId;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// How often the node checks its groups for a failure.
const FAILURE_CHECK_MS: u64 = 250;
/// Wait before a stopped replica is first reopened; it doubles with every failure in a row.
const REOPEN_BACKOFF_MIN_MS: u64 = 1_000;
/// Longest wait between two attempts to reopen a replica.
const REOPEN_BACKOFF_MAX_MS: u64 = 60_000;
/// A reopened replica that runs this long without failing starts its backoff afresh.
const REOPEN_STABLE_MS: u64 = 60_000;

/// What the node does when its storage as a whole fails (see [`super::Seams`]).
pub(crate) type OnNodeFailure = Option<Arc<dyn Fn(String) + Send + Sync>>;

/// A replica of a partition whose group stopped here, until it has run again for
/// [`REOPEN_STABLE_MS`].
#[derive(Debug, Clone)]
pub(crate) struct Recovery {
    /// Why its group stopped last (or why reopening it failed).
    pub reason: String,
    /// Failures in a row: stops and failed reopens.
    pub failures: u32,
    /// `Stopped`: when it is reopened next; `Running`: when it was reopened.
    pub state: RecoveryState,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum RecoveryState {
    Stopped { retry_at: Instant },
    Running { since: Instant },
}

/// The wait before the next attempt after `failures` failures in a row.
fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    let ms = REOPEN_BACKOFF_MIN_MS.saturating_mul(1 << doublings);
    Duration::from_millis(ms.min(REOPEN_BACKOFF_MAX_MS))
}

/// Watches the node's groups until the host is gone: stops and reopens failed partitions, and
/// stops the node when its meta group or its shared storage fails (`on_failure`, or exit with
/// status 70 when there is none).
pub(super) async fn watch_failures(host: Weak<Host>, on_failure: OnNodeFailure) {
    loop {
        tokio::time::sleep(Duration::from_millis(FAILURE_CHECK_MS)).await;
        let Some(host) = host.upgrade() else { return };
        if let Some(reason) = host.node_failure() {
            tracing::error!(node = %host.node, %reason, "this node cannot go on: it stops (fail-stop)");
            match &on_failure {
                Some(f) => f(reason),
                None => std::process::exit(70),
            }
            return;
        }
        for (partition, reason) in host.failed_partitions() {
            host.stop_failed(partition, reason).await;
        }
        host.reopen_due().await;
    }
}

impl Host {
    /// A failure that stops the whole node: of the storage every group shares, of the meta
    /// group, or a cluster version this binary does not serve (activated while this node ran an
    /// older binary than the one it last registered: it must not read the new formats).
    fn node_failure(&self) -> Option<String> {
        if let Some(e) = self.db.failure() {
            return Some(e.to_string());
        }
        if let Err(e) = self.binary.serves(self.defs.cluster_version()) {
            return Some(e.to_string());
        }
        self.meta.failure().map(|e| format!("group meta: {e}"))
    }

    /// The hosted partitions whose group stopped for good, with why.
    fn failed_partitions(&self) -> Vec<(PartitionId, String)> {
        self.hosted()
            .iter()
            .filter_map(|p| p.group.failure().map(|e| (p.id, e)))
            .collect()
    }

    /// Stops this node's replica of `partition` after its group failed; it is reopened after a
    /// backoff.
    async fn stop_failed(&self, partition: PartitionId, reason: String) {
        let _serial = self.hosting.lock().await;
        let Some(replica) = write(&self.partitions).remove(&partition.0) else {
            return;
        };
        replica.stop().await;
        let mut recovering = self.recovering();
        let failures = recovering.get(&partition.0).map_or(0, |r| r.failures) + 1;
        let retry_at = Instant::now() + backoff(failures);
        tracing::error!(%partition, %reason, failures, retry_in_ms = backoff(failures).as_millis() as u64,
            "a partition's group stopped: its replica here stops and is reopened from what is durable");
        metrics::counter!(crate::metrics::REPLICA_FAILURES, "partition" => partition.0.to_string())
            .increment(1);
        let state = RecoveryState::Stopped { retry_at };
        recovering.insert(
            partition.0,
            Recovery {
                reason,
                failures,
                state,
            },
        );
    }

    /// Reopens the stopped replicas whose backoff has passed, and forgets those that have run long
    /// enough since they were reopened.
    async fn reopen_due(&self) {
        let now = Instant::now();
        let mut due = Vec::new();
        self.recovering().retain(|p, r| match r.state {
            RecoveryState::Stopped { retry_at } => {
                if retry_at <= now {
                    due.push(*p);
                }
                true
            }
            RecoveryState::Running { since } => {
                now.duration_since(since) < Duration::from_millis(REOPEN_STABLE_MS)
            }
        });
        for p in due {
            let partition = PartitionId(p);
            let opened = self.start_replica(partition).await;
            let mut recovering = self.recovering();
            let Some(r) = recovering.get_mut(&p) else {
                continue;
            };
            match opened {
                Ok(()) => {
                    tracing::info!(%partition, failures = r.failures, "replica reopened");
                    r.state = RecoveryState::Running {
                        since: Instant::now(),
                    };
                }
                Err(e) => {
                    r.failures += 1;
                    r.reason = format!("reopening: {e}");
                    let retry_at = Instant::now() + backoff(r.failures);
                    tracing::warn!(%partition, error = %e, failures = r.failures, "reopening a replica failed; trying again later");
                    r.state = RecoveryState::Stopped { retry_at };
                }
            }
        }
    }

    /// Opens this node's replica of `partition` (creating its trees when it is new) and starts
    /// it: a replica placed here, or one reopened after a failure. Nothing to do if it runs.
    pub(crate) async fn start_replica(&self, partition: PartitionId) -> Result<()> {
        let _serial = self.hosting.lock().await;
        if self.partition(partition).is_some() {
            return Ok(());
        }
        let name = format!("p{}", partition.0);
        for tree in super::GROUP_TREES {
            self.db
                .open_tree(format!("{name}/{tree}"))
                .map_err(super::storage)?;
        }
        let no_addrs = BTreeMap::new();
        let link = self
            .router
            .as_ref()
            .map(|r| (r, &no_addrs, Vec::new(), None));
        let machine = Arc::new(WorkflowMachine);
        let group = super::open_group(&self.db, name, self.node, link, machine, self.snapshot_logs);
        let replica = Partition::start(partition, group.await?, self.env.clone());
        write(&self.partitions).insert(partition.0, Arc::new(replica));
        Ok(())
    }

    /// Forgets a stopped replica's recovery (the replica leaves this node); whether it had one.
    pub(crate) fn forget_recovery(&self, partition: PartitionId) -> bool {
        self.recovering().remove(&partition.0).is_some()
    }

    /// The replicas stopped here after a failure and not reopened yet, by partition, with why.
    pub(crate) fn stopped_replicas(&self) -> Vec<(u16, Recovery)> {
        self.recovering()
            .iter()
            .filter(|(_, r)| matches!(r.state, RecoveryState::Stopped { .. }))
            .map(|(p, r)| (*p, r.clone()))
            .collect()
    }

    fn recovering(&self) -> std::sync::MutexGuard<'_, BTreeMap<u16, Recovery>> {
        self.recovering.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_a_second_up_to_a_minute() {
        let ms = |n| backoff(n).as_millis() as u64;
        assert_eq!(ms(1), 1_000);
        assert_eq!(ms(2), 2_000);
        assert_eq!(ms(3), 4_000);
        assert_eq!(ms(6), 32_000);
        assert_eq!(ms(7), REOPEN_BACKOFF_MAX_MS);
        assert_eq!(ms(u32::MAX), REOPEN_BACKOFF_MAX_MS);
    }
}
