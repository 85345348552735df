//! The node service: opens the data directory, the meta group and the workflow partitions this node
//! hosts, starts the peer transport in a cluster, and implements the operations behind
//! [`Node`](crate::Node). One node on one machine is the embedded default: every group then has one
//! voter and no network, the same code path a cluster runs.

mod metadata;
mod routing;
mod tasks;
mod workflows;

use crate::clock::{Clock, SystemClock};
use crate::engine::Effect;
use crate::error::{Error, Result};
use crate::meta::{Definitions, MetaMachine};
use crate::partition::machine::WorkflowMachine;
use crate::partition::{Partition, PartitionEnv};
use crate::placement;
use crate::queue::TaskQueues;
use crate::service::Health;
use crate::Node;
use proto::{NodeId, PartitionId, TaskId, WorkflowId};
use rand::SeedableRng;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Most effects waiting for the node to perform them (failure-workflow starts).
const OUTBOX_LEN_MAX: usize = 1_024;
/// Longest the health check waits for the meta leader to confirm a quorum.
const HEALTH_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);
/// Where the partition count is recorded in the data directory, so a restart cannot change it.
const PARTITIONS_KEY: &[u8] = b"baton/partitions";

/// How this node takes part in a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// This node's peer (QUIC) address.
    pub listen: SocketAddr,
    /// Every initial member with its peer address, this node included; identical on every node.
    pub members: BTreeMap<NodeId, SocketAddr>,
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
}

impl Default for Options {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("baton-data"),
            http: SocketAddr::from(([127, 0, 0, 1], 8080)),
            partitions: 8,
            node: NodeId(1),
            cluster: None,
        }
    }
}

/// The node's shared state behind every [`Node`] handle.
pub struct Inner {
    pub(crate) node: NodeId,
    /// Every member, sorted (just this node when embedded).
    pub(crate) members: Vec<NodeId>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) meta: cluster::Group,
    pub(crate) defs: Definitions,
    /// Indexed by partition number; `None` where this node holds no replica.
    pub(crate) partitions: Vec<Option<Partition>>,
    pub(crate) queues: Arc<TaskQueues>,
    pub(crate) transport: Option<cluster::Transport>,
    /// Rotates which peers a poll asks first (see `poll`).
    pub(crate) poll_turn: std::sync::atomic::AtomicUsize,
    /// Peers that failed to answer, until when they are skipped.
    pub(crate) peers_down: Mutex<BTreeMap<NodeId, tokio::time::Instant>>,
    /// Randomness for new workflow ids (at the edge: it picks the partition and the id).
    rng: Mutex<rand_chacha::ChaCha8Rng>,
    db: sled::Db,
}

impl Inner {
    pub(crate) fn partition_count(&self) -> u16 {
        // At most u16::MAX by construction (Options::partitions is a u16).
        u16::try_from(self.partitions.len()).unwrap_or(u16::MAX)
    }

    pub(crate) fn partition_id_of(&self, id: &WorkflowId) -> PartitionId {
        id.partition(self.partition_count())
    }

    /// The local replica of a workflow's partition, if this node hosts one.
    pub(crate) fn partition_of(&self, id: &WorkflowId) -> Option<&Partition> {
        self.partitions
            .get(usize::from(self.partition_id_of(id).0))
            .and_then(Option::as_ref)
    }

    pub(crate) fn partition_of_task(&self, id: &TaskId) -> Option<&Partition> {
        self.partitions
            .get(usize::from(id.partition(self.partition_count()).0))
            .and_then(Option::as_ref)
    }

    /// The partitions hosted here.
    pub(crate) fn hosted(&self) -> impl Iterator<Item = &Partition> {
        self.partitions.iter().flatten()
    }

    pub(crate) fn new_workflow_id(&self) -> WorkflowId {
        use rand::RngCore;
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        let random = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
        let partition =
            PartitionId(u16::try_from(random % u128::from(self.partition_count())).unwrap_or(0));
        WorkflowId::new(partition, random)
    }

    /// Healthy when this node can serve: a quorum of the meta group answers (it is the confirmed
    /// meta leader, or the meta leader confirms its leadership within a second), and every hosted
    /// partition has a leader — a confirmed one where that leader is this node. A node restarted
    /// without a quorum reachable is therefore not healthy, whatever its saved votes say.
    pub async fn health(&self) -> Health {
        let hosted: Vec<&Partition> = self.hosted().collect();
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
                    crate::forward::Forward::MetaReadIndex,
                    HEALTH_PROBE_TIMEOUT,
                );
                matches!(ask.await, Ok(crate::forward::Reply::Index(_)))
            }
            None => false,
        };
        Health {
            healthy: meta_ok && partitions_ok,
            partitions: self.partitions.len(),
            partitions_led: led,
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
        for p in self.hosted() {
            p.stop().await;
        }
        if let Err(e) = self.meta.shutdown().await {
            tracing::warn!(error = %e, "meta group shutdown");
        }
        if let Some(t) = &self.transport {
            t.shutdown().await;
        }
        if let Err(e) = cluster::log_store::flush(&self.db).await {
            tracing::warn!(error = %e, "final flush");
        }
    }
}

pub(crate) fn storage(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("storage: {e}"))
}

/// How a group joins the cluster: the node's Raft router, every member's peer address, the group's
/// initial voters and the voter that forms it.
type GroupLink<'a> = (
    &'a cluster::RaftRouter,
    &'a BTreeMap<NodeId, SocketAddr>,
    Vec<NodeId>,
    Option<NodeId>,
);

/// Opens one group, alone (embedded) or with its initial voters (cluster).
async fn open_group(
    db: &sled::Db,
    name: String,
    node: NodeId,
    link: Option<GroupLink<'_>>,
    sm: Arc<dyn cluster::StateMachine>,
) -> Result<cluster::Group> {
    let mut options = cluster::GroupOptions::new(name.clone(), node);
    if let Some((router, addrs, voters, former)) = link {
        let initial: BTreeMap<NodeId, SocketAddr> = voters
            .iter()
            .filter_map(|v| addrs.get(v).map(|a| (*v, *a)))
            .collect();
        options = options.with_cluster(router.clone(), initial);
        if let Some(f) = former {
            options = options.formed_by(f);
        }
    }
    cluster::Group::open(db, options, sm)
        .await
        .map_err(|e| Error::Internal(format!("group {name}: {e}")))
}

/// Opens the node's storage, transport and groups, and starts following its partitions' leadership.
pub async fn open(options: &Options) -> Result<Node> {
    if options.partitions == 0 {
        return Err(Error::Invalid("--partitions must be at least 1".into()));
    }
    std::fs::create_dir_all(&options.data_dir).map_err(storage)?;
    let db = sled::Config::new()
        .path(&options.data_dir)
        .open()
        .map_err(storage)?;
    let partitions = match db.get(PARTITIONS_KEY).map_err(storage)? {
        Some(v) if v.len() == 2 => {
            let stored = u16::from_be_bytes([v[0], v[1]]);
            if stored != options.partitions {
                tracing::warn!(
                    stored,
                    requested = options.partitions,
                    "data directory was created with another partition count; keeping it"
                );
            }
            stored
        }
        _ => {
            db.insert(PARTITIONS_KEY, &options.partitions.to_be_bytes())
                .map_err(storage)?;
            cluster::log_store::flush(&db).await.map_err(storage)?;
            options.partitions
        }
    };
    let (members, transport, router) = match &options.cluster {
        None => (vec![options.node], None, None),
        Some(c) => {
            if !c.members.contains_key(&options.node) {
                return Err(Error::Invalid(format!(
                    "--cluster must list this node ({})",
                    options.node
                )));
            }
            cluster::tls::install_crypto_provider();
            let identity = cluster::tls::Identity::load(&c.certs, options.node).map_err(|e| {
                Error::Invalid(format!("certificates in {}: {e}", c.certs.display()))
            })?;
            let peers = c
                .members
                .iter()
                .filter(|(id, _)| **id != options.node)
                .map(|(id, a)| (*id, *a));
            let transport = cluster::Transport::start(
                cluster::TransportOptions::new(identity, c.listen).with_peers(peers),
            )
            .map_err(|e| Error::Internal(format!("peer transport on {}: {e}", c.listen)))?;
            let router = cluster::RaftRouter::new(transport.clone());
            (
                c.members.keys().copied().collect(),
                Some(transport),
                Some(router),
            )
        }
    };
    let addrs = options
        .cluster
        .as_ref()
        .map(|c| c.members.clone())
        .unwrap_or_default();
    let link = |voters: Vec<NodeId>, former: Option<NodeId>| {
        router.as_ref().map(|r| (r, &addrs, voters, former))
    };

    // Create every hosted group's sled trees here, one after another, before any group starts:
    // creating a tree while other groups already flush the same database is the suspect of a start-up
    // hang seen once in the cluster tests (sled 0.34 has known flush and lock deadlocks), and opening
    // an existing tree again inside `Group::open` is only a lookup.
    let hosts =
        |p: u16| placement::partition_voters(PartitionId(p), &members).contains(&options.node);
    let names = std::iter::once("meta".to_owned()).chain(
        (0..partitions)
            .filter(|p| hosts(*p))
            .map(|p| format!("p{p}")),
    );
    for name in names {
        for tree in ["log", "raft", "state"] {
            db.open_tree(format!("{name}/{tree}")).map_err(storage)?;
        }
    }
    // Groups wait for a quorum as they open: open them all at once, not one after another.
    let meta_open = open_group(
        &db,
        "meta".into(),
        options.node,
        link(placement::meta_voters(&members), members.first().copied()),
        Arc::new(MetaMachine),
    );
    let hosted: Vec<u16> = (0..partitions)
        .filter(|p| placement::partition_voters(PartitionId(*p), &members).contains(&options.node))
        .collect();
    let partition_opens = hosted.iter().map(|p| {
        let id = PartitionId(*p);
        let voters = placement::partition_voters(id, &members);
        open_group(
            &db,
            format!("p{p}"),
            options.node,
            link(voters, placement::partition_former(id, &members)),
            Arc::new(WorkflowMachine),
        )
    });
    let (meta, groups) = tokio::join!(meta_open, futures::future::join_all(partition_opens));
    let meta = meta?;

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let queues = Arc::new(TaskQueues::default());
    let (outbox_tx, outbox_rx) = mpsc::channel(OUTBOX_LEN_MAX);
    let env = PartitionEnv {
        clock: clock.clone(),
        queues: queues.clone(),
        outbox: outbox_tx,
        partitions,
    };
    let mut parts: Vec<Option<Partition>> = (0..partitions).map(|_| None).collect();
    for (p, group) in hosted.iter().zip(groups) {
        parts[usize::from(*p)] = Some(Partition::start(PartitionId(*p), group?, env.clone()));
    }
    let inner = Arc::new(Inner {
        node: options.node,
        members,
        clock,
        defs: Definitions::new(meta.state().clone()),
        meta,
        partitions: parts,
        queues,
        transport: transport.clone(),
        peers_down: Mutex::new(BTreeMap::new()),
        poll_turn: std::sync::atomic::AtomicUsize::new(0),
        rng: Mutex::new(rand_chacha::ChaCha8Rng::from_entropy()),
        db,
    });
    if let Some(t) = &transport {
        let weak = Arc::downgrade(&inner);
        t.register(
            cluster::Service::Forward,
            move |peer: NodeId, bytes: Vec<u8>| {
                let weak = weak.clone();
                async move {
                    match weak.upgrade() {
                        Some(inner) => Ok(inner.serve_forward(peer, bytes).await),
                        None => Err("node is shutting down".to_owned()),
                    }
                }
            },
        );
    }
    tokio::spawn(perform_outbox(Arc::downgrade(&inner), outbox_rx));
    Ok(Node { inner })
}

/// Performs effects addressed to other workflows. Starting a failure workflow uses an id derived from
/// the failed workflow, so a repeat finds it already started.
async fn perform_outbox(inner: std::sync::Weak<Inner>, mut rx: mpsc::Receiver<Effect>) {
    while let Some(effect) = rx.recv().await {
        let Some(inner) = inner.upgrade() else { return };
        if let Effect::StartWorkflow {
            workflow_id,
            name,
            version,
            input,
            correlation_id,
        } = effect
        {
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
    tracing::info!(node = %options.node, http = %options.http, data_dir = %options.data_dir.display(), partitions = node.inner.partitions.len(), members = node.inner.members.len(), "baton node serving");
    let app = crate::api::router(node.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    node.inner.shutdown().await;
    tracing::info!("baton node stopped");
    Ok(())
}
