//! This node in its cluster: the data directory, the meta group and the workflow partitions
//! hosted here, the members and the peer transport, and the routing of every operation to the
//! leader of the group it concerns. Every service (`crate::service`) works through one shared
//! [`Host`]; the host knows nothing of the services.

mod open;
pub use open::Seams;
pub(crate) use open::{open_group, GROUP_TREES};
mod recover;
mod routing;
mod scan;
#[cfg(test)]
mod tests;
pub(crate) use recover::{Recovery, RecoveryState};
pub(crate) use routing::{decode_reply, encode_request, through_failover, Target};

use crate::clock::Clock;
use crate::error::Error;
use crate::meta::MetaState;
use crate::partition::{Partition, PartitionEnv};
use proto::{NodeId, PartitionId, TaskId, WorkflowId};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::Notify;

/// What every service shares: this node, its groups and its peers.
pub struct Host {
    pub(crate) node: NodeId,
    /// This node's binary and the cluster versions it serves.
    pub(crate) binary: proto::version::Binary,
    /// Leave the active version as it is until an operator raises it (`--hold-cluster-version`).
    pub(crate) hold_version: bool,
    /// Every known member with its peer address, this node included (just this node when
    /// embedded): the initial members, then the meta group's record (see the membership service).
    pub(crate) members: RwLock<BTreeMap<NodeId, SocketAddr>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) meta: cluster::Group,
    /// The meta group's applied state: definitions, handlers, schedules, webhooks, members.
    pub(crate) defs: MetaState,
    /// The cluster's partition count (fixed when the cluster is created).
    partition_count: u16,
    /// The partitions this node hosts a replica of; changes as replicas move.
    pub(crate) partitions: RwLock<BTreeMap<u16, Arc<Partition>>>,
    /// What a partition started here later needs.
    pub(crate) env: PartitionEnv,
    /// Serialises hosting and unhosting partitions.
    pub(crate) hosting: tokio::sync::Mutex<()>,
    /// The leader last found for partitions this node does not host.
    pub(crate) leader_hints: Mutex<BTreeMap<u16, NodeId>>,
    /// This node's peer address (cluster).
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) transport: Option<cluster::Transport>,
    pub(crate) router: Option<cluster::RaftRouter>,
    /// Peers that failed to answer, until when they are skipped.
    pub(crate) peers_down: Mutex<BTreeMap<NodeId, tokio::time::Instant>>,
    /// Snapshot interval override for every group opened here (see [`Seams::snapshot_logs`]).
    pub(crate) snapshot_logs: Option<u64>,
    pub(crate) db: cluster::storage::Db,
    /// A wake-up per partition for the consumer of its own event queues, rung when a message is
    /// queued there through this node.
    queued: Mutex<BTreeMap<u16, Arc<Notify>>>,
    /// Replicas whose group stopped after a failure, while they are reopened (`recover`).
    recovering: Mutex<BTreeMap<u16, Recovery>>,
    /// The failure watch `open` started; shutdown stops it.
    watch: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Host {
    /// Whether this node writes `feature`'s format: the cluster has activated its version. The
    /// local meta replica answers; one behind writes the format before, which every member reads.
    pub(crate) fn writes(&self, feature: proto::version::Feature) -> bool {
        feature.active(self.defs.cluster_version())
    }

    pub(crate) fn partition_count(&self) -> u16 {
        self.partition_count
    }

    pub(crate) fn partition_id_of(&self, id: &WorkflowId) -> PartitionId {
        id.partition(self.partition_count())
    }

    /// The local replica of a partition, if this node hosts one.
    pub(crate) fn partition(&self, p: PartitionId) -> Option<Arc<Partition>> {
        read(&self.partitions).get(&p.0).cloned()
    }

    /// The local replica of `p` while this node is in `p`'s membership. A replica that left it (its
    /// leadership handed away and not yet added back, or not yet added) hears from no leader, so
    /// what it last knew of one is stale or nothing: routing asks the members instead of waiting
    /// for it to learn a leader it never will.
    pub(crate) fn member_replica(&self, p: PartitionId) -> Option<Arc<Partition>> {
        let member = |r: &Arc<Partition>| {
            let metrics = r.group.raft().metrics();
            let m = metrics.borrow();
            m.membership_config
                .membership()
                .get_node(&self.node.0)
                .is_some()
        };
        self.partition(p).filter(member)
    }

    /// The local replica of a workflow's partition, if this node hosts one.
    pub(crate) fn partition_of(&self, id: &WorkflowId) -> Option<Arc<Partition>> {
        self.partition(self.partition_id_of(id))
    }

    pub(crate) fn partition_of_task(&self, id: &TaskId) -> Option<Arc<Partition>> {
        self.partition(id.partition(self.partition_count()))
    }

    /// The partitions hosted here, in order.
    pub(crate) fn hosted(&self) -> Vec<Arc<Partition>> {
        read(&self.partitions).values().cloned().collect()
    }

    /// The partitions whose leader is this node with its actors running.
    pub(crate) async fn led_partitions(&self) -> std::collections::BTreeSet<PartitionId> {
        let mut led = std::collections::BTreeSet::new();
        for p in self.hosted() {
            if p.is_local_leader().await {
                led.insert(p.id);
            }
        }
        led
    }

    /// The partition a hashed key lives on.
    pub(crate) fn key_partition(&self, hash: u64) -> PartitionId {
        PartitionId(u16::try_from(hash % u64::from(self.partition_count())).unwrap_or(0))
    }

    /// The Raft status of every group here: the meta group, then the partitions in order.
    pub(crate) fn group_statuses(&self) -> Vec<cluster::GroupStatus> {
        let mut out = vec![self.meta.status()];
        out.extend(self.hosted().iter().map(|p| p.group.status()));
        out
    }

    /// The other known members.
    pub(crate) fn peers(&self) -> Vec<NodeId> {
        read(&self.members)
            .keys()
            .copied()
            .filter(|n| *n != self.node)
            .collect()
    }

    /// The wake-up of `partition`'s own-queue consumer.
    pub(crate) fn queue_waker(&self, partition: PartitionId) -> Arc<Notify> {
        let mut wake = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        wake.entry(partition.0).or_default().clone()
    }

    /// Stops what the host runs: the failure watch, the partitions' actors, the groups, the
    /// transport; then flushes storage.
    pub(crate) async fn shutdown(&self) {
        if let Some(w) = self.watch.lock().unwrap_or_else(|e| e.into_inner()).take() {
            w.abort();
        }
        for p in self.hosted() {
            p.stop().await;
        }
        if let Err(e) = self.meta.shutdown().await {
            tracing::warn!(error = %e, "meta group shutdown");
        }
        if let Some(t) = &self.transport {
            t.shutdown().await;
        }
        if let Err(e) = self.db.flush().await {
            tracing::warn!(error = %e, "final flush");
        }
    }
}

pub(crate) fn storage(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("storage: {e}"))
}

/// A poisoned lock only means a panic elsewhere; the maps stay valid (single inserts and removes).
pub(crate) fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}
pub(crate) fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}
