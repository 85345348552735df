//! An in-process cluster for the node's unit tests: `size` nodes opened with
//! [`crate::service::open_with`] over one [`MemNet`] (the in-process peer network), each with its
//! data on sled in its own temporary directory, and waits bounded by a deadline on what the nodes
//! report.

use crate::host::{read, Seams};
use crate::options::{ClusterOptions, Options};
use crate::partition::WorkflowOp;
use crate::service::open_with;
use crate::Node;
use cluster::transport::mem::MemNet;
use engine::testing::{def_of, obj, simple};
use engine::StartInput;
use proto::{NodeId, PartitionId, WorkflowId};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest a test waits for the cluster to reach a state.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(20);

/// Nodes `1..=size` of one cluster.
pub(crate) struct TestCluster {
    pub(crate) net: Arc<MemNet>,
    nodes: Vec<Node>,
    dirs: Vec<tempfile::TempDir>,
    /// Each node that stopped itself (fail-stop), with why: recorded instead of exiting.
    pub(crate) stopped: Failures,
}

/// Nodes that stopped themselves, with why.
pub(crate) type Failures = Arc<Mutex<Vec<(NodeId, String)>>>;

/// The peer address of `node` (nothing is bound: the in-process network routes by it).
pub(crate) fn addr(node: NodeId) -> SocketAddr {
    let port = u16::try_from(7000 + node.0).expect("a small node id");
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Opens a cluster of `size` nodes with `partitions` partitions and waits until every node knows
/// every member and every group has a leader that every replica knows.
pub(crate) async fn cluster(size: u64, partitions: u16) -> TestCluster {
    cluster_with(size, partitions, |_| {}).await
}

/// [`cluster`], each node's options changed by `configure` first.
pub(crate) async fn cluster_with(
    size: u64,
    partitions: u16,
    configure: impl Fn(&mut Options),
) -> TestCluster {
    let net = MemNet::new();
    let stopped = Failures::default();
    let members: BTreeMap<NodeId, SocketAddr> =
        (1..=size).map(|i| (NodeId(i), addr(NodeId(i)))).collect();
    let dirs: Vec<_> = (0..size)
        .map(|_| tempfile::tempdir().expect("temporary directory"))
        .collect();
    // Groups wait for a quorum as they open: every node opens at once.
    let opens = members.keys().zip(&dirs).map(|(id, dir)| {
        let mut options = node_options(&members, *id, dir.path(), partitions);
        configure(&mut options);
        open_node(&net, *id, options, stopped.clone())
    });
    let nodes = futures::future::try_join_all(opens)
        .await
        .expect("every node opens");
    let c = TestCluster {
        net,
        nodes,
        dirs,
        stopped,
    };
    until("every node registered and every group led", async || {
        c.settled().await
    })
    .await;
    c
}

/// The options of node `id` of a test cluster.
fn node_options(
    members: &BTreeMap<NodeId, SocketAddr>,
    id: NodeId,
    dir: &Path,
    partitions: u16,
) -> Options {
    Options {
        data_dir: dir.to_owned(),
        partitions,
        node: id,
        cluster: Some(ClusterOptions {
            listen: addr(id),
            members: members.clone(),
            join: None,
            // Not read: the transport is the seam's.
            certs: PathBuf::new(),
        }),
        ..Default::default()
    }
}

async fn open_node(
    net: &Arc<MemNet>,
    id: NodeId,
    options: Options,
    stopped: Failures,
) -> crate::error::Result<Node> {
    let record = move |reason: String| {
        let mut stopped = stopped.lock().unwrap_or_else(|e| e.into_inner());
        stopped.push((id, reason));
    };
    let seams = Seams {
        transport: Some(cluster::Transport::over(net.link(id, addr(id)))),
        seed: Some(id.0),
        on_storage_failure: Some(Arc::new(record)),
        ..Default::default()
    };
    open_with(&options, seams).await
}

/// Waits until `check` answers `Some`, polling; fails the test after [`PATIENCE`].
pub(crate) async fn until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

impl TestCluster {
    /// Node `id`.
    pub(crate) fn node(&self, id: NodeId) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.id() == id)
            .expect("a node of the cluster")
    }

    /// Node `id`'s data directory.
    pub(crate) fn dir(&self, id: NodeId) -> &Path {
        let at = self.nodes.iter().position(|n| n.id() == id);
        self.dirs[at.expect("a node of the cluster")].path()
    }

    pub(crate) fn ids(&self) -> Vec<NodeId> {
        self.nodes.iter().map(Node::id).collect()
    }

    /// The nodes that host a replica of `p`.
    pub(crate) fn hosts(&self, p: PartitionId) -> Vec<NodeId> {
        let hosts = self.nodes.iter().filter(|n| n.host.partition(p).is_some());
        hosts.map(Node::id).collect()
    }

    /// The node that leads `p` with its actors running, once every replica knows it.
    pub(crate) async fn leader(&self, p: PartitionId) -> Option<NodeId> {
        let mut leading = None;
        for n in &self.nodes {
            if let Some(part) = n.host.partition(p) {
                if part.is_local_leader().await {
                    leading = Some(n.id());
                }
            }
        }
        let leader = leading?;
        let known = |n: &NodeId| {
            self.node(*n)
                .host
                .partition(p)
                .and_then(|x| x.group.leader())
        };
        self.hosts(p)
            .iter()
            .all(|n| known(n) == Some(leader))
            .then_some(leader)
    }

    /// The node that leads the meta group, as it knows itself.
    pub(crate) fn meta_leader(&self) -> Option<NodeId> {
        let leading = self.nodes.iter().find(|n| n.host.meta.is_leader());
        leading.map(Node::id)
    }

    /// The nodes that host no replica of `p`.
    pub(crate) fn outsiders(&self, p: PartitionId) -> Vec<NodeId> {
        let hosts = self.hosts(p);
        self.ids()
            .into_iter()
            .filter(|n| !hosts.contains(n))
            .collect()
    }

    /// `p`'s leader (waiting for one) and the other nodes that host a replica of it.
    pub(crate) async fn followers(&self, p: PartitionId) -> (NodeId, Vec<NodeId>) {
        let leader = until("a leader", async || self.leader(p).await).await;
        let hosts = self.hosts(p).into_iter().filter(|n| *n != leader);
        (leader, hosts.collect())
    }

    /// Every node recorded in the meta group and in every address book (the membership loop
    /// copies the record there), the meta group and every partition led.
    async fn settled(&self) -> Option<()> {
        let size = self.nodes.len();
        let known =
            |n: &Node| n.host.defs.nodes().len() == size && read(&n.host.members).len() == size;
        let recorded = self.nodes.iter().all(known);
        let meta = self.nodes.iter().any(|n| n.host.meta.is_leader());
        if !recorded || !meta {
            return None;
        }
        let partitions = self.nodes[0].host.partition_count();
        for p in 0..partitions {
            self.leader(PartitionId(p)).await?;
        }
        Some(())
    }

    /// Shuts every node down, then deletes their data.
    pub(crate) async fn stop(self) {
        for n in &self.nodes {
            n.shutdown().await;
        }
        drop(self.dirs);
    }
}

/// A workflow id on partition `p` (`n` tells workflows of one test apart).
pub(crate) fn workflow_on(p: PartitionId, n: u128) -> WorkflowId {
    WorkflowId::new(p, n << 64)
}

/// Starts workflow `id`: one SIMPLE task, input `{"x": 1}`.
pub(crate) fn start_op(id: &WorkflowId) -> WorkflowOp {
    let def = def_of(vec![simple("a")]);
    let input = obj(serde_json::json!({"x": 1}));
    WorkflowOp::Start(Box::new(StartInput::new(id.clone(), def, input)))
}
