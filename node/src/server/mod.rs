//! The node service: opens the data directory, the meta group and the workflow partitions this node
//! hosts, starts the peer transport in a cluster, and implements the operations behind
//! [`Node`](crate::Node). One node on one machine is the embedded default: every group then has one
//! voter and no network, the same code path a cluster runs.

mod backlog;
mod consumers;
mod dead_letters;
mod events;
mod membership;
pub use membership::{ClusterStatus, GroupSummary, NodeStatus, ReplicaStatus};
mod metadata;
mod open;
pub use open::{open, open_with, Seams};
mod quarantine;
mod routing;
mod tasks;
pub mod triggers;
pub mod wait;
mod workflows;

use crate::clock::Clock;
use crate::error::Error;
use crate::meta::Definitions;
use crate::partition::{Partition, PartitionEnv};
use crate::queue::TaskQueues;
use crate::service::Health;
use engine::Effect;
use proto::{NodeId, PartitionId, TaskId, WorkflowId};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::mpsc;

/// Most effects waiting for the node to perform them (failure-workflow starts).
const OUTBOX_LEN_MAX: usize = 1_024;
/// Longest the health check waits for the meta leader to confirm a quorum.
const HEALTH_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// How this node takes part in a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// This node's peer (QUIC) address.
    pub listen: SocketAddr,
    /// Every initial member with its peer address, this node included; identical on every node.
    /// Empty for a node that joins a running cluster.
    pub members: BTreeMap<NodeId, SocketAddr>,
    /// A member's peer address to join the cluster through (a node added to a running cluster;
    /// only used on the first start of its data directory).
    pub join: Option<SocketAddr>,
    /// Directory with `ca.pem` and this node's `node-<id>.pem` / `node-<id>.key` (`baton certs`).
    pub certs: PathBuf,
}

/// How to run a node.
#[derive(Debug, Clone)]
pub struct Options {
    pub data_dir: PathBuf,
    pub http: SocketAddr,
    /// Workflow partitions; fixed when the data directory is created.
    pub partitions: u16,
    pub node: NodeId,
    /// `None`: the embedded single node.
    pub cluster: Option<ClusterOptions>,
    /// `Some`: serve QUIC workers (`--workers`).
    pub workers: Option<crate::gateway::worker::WorkerGatewayOptions>,
    /// The external event brokers (disabled when absent).
    pub events: crate::events::EventOptions,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("baton-data"),
            http: SocketAddr::from(([127, 0, 0, 1], 8080)),
            partitions: 8,
            node: NodeId(1),
            cluster: None,
            workers: None,
            events: Default::default(),
        }
    }
}

/// The node's shared state behind every [`Node`] handle.
pub struct Inner {
    pub(crate) node: NodeId,
    /// Every known member with its peer address, this node included (just this node when
    /// embedded): the initial members, then the meta group's record (`membership::sync_members`).
    pub(crate) members: RwLock<BTreeMap<NodeId, SocketAddr>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) meta: cluster::Group,
    pub(crate) defs: Definitions,
    /// The cluster's partition count (fixed when the cluster is created).
    partition_count: u16,
    /// The partitions this node hosts a replica of; changes as replicas move.
    pub(crate) partitions: RwLock<BTreeMap<u16, Arc<Partition>>>,
    /// What a partition started here later needs.
    env: PartitionEnv,
    /// Serialises hosting and unhosting partitions.
    hosting: tokio::sync::Mutex<()>,
    /// The leader last found for partitions this node does not host.
    pub(crate) leader_hints: Mutex<BTreeMap<u16, NodeId>>,
    /// This node's peer address (cluster).
    listen: Option<SocketAddr>,
    pub(crate) queues: Arc<TaskQueues>,
    pub(crate) transport: Option<cluster::Transport>,
    router: Option<cluster::RaftRouter>,
    /// Rotates which peers a poll asks first (see `poll`).
    pub(crate) poll_turn: std::sync::atomic::AtomicUsize,
    /// What is known of ready tasks on the peers (see `backlog`).
    pub(crate) backlogs: backlog::Backlogs,
    /// Peers that failed to answer, until when they are skipped.
    pub(crate) peers_down: Mutex<BTreeMap<NodeId, tokio::time::Instant>>,
    /// Randomness for new workflow ids (at the edge: it picks the partition and the id).
    rng: Mutex<rand_chacha::ChaCha8Rng>,
    /// Snapshot interval override for every group opened here (see [`Seams::snapshot_logs`]).
    snapshot_logs: Option<u64>,
    pub(crate) db: cluster::storage::Db,
    pub(crate) events: events::Events,
    /// The loops `open` started; shutdown stops them.
    loops: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Inner {
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

    /// A fresh workflow id on one of the partitions this node leads, picked at random, so that
    /// the start and the workflow's later steps need no forwarding; on any partition when this
    /// node leads none. Clients spread over the nodes spread the workflows over the leaders.
    pub(crate) fn new_workflow_id(&self) -> WorkflowId {
        use rand::RngCore;
        let led: Vec<u16> = read(&self.partitions)
            .iter()
            .filter(|(_, p)| p.group.is_leader())
            .map(|(id, _)| *id)
            .collect();
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        let random = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
        let partition = if led.is_empty() {
            u16::try_from(random % u128::from(self.partition_count())).unwrap_or(0)
        } else {
            led[usize::try_from(random % led.len() as u128).unwrap_or(0)]
        };
        WorkflowId::new(PartitionId(partition), random)
    }

    /// The id of the run that a start with idempotency key `key` of workflow `name` creates: bits
    /// from a hash of both, so every retry of that start (on any node, after any failover) names
    /// the same workflow and the partition's version check lets only the first one create it.
    pub(crate) fn keyed_workflow_id(&self, name: &str, key: &str) -> WorkflowId {
        let material = format!("idempotency:{name}:{key}");
        let hi = proto::hash::fnv1a(proto::hash::FNV_OFFSET, material.as_bytes());
        let lo = proto::hash::fnv1a(hi ^ 0x9e37_79b9_7f4a_7c15, material.as_bytes());
        let bits = (u128::from(hi) << 64) | u128::from(lo);
        let partition =
            PartitionId(u16::try_from(bits % u128::from(self.partition_count())).unwrap_or(0));
        WorkflowId::new(partition, bits)
    }

    /// Healthy when this node can serve: a quorum of the meta group answers (it is the confirmed
    /// meta leader, or the meta leader confirms its leadership within a second), and every hosted
    /// partition has a leader — a confirmed one where that leader is this node. A node restarted
    /// without a quorum reachable is therefore not healthy, whatever its saved votes say.
    pub async fn health(&self) -> Health {
        let hosted = self.hosted();
        let led = hosted.iter().filter(|p| p.group.is_leader()).count();
        let partitions_ok = hosted.iter().all(|p| match p.group.leader() {
            Some(n) if n == self.node => p.group.is_leader(),
            Some(_) => true,
            None => false,
        });
        let meta_ok = match self.meta.leader() {
            Some(n) if n == self.node => self.meta.is_leader(),
            Some(n) => {
                let ask = self.forward_within(
                    n,
                    0,
                    proto::peer::Request::MetaReadIndex,
                    HEALTH_PROBE_TIMEOUT,
                );
                matches!(ask.await, Ok(proto::peer::Reply::Index(_)))
            }
            None => false,
        };
        let partitions_stopped: Vec<_> = hosted
            .iter()
            .filter_map(|p| {
                p.stopped().map(|reason| crate::service::StoppedPartition {
                    partition: p.id.0,
                    reason,
                })
            })
            .collect();
        Health {
            healthy: meta_ok && partitions_ok && partitions_stopped.is_empty(),
            partitions: hosted.len(),
            partitions_led: led,
            partitions_stopped,
        }
    }

    pub fn queue_sizes(&self, types: &[String]) -> BTreeMap<String, u64> {
        let mut all = self.queues.sizes();
        if types.is_empty() {
            return all;
        }
        types
            .iter()
            .map(|t| (t.clone(), all.remove(t).unwrap_or(0)))
            .collect()
    }

    async fn shutdown(&self) {
        // First: a script still running must not hold anything below up.
        self.events.scripts.shutdown();
        for l in std::mem::take(&mut *self.loops.lock().unwrap_or_else(|e| e.into_inner())) {
            l.abort();
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

/// Performs effects addressed to other workflows and the outside: starting a failure workflow
/// (its id is derived from the failed workflow, so a repeat finds it already started) and
/// publishing EVENT tasks' messages (one at a time per task; the message id is the task id).
async fn perform_outbox(inner: std::sync::Weak<Inner>, mut rx: mpsc::Receiver<Effect>) {
    let publishing: Arc<Mutex<std::collections::BTreeSet<proto::TaskId>>> = Arc::default();
    while let Some(effect) = rx.recv().await {
        let Some(inner) = inner.upgrade() else { return };
        match effect {
            Effect::StartWorkflow {
                workflow_id,
                name,
                version,
                input,
                correlation_id,
            } => {
                match inner
                    .start_with_id(workflow_id.clone(), &name, version, input, correlation_id)
                    .await
                {
                    Ok(()) | Err(Error::Conflict(_)) => {}
                    Err(e) => {
                        tracing::warn!(workflow = %workflow_id, %name, error = %e, "could not start failure workflow")
                    }
                }
            }
            Effect::PublishEvent { workflow_id, event } => {
                let task = event.task_id.clone();
                let fresh = publishing
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(task.clone());
                if fresh {
                    let publishing = publishing.clone();
                    tokio::spawn(async move {
                        inner.publish_task_event(&workflow_id, event).await;
                        publishing
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&task);
                    });
                }
            }
            Effect::Deliver(_) | Effect::Finished => {}
        }
    }
}

/// Runs a node until `shutdown` resolves: the HTTP API on `options.http`.
pub async fn serve(
    options: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let node = open(&options).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let listener = tokio::net::TcpListener::bind(options.http)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", options.http))?;
    let gateway = match &options.workers {
        Some(w) => {
            let g = crate::gateway::worker::WorkerGateway::start(node.clone(), w)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            tracing::info!(workers = %w.listen, "serving QUIC workers");
            Some(g)
        }
        None => None,
    };
    // One shutdown signal for both front doors: QUIC workers are told to drain while the HTTP
    // server finishes its requests.
    let (stopping, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        stopping.send_replace(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let workers_done = {
        let stop = stopped(stop_rx.clone());
        async move {
            stop.await;
            if let Some(g) = gateway {
                g.shutdown().await;
            }
        }
    };
    tracing::info!(node = %options.node, http = %options.http, data_dir = %options.data_dir.display(), partitions = node.inner.partition_count, hosted = node.inner.hosted().len(), members = read(&node.inner.members).len(), "baton node serving");
    let app = crate::api::router(node.clone());
    let listener = crate::api::listener::Bounded::new(listener);
    let app = app.into_make_service_with_connect_info::<crate::api::listener::Overflow>();
    let http = axum::serve(listener, app).with_graceful_shutdown(stopped(stop_rx));
    let (served, ()) = tokio::join!(std::future::IntoFuture::into_future(http), workers_done);
    served?;
    node.inner.shutdown().await;
    tracing::info!("baton node stopped");
    Ok(())
}
