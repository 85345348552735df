//! A test cluster in one process: N nodes, each with its own (sled) database in a temporary
//! directory, its own QUIC transport on 127.0.0.1 and its own Raft router, running the same
//! groups. Nodes can be stopped and restarted on the same address and data.

use super::*;
use cluster::network::RaftRouter;
use cluster::tls::Identity;
use cluster::transport::Transport;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// One running node.
pub struct TestNode {
    pub db: Db,
    pub transport: Transport,
    pub router: RaftRouter,
    /// Open groups by name, with their state machines.
    pub groups: BTreeMap<String, (Group, Arc<Counter>)>,
}

/// N nodes `1..=N` running the same groups.
pub struct TestCluster {
    pub identities: BTreeMap<NodeId, Identity>,
    pub addrs: BTreeMap<NodeId, SocketAddr>,
    pub dirs: BTreeMap<NodeId, tempfile::TempDir>,
    /// Running nodes (`None` while stopped).
    pub nodes: BTreeMap<NodeId, Option<TestNode>>,
    /// Group names every node runs.
    pub names: Vec<String>,
    /// Adjusts each group's options (snapshot policy...).
    pub tweak: fn(&mut GroupOptions),
    /// Initial voters (all nodes unless a test says otherwise).
    pub voters: BTreeMap<NodeId, SocketAddr>,
}

/// Test options for a cluster group.
pub fn cluster_options(name: &str, node: NodeId) -> GroupOptions {
    GroupOptions {
        node,
        leader_wait_ms: 10_000,
        ..options(name)
    }
}

impl TestCluster {
    /// Starts `n` nodes running `names`, all voters.
    pub async fn start(n: u64, names: &[&str], tweak: fn(&mut GroupOptions)) -> TestCluster {
        let (_, ids) = identities(n);
        let mut identities = BTreeMap::new();
        let mut transports = BTreeMap::new();
        let mut addrs = BTreeMap::new();
        for identity in ids {
            let transport = start_transport(identity.clone(), any_port()).await;
            addrs.insert(identity.node, transport.local_addr().expect("addr"));
            transports.insert(identity.node, transport);
            identities.insert(identity.node, identity);
        }
        let mut cluster = TestCluster {
            identities,
            voters: addrs.clone(),
            addrs,
            dirs: BTreeMap::new(),
            nodes: BTreeMap::new(),
            names: names.iter().map(|s| s.to_string()).collect(),
            tweak,
        };
        let mut opening = Vec::new();
        for (id, transport) in transports {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = open_db(dir.path());
            cluster.dirs.insert(id, dir);
            opening.push(cluster.open_node(id, db, transport));
        }
        let nodes = futures::future::join_all(opening).await;
        for node in nodes {
            cluster.nodes.insert(node.transport.node(), Some(node));
        }
        cluster
    }

    /// Opens every group of node `id` on `db` over `transport`.
    fn open_node(
        &self,
        id: NodeId,
        db: Db,
        transport: Transport,
    ) -> impl std::future::Future<Output = TestNode> + 'static {
        for (peer, addr) in &self.addrs {
            if *peer != id {
                transport.set_peer(*peer, *addr);
            }
        }
        let router = RaftRouter::new(transport.clone());
        let names = self.names.clone();
        let voters = self.voters.clone();
        let tweak = self.tweak;
        async move {
            let mut groups = BTreeMap::new();
            for name in names {
                let mut opts =
                    cluster_options(&name, id).with_cluster(router.clone(), voters.clone());
                tweak(&mut opts);
                let (group, sm) = open_group(&db, opts).await;
                groups.insert(name, (group, sm));
            }
            TestNode {
                db,
                transport,
                router,
                groups,
            }
        }
    }

    /// The running node `id`.
    pub fn node(&self, id: NodeId) -> &TestNode {
        self.nodes
            .get(&id)
            .and_then(|n| n.as_ref())
            .unwrap_or_else(|| panic!("node {id} is not running"))
    }

    /// Group `name` on node `id`.
    pub fn group(&self, id: NodeId, name: &str) -> &Group {
        &self.node(id).groups[name].0
    }

    /// The ids of the running nodes.
    pub fn running(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Waits until one running node leads group `name` (caught up) and every running voter
    /// knows it; returns it.
    pub async fn leader(&self, name: &str) -> NodeId {
        let mut found = None;
        wait_until(
            &format!("a leader of {name}"),
            Duration::from_secs(15),
            || {
                let running = self.running();
                let leaders: Vec<NodeId> = running
                    .iter()
                    .filter(|id| self.group(**id, name).is_leader())
                    .copied()
                    .collect();
                let [leader] = leaders[..] else { return false };
                let known = running
                    .iter()
                    .all(|id| self.group(*id, name).leader() == Some(leader));
                found = Some(leader);
                known
            },
        )
        .await;
        found.expect("leader")
    }

    /// Waits until group `name` counts `n` commands on every running node, then checks that their
    /// state trees hold the same keys and values.
    pub async fn converged(&self, name: &str, n: u64) {
        wait_until(
            &format!("{n} commands applied on every node in {name}"),
            Duration::from_secs(15),
            || {
                self.running()
                    .iter()
                    .all(|id| count(self.group(*id, name).state()) == n)
            },
        )
        .await;
        let mut dumps = self.running().into_iter().map(|id| {
            (
                id,
                cluster::snapshot::dump_pairs(self.group(id, name).state()).expect("dump"),
            )
        });
        let (first, reference) = dumps.next().expect("a running node");
        for (id, dump) in dumps {
            assert!(
                dump == reference,
                "state of {name} on node {id} differs from node {first}"
            );
        }
    }

    /// Stops node `id`: its groups, then its transport; the node's handles are dropped.
    pub async fn stop(&mut self, id: NodeId) {
        let node = self
            .nodes
            .get_mut(&id)
            .and_then(|n| n.take())
            .expect("running");
        for (group, _) in node.groups.values() {
            group.shutdown().await.expect("shutdown");
        }
        node.transport.shutdown().await;
        drop(node);
    }

    /// Restarts node `id` on its address and data directory.
    pub async fn restart(&mut self, id: NodeId) {
        assert!(self.nodes.get(&id).is_some_and(|n| n.is_none()), "stopped");
        let db = open_db(self.dirs[&id].path());
        let transport = start_transport(self.identities[&id].clone(), self.addrs[&id]).await;
        let node = self.open_node(id, db, transport).await;
        self.nodes.insert(id, Some(node));
    }

    /// Stops every running node.
    pub async fn stop_all(&mut self) {
        for id in self.running() {
            self.stop(id).await;
        }
    }
}
