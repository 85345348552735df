//! Clusters of real `baton` processes on loopback: `baton certs` for a cluster CA, then one
//! `baton server` per node with its own data directory, HTTP port and QUIC peer port.
//!
//! Nodes are named by their Raft node id (`1..=n`), the same number passed as `--node-id`. A
//! [`Cluster`] can kill a node with SIGKILL, restart it on the same data directory and ports, and
//! freeze it with SIGSTOP / thaw it with SIGCONT (sent with the `kill` command, so the harness needs
//! no signal crate). Readiness is observed over HTTP only: `/health` and `GET /api/admin/status`
//! (every group has a leader that all running nodes agree on). Dropping a cluster kills every child;
//! if the test thread is panicking, the tail of each node's log (every start of it) is printed first,
//! and with `BATON_KEEP_FAILED` set the cluster's directory (data and full logs) is kept.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::{file_tail, free_port, require_bin, Api, PARTITIONS};

/// How long a cluster (or a restarted node) may take until every node is healthy and every group
/// has an agreed leader. Generous: three debug binaries on a 2-core box.
pub const CLUSTER_READY_DEADLINE: Duration = Duration::from_secs(90);
/// Timeout of the harness's own status, digest and health probes: a frozen node must not hang them.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes of a node's current log printed when a test fails.
const LOG_TAIL_BYTES: u64 = 12 * 1024;
/// Bytes of each earlier log of a restarted node printed when a test fails.
const OLD_LOG_TAIL_BYTES: u64 = 4 * 1024;

/// Picks a free loopback UDP port (QUIC listens on UDP) by binding port 0 and releasing it.
pub fn free_udp_port() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind udp 127.0.0.1:0");
    socket
        .local_addr()
        .expect("local addr of a bound socket")
        .port()
}

/// Runs `baton certs --out DIR --nodes 1,2,.. --host 127.0.0.1`: a fresh cluster CA (`ca.pem`,
/// `ca.key`) and `node-<id>.pem` / `node-<id>.key` for every node. Panics with the command's output
/// unless it succeeds and wrote those files.
pub fn write_certs(dir: &Path, nodes: &[u64]) {
    std::fs::create_dir_all(dir).expect("create the certificate directory");
    let bin = require_bin();
    let list: Vec<String> = nodes.iter().map(u64::to_string).collect();
    let output = Command::new(&bin)
        .arg("certs")
        .arg("--out")
        .arg(dir)
        .arg("--nodes")
        .arg(list.join(","))
        .arg("--host")
        .arg("127.0.0.1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} certs: {e}", bin.display()));
    assert!(
        output.status.success(),
        "baton certs failed with {}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut expected = vec!["ca.pem".to_string(), "ca.key".to_string()];
    for id in nodes {
        expected.push(format!("node-{id}.pem"));
        expected.push(format!("node-{id}.key"));
    }
    for file in expected {
        assert!(
            dir.join(&file).is_file(),
            "baton certs did not write {} into {}",
            file,
            dir.display()
        );
    }
}

/// Runs `baton worker-cert`: a certificate for worker `id` granting `task_types` (`a,b` or `*`),
/// written into `dir` next to the CAs `baton certs` wrote there.
pub fn write_worker_cert(dir: &Path, id: &str, task_types: &str) {
    let bin = require_bin();
    let output = Command::new(&bin)
        .args(["worker-cert", "--certs"])
        .arg(dir)
        .args(["--id", id, "--task-types", task_types])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} worker-cert: {e}", bin.display()));
    assert!(
        output.status.success(),
        "baton worker-cert failed with {}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The partition of a workflow or task id: ids are UUID-shaped and carry their partition in the
/// last 16 bits, taken modulo the partition count.
pub fn partition_of(id: &str, partitions: usize) -> usize {
    let hex: String = id.chars().filter(|c| *c != '-').collect();
    assert!(
        hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "{id:?} is not a UUID-shaped id"
    );
    let low = u16::from_str_radix(&hex[28..], 16).expect("four hex digits");
    usize::from(low) % partitions.max(1)
}

/// The group name of partition `p` (`"p0"`..), as `/api/admin/status` names it.
pub fn partition_group(p: usize) -> String {
    format!("p{p}")
}

/// Copies a directory tree (files and directories only); used to hand a node's data to a process
/// started under another identity.
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Sends a signal with the `kill` command (`STOP`, `CONT`).
pub(crate) fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap_or_else(|e| panic!("cannot run kill -{sig} {pid}: {e}"));
    assert!(status.success(), "kill -{sig} {pid} failed with {status}");
}

/// What the nodes of a cluster run, when not the binary under test with no more arguments: used
/// by every later start of a node (see [`Cluster::start_with`], [`Cluster::set_binary`]).
#[derive(Clone, Debug, Default)]
pub struct LaunchConfig {
    /// The `baton` binary; `None` is [`crate::baton_bin`].
    pub binary: Option<PathBuf>,
    /// More arguments for `baton server`, after the ones the harness passes.
    pub extra_args: Vec<String>,
}

impl LaunchConfig {
    /// The binary to run: the chosen one (which must exist), else the binary under test.
    fn bin(&self) -> PathBuf {
        match &self.binary {
            Some(bin) => {
                assert!(bin.is_file(), "baton binary not found at {}", bin.display());
                bin.clone()
            }
            None => require_bin(),
        }
    }
}

/// What a `baton server` process of the cluster is started with.
struct Launch<'a> {
    id: u64,
    http_port: u16,
    quic_port: u16,
    worker_port: u16,
    data_dir: &'a Path,
    certs: &'a Path,
    cluster: &'a str,
    /// Join through this member's peer address instead of listing the initial members.
    join: Option<&'a str>,
    partitions: usize,
    log_path: &'a Path,
    config: &'a LaunchConfig,
}

impl Launch<'_> {
    fn spawn(&self) -> Child {
        let bin = self.config.bin();
        let log = File::create(self.log_path).expect("create the node log file");
        let mut cmd = Command::new(&bin);
        cmd.arg("server")
            .arg("--node-id")
            .arg(self.id.to_string())
            .arg("--data-dir")
            .arg(self.data_dir)
            .arg("--http")
            .arg(format!("127.0.0.1:{}", self.http_port))
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.quic_port))
            .args(match self.join {
                Some(seed) => ["--join", seed],
                None => ["--cluster", self.cluster],
            })
            .arg("--certs")
            .arg(self.certs)
            .arg("--workers")
            .arg(format!("127.0.0.1:{}", self.worker_port))
            .arg("--partitions")
            .arg(self.partitions.to_string())
            .args(&self.config.extra_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log file handle"))
            .stderr(log);
        // RUST_LOG is inherited when set; otherwise the binary's default filter applies (info, with
        // openraft and sled at warn: openraft's info level logs every vote and election).
        // Logs go to files that are printed on failure: no colour escapes.
        cmd.env("NO_COLOR", "1");
        cmd.spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", bin.display()))
    }
}

/// Group name -> (applied index, digest) as one node reports them in `/api/admin/digest`.
pub type GroupDigests = BTreeMap<String, (Option<u64>, String)>;

/// One node of a [`Cluster`].
struct Node {
    id: u64,
    http_port: u16,
    quic_port: u16,
    /// The QUIC worker gateway's port (`--workers`).
    worker_port: u16,
    /// Holds `data/` and one `node-<id>-<generation>.log` per start.
    dir: PathBuf,
    child: Option<Child>,
    /// How many times the process was started.
    generation: u32,
    /// Frozen with SIGSTOP and not yet thawed.
    stopped: bool,
    /// A spare: not an initial member; it joins through this peer address when first started.
    join: Option<String>,
    /// The binary and extra arguments of its next start.
    launch: LaunchConfig,
    api: Api,
    probe: Api,
}

impl Node {
    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log_path(&self, generation: u32) -> PathBuf {
        self.dir.join(format!("node-{}-{generation}.log", self.id))
    }

    fn running(&self) -> bool {
        self.child.is_some()
    }
}

/// A cluster of `baton server` processes on loopback with mutual-TLS QUIC between them.
pub struct Cluster {
    dir: tempfile::TempDir,
    certs: PathBuf,
    cluster_arg: String,
    partitions: usize,
    nodes: Vec<Node>,
}

impl Cluster {
    /// Writes certificates, starts `n` nodes (ids `1..=n`, [`PARTITIONS`] partitions) and waits until
    /// every node is healthy and every group has a leader all nodes agree on.
    pub fn start(n: usize) -> Cluster {
        Cluster::start_with_spares(n, 0)
    }

    /// Like [`Cluster::start`], with `spares` more nodes (ids `n+1..`) that have certificates and
    /// ports but are not started: [`Cluster::spawn`] starts one with `--join` through node 1.
    pub fn start_with_spares(n: usize, spares: usize) -> Cluster {
        Cluster::start_nodes(n, spares, LaunchConfig::default())
    }

    /// Like [`Cluster::start`], every node running `launch`'s binary with its extra arguments
    /// (kept for later starts until [`Cluster::set_binary`] or [`Cluster::set_extra_args`]).
    pub fn start_with(n: usize, launch: LaunchConfig) -> Cluster {
        Cluster::start_nodes(n, 0, launch)
    }

    fn start_nodes(n: usize, spares: usize, launch: LaunchConfig) -> Cluster {
        assert!(n >= 1, "a cluster has at least one node");
        let dir = tempfile::Builder::new()
            .prefix("baton-cluster-")
            .tempdir()
            .expect("create a temporary cluster directory");
        let certs = dir.path().join("certs");
        let ids: Vec<u64> = (1..=(n + spares) as u64).collect();
        write_certs(&certs, &ids);

        // Distinct ports; each picked by binding port 0 (HTTP on TCP, QUIC on UDP).
        let mut taken = BTreeSet::new();
        let mut pick = |f: fn() -> u16| loop {
            let port = f();
            if taken.insert(port) {
                break port;
            }
        };
        let mut nodes = Vec::new();
        for id in &ids {
            let node_dir = dir.path().join(format!("node-{id}"));
            std::fs::create_dir_all(&node_dir).expect("create the node directory");
            let http_port = pick(free_port);
            let quic_port = pick(free_udp_port);
            let worker_port = pick(free_udp_port);
            let base = format!("http://127.0.0.1:{http_port}");
            nodes.push(Node {
                id: *id,
                http_port,
                quic_port,
                worker_port,
                dir: node_dir,
                child: None,
                generation: 0,
                stopped: false,
                join: None,
                launch: launch.clone(),
                api: Api::new(&base),
                probe: Api::with_timeout(&base, PROBE_TIMEOUT),
            });
        }
        let seed = format!("127.0.0.1:{}", nodes[0].quic_port);
        for node in nodes.iter_mut().skip(n) {
            node.join = Some(seed.clone());
        }
        let cluster_arg = nodes
            .iter()
            .take(n)
            .map(|node| format!("{}=127.0.0.1:{}", node.id, node.quic_port))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Cluster {
            dir,
            certs,
            cluster_arg,
            partitions: PARTITIONS,
            nodes,
        };
        for id in ids.into_iter().take(n) {
            cluster.spawn(id);
        }
        cluster.wait_ready();
        cluster
    }

    /// Node ids, ascending.
    pub fn ids(&self) -> Vec<u64> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// The value passed as `--cluster` to every node (`1=127.0.0.1:Q1,...`).
    pub fn cluster_arg(&self) -> &str {
        &self.cluster_arg
    }

    /// Directory of the cluster's certificates.
    pub fn certs_dir(&self) -> &Path {
        &self.certs
    }

    /// The cluster's temporary directory (certificates, node directories, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn node(&self, id: u64) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id} in this cluster"))
    }

    fn node_mut(&mut self, id: u64) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id} in this cluster"))
    }

    /// Where node `id` serves QUIC workers.
    pub fn worker_addr(&self, id: u64) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.node(id).worker_port))
    }

    /// The HTTP client of node `id` (requests time out after [`crate::REQUEST_TIMEOUT`]).
    pub fn api(&self, id: u64) -> Api {
        self.node(id).api.clone()
    }

    /// A client of node `id` with its own request timeout.
    pub fn api_with_timeout(&self, id: u64, timeout: Duration) -> Api {
        Api::with_timeout(&self.base_url(id), timeout)
    }

    pub fn base_url(&self, id: u64) -> String {
        format!("http://127.0.0.1:{}", self.node(id).http_port)
    }

    pub fn http_port(&self, id: u64) -> u16 {
        self.node(id).http_port
    }

    pub fn quic_port(&self, id: u64) -> u16 {
        self.node(id).quic_port
    }

    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.node(id).data_dir()
    }

    /// The process id of node `id`, if it runs.
    pub fn pid(&self, id: u64) -> Option<u32> {
        self.node(id).child.as_ref().map(Child::id)
    }

    /// Whether node `id` has a process (it may be frozen).
    pub fn is_running(&self, id: u64) -> bool {
        self.node(id).running()
    }

    /// Whether node `id` runs and is not frozen: the nodes whose answers the harness waits for.
    pub fn is_live(&self, id: u64) -> bool {
        let node = self.node(id);
        node.running() && !node.stopped
    }

    /// Ids of the nodes that run and are not frozen.
    pub fn live_ids(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|n| n.running() && !n.stopped)
            .map(|n| n.id)
            .collect()
    }

    /// Reaps the nodes whose process exited on its own (a failpoint aborted it) and answers
    /// their ids; they no longer count as running.
    pub fn reap_exited(&mut self) -> Vec<u64> {
        let mut exited = Vec::new();
        for node in &mut self.nodes {
            let gone = node
                .child
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
            if gone {
                node.child = None;
                exited.push(node.id);
            }
        }
        exited
    }

    /// Kills node `id` with SIGKILL (no chance to flush) and reaps it. No-op if it is not running.
    pub fn kill9(&mut self, id: u64) {
        let node = self.node_mut(id);
        if let Some(mut child) = node.child.take() {
            child.kill().expect("SIGKILL the node");
            child.wait().expect("reap the killed node");
        }
        node.stopped = false;
    }

    /// Stops node `id` gracefully with SIGTERM and waits up to `within` for it to exit (then kills
    /// it); answers whether it exited cleanly in time.
    pub fn terminate(&mut self, id: u64, within: Duration) -> bool {
        let node = self.node_mut(id);
        let Some(mut child) = node.child.take() else {
            return false;
        };
        signal(child.id(), "TERM");
        let deadline = Instant::now() + within;
        let clean = loop {
            match child.try_wait().expect("query the node process") {
                Some(status) => break status.success(),
                None if Instant::now() >= deadline => {
                    child.kill().expect("SIGKILL the node");
                    child.wait().expect("reap the node");
                    break false;
                }
                None => thread::sleep(Duration::from_millis(20)),
            }
        };
        node.stopped = false;
        clean
    }

    /// Starts node `id` again on its data directory and ports (killing it first if it runs), then
    /// waits until the whole cluster is ready again.
    pub fn restart(&mut self, id: u64) {
        self.kill9(id);
        self.spawn(id);
        self.wait_ready();
    }

    /// Starts node `id` again without waiting for anything (see [`Cluster::wait_ready`]).
    pub fn spawn(&mut self, id: u64) {
        let cluster_arg = self.cluster_arg.clone();
        let certs = self.certs.clone();
        let partitions = self.partitions;
        let node = self.node_mut(id);
        assert!(node.child.is_none(), "node {id} already runs");
        node.generation += 1;
        let log_path = node.log_path(node.generation);
        let data_dir = node.data_dir();
        let join = node.join.clone();
        let launch = node.launch.clone();
        let child = Launch {
            id,
            http_port: node.http_port,
            quic_port: node.quic_port,
            worker_port: node.worker_port,
            data_dir: &data_dir,
            certs: &certs,
            cluster: &cluster_arg,
            join: join.as_deref(),
            partitions,
            log_path: &log_path,
            config: &launch,
        }
        .spawn();
        node.child = Some(child);
        node.stopped = false;
    }

    /// The binary node `id` runs from its next start on; `None` is the binary under test.
    pub fn set_binary(&mut self, id: u64, binary: Option<PathBuf>) {
        self.node_mut(id).launch.binary = binary;
    }

    /// The extra `baton server` arguments of node `id` from its next start on.
    pub fn set_extra_args(&mut self, id: u64, args: Vec<String>) {
        self.node_mut(id).launch.extra_args = args;
    }

    /// Waits up to `within` for node `id`'s process to exit by itself (a binary refusing its data
    /// directory); its exit status, or None if it still runs then. An exited node no longer runs.
    pub fn wait_exit(&mut self, id: u64, within: Duration) -> Option<std::process::ExitStatus> {
        let node = self.node_mut(id);
        let deadline = Instant::now() + within;
        loop {
            let child = node.child.as_mut()?;
            if let Some(status) = child.try_wait().expect("query the node process") {
                node.child = None;
                node.stopped = false;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Freezes node `id` with SIGSTOP: its sockets stay open, it answers nothing.
    pub fn sigstop(&mut self, id: u64) {
        let pid = self
            .pid(id)
            .unwrap_or_else(|| panic!("node {id} is not running"));
        signal(pid, "STOP");
        self.node_mut(id).stopped = true;
    }

    /// Thaws node `id` with SIGCONT.
    pub fn sigcont(&mut self, id: u64) {
        let pid = self
            .pid(id)
            .unwrap_or_else(|| panic!("node {id} is not running"));
        signal(pid, "CONT");
        self.node_mut(id).stopped = false;
    }

    /// Panics with the node's log if a child exited on its own.
    fn check_alive(&mut self) {
        for node in &mut self.nodes {
            if let Some(child) = node.child.as_mut() {
                if let Some(status) = child.try_wait().expect("query the node process") {
                    node.child = None;
                    panic!(
                        "baton node {} exited on its own with {status}\n--- node {} log ---\n{}",
                        node.id,
                        node.id,
                        file_tail(&node.log_path(node.generation), LOG_TAIL_BYTES)
                    );
                }
            }
        }
    }

    /// Waits (up to [`CLUSTER_READY_DEADLINE`]) until [`Cluster::ready`] holds.
    pub fn wait_ready(&mut self) {
        self.wait_ready_within(CLUSTER_READY_DEADLINE);
    }

    /// Waits until every live node answers `/health` with 200 and every group has a leader that every
    /// live node names and that itself reports the `Leader` role; panics with the last reason after
    /// `timeout`.
    pub fn wait_ready_within(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive();
            let last = match self.ready() {
                Ok(()) => return,
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() >= deadline {
                panic!("cluster not ready within {timeout:?}: {last}");
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the cluster is ready (see [`Cluster::wait_ready_within`]), with the reason if not.
    pub fn ready(&self) -> anyhow::Result<()> {
        let live = self.live_ids();
        if live.is_empty() {
            bail!("no live node");
        }
        let mut views = BTreeMap::new();
        for id in &live {
            let health = self
                .node(*id)
                .probe
                .try_get("/health")
                .with_context(|| format!("node {id} /health"))?;
            if !health.is_success() {
                bail!(
                    "node {id} /health answered {}: {}",
                    health.status,
                    health.body
                );
            }
            views.insert(*id, self.status(*id)?);
        }
        let leaders = agreed_leaders(&views)?;
        let expected = self.partitions + 1;
        if leaders.len() != expected {
            bail!(
                "{} groups have an agreed leader, expected {expected} (meta and p0..p{}): {leaders:?}",
                leaders.len(),
                self.partitions - 1
            );
        }
        Ok(())
    }

    /// `GET /api/admin/status` of node `id`: its groups' Raft status (a JSON list).
    pub fn status(&self, id: u64) -> anyhow::Result<Vec<Value>> {
        let reply = self.node(id).probe.try_get("/api/admin/status")?;
        if reply.status != 200 {
            bail!(
                "node {id} /api/admin/status answered {}: {}",
                reply.status,
                reply.body
            );
        }
        match serde_json::from_str(&reply.body)
            .with_context(|| format!("node {id} status is not JSON: {}", reply.body))?
        {
            Value::Array(groups) => Ok(groups),
            other => bail!("node {id} status is not a list: {other}"),
        }
    }

    /// The status of group `name` as node `id` reports it.
    pub fn group_status(&self, id: u64, name: &str) -> anyhow::Result<Value> {
        self.status(id)?
            .into_iter()
            .find(|g| g["name"] == name)
            .with_context(|| format!("node {id} reports no group {name}"))
    }

    /// Group name -> leader, as the live nodes agree on it (groups without agreement are left out).
    pub fn leaders(&self) -> BTreeMap<String, u64> {
        let mut views = BTreeMap::new();
        for id in self.live_ids() {
            if let Ok(status) = self.status(id) {
                views.insert(id, status);
            }
        }
        leaders_by_majority(&views)
    }

    /// The agreed leader of partition `p`, if there is one.
    pub fn leader_of_partition(&self, p: usize) -> Option<u64> {
        self.leaders().get(&partition_group(p)).copied()
    }

    /// How many partitions (`p*` groups, not `meta`) each node leads; every node is listed.
    /// Kills (`kill -9`) the leader of the partition a key hashes to (where Baton runs a
    /// schedule, or the consumer of an event: `stable_hash(key) % partitions`), and answers a
    /// surviving node's id.
    pub fn kill_leader_of_key(&mut self, key: &str) -> u64 {
        let p = (proto::hash::stable_hash(key.as_bytes()) % self.partitions() as u64) as usize;
        let leader = self
            .leader_of_partition(p)
            .unwrap_or_else(|| panic!("no agreed leader of {}", partition_group(p)));
        self.kill9(leader);
        self.ids()
            .into_iter()
            .find(|id| *id != leader)
            .expect("a survivor")
    }

    pub fn leader_counts(&self) -> BTreeMap<u64, usize> {
        let mut counts: BTreeMap<u64, usize> = self.ids().into_iter().map(|id| (id, 0)).collect();
        for (group, leader) in self.leaders() {
            if group.starts_with('p') {
                *counts.entry(leader).or_default() += 1;
            }
        }
        counts
    }

    /// `GET /api/admin/digest` of node `id`: `[{name, applied, digest}]`.
    pub fn digest(&self, id: u64) -> anyhow::Result<Vec<Value>> {
        let reply = self.node(id).probe.try_get("/api/admin/digest")?;
        if reply.status != 200 {
            bail!(
                "node {id} /api/admin/digest answered {}: {}",
                reply.status,
                reply.body
            );
        }
        match serde_json::from_str(&reply.body)
            .with_context(|| format!("node {id} digest is not JSON: {}", reply.body))?
        {
            Value::Array(groups) => Ok(groups),
            other => bail!("node {id} digest is not a list: {other}"),
        }
    }

    /// Node -> group name -> (applied index, digest), from every live node.
    pub fn digests(&self) -> anyhow::Result<BTreeMap<u64, GroupDigests>> {
        let mut all = BTreeMap::new();
        for id in self.live_ids() {
            let mut groups = BTreeMap::new();
            for g in self.digest(id)? {
                let name = g["name"]
                    .as_str()
                    .with_context(|| format!("node {id}: digest entry without a name: {g}"))?
                    .to_string();
                let digest = g["digest"]
                    .as_str()
                    .with_context(|| format!("node {id}: digest entry without a digest: {g}"))?
                    .to_string();
                groups.insert(name, (g["applied"].as_u64(), digest));
            }
            all.insert(id, groups);
        }
        Ok(all)
    }

    /// Every log of node `id` (all starts), concatenated.
    pub fn logs(&self, id: u64) -> String {
        let node = self.node(id);
        let mut out = String::new();
        for generation in 1..=node.generation {
            out.push_str(&std::fs::read_to_string(node.log_path(generation)).unwrap_or_default());
        }
        out
    }

    /// The tail of node `id`'s current log.
    pub fn log_tail(&self, id: u64) -> String {
        let node = self.node(id);
        file_tail(&node.log_path(node.generation), LOG_TAIL_BYTES)
    }

    /// Starts a process that claims to be node `id` of this cluster (same ports and `--cluster`) with
    /// the certificates in `certs` and the data in `data_dir`; does not wait for anything. Node `id`
    /// must not be running (its ports are reused).
    pub fn start_impostor(&self, id: u64, certs: &Path, data_dir: &Path) -> Impostor {
        let node = self.node(id);
        assert!(
            !node.running(),
            "node {id} runs: stop it before an impostor takes its ports"
        );
        let log_path = self.dir.path().join(format!("impostor-{id}.log"));
        let child = Launch {
            id,
            http_port: node.http_port,
            quic_port: node.quic_port,
            worker_port: node.worker_port,
            data_dir,
            certs,
            cluster: &self.cluster_arg,
            join: None,
            partitions: self.partitions,
            log_path: &log_path,
            config: &LaunchConfig::default(),
        }
        .spawn();
        Impostor {
            child: Some(child),
            log_path,
            api: Api::with_timeout(&self.base_url(id), PROBE_TIMEOUT),
        }
    }
}

/// Group -> leader, where every node in `views` names the same leader and that leader (when it is
/// among `views`) reports the `Leader` role; an error names the first group that is not there yet.
fn agreed_leaders(views: &BTreeMap<u64, Vec<Value>>) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut names = BTreeSet::new();
    for groups in views.values() {
        for g in groups {
            if let Some(name) = g["name"].as_str() {
                names.insert(name.to_string());
            }
        }
    }
    let mut leaders = BTreeMap::new();
    for name in names {
        let mut seen = BTreeSet::new();
        for (id, groups) in views {
            // Nodes that host no replica of the group have no say.
            let Some(g) = groups.iter().find(|g| g["name"] == name.as_str()) else {
                continue;
            };
            match g["leader"].as_u64() {
                Some(leader) => {
                    seen.insert(leader);
                }
                None => bail!("node {id} knows no leader of {name}: {g}"),
            }
        }
        if seen.len() != 1 {
            bail!("nodes disagree on the leader of {name}: {seen:?}");
        }
        let leader = *seen.iter().next().expect("one leader");
        match views.get(&leader) {
            Some(groups) => {
                let own = groups
                    .iter()
                    .find(|g| g["name"] == name.as_str())
                    .expect("checked above");
                if own["role"] != "Leader" {
                    bail!("{name}: node {leader} is named leader but reports {own}");
                }
            }
            None => bail!("{name}: the named leader {leader} is not a live node"),
        }
        leaders.insert(name, leader);
    }
    Ok(leaders)
}

/// Group -> leader: the node that reports the `Leader` role with the highest term, else the leader
/// most nodes name.
fn leaders_by_majority(views: &BTreeMap<u64, Vec<Value>>) -> BTreeMap<String, u64> {
    let mut self_declared: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut named: BTreeMap<String, BTreeMap<u64, usize>> = BTreeMap::new();
    for (id, groups) in views {
        for g in groups {
            let Some(name) = g["name"].as_str() else {
                continue;
            };
            let term = g["term"].as_u64().unwrap_or(0);
            if g["role"] == "Leader" {
                let entry = self_declared.entry(name.to_string()).or_insert((term, *id));
                if term > entry.0 {
                    *entry = (term, *id);
                }
            }
            if let Some(leader) = g["leader"].as_u64() {
                *named
                    .entry(name.to_string())
                    .or_default()
                    .entry(leader)
                    .or_default() += 1;
            }
        }
    }
    let mut out = BTreeMap::new();
    for (name, votes) in named {
        if let Some((leader, _)) = votes.iter().max_by_key(|(_, count)| **count) {
            out.insert(name, *leader);
        }
    }
    for (name, (_, id)) in self_declared {
        out.insert(name, id);
    }
    out
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if thread::panicking() {
            if std::env::var_os("BATON_KEEP_FAILED").is_some() {
                self.dir.disable_cleanup(true);
                eprintln!(
                    "BATON_KEEP_FAILED: keeping the cluster directory (logs, data) at {}",
                    self.dir.path().display()
                );
            }
            for node in &self.nodes {
                for generation in 1..=node.generation {
                    let max = if generation == node.generation {
                        LOG_TAIL_BYTES
                    } else {
                        OLD_LOG_TAIL_BYTES
                    };
                    eprintln!(
                        "--- baton node {} log (http {}, quic {}, start #{generation}) ---\n{}\n\
                         --- end of node {} log ---",
                        node.id,
                        node.http_port,
                        node.quic_port,
                        file_tail(&node.log_path(generation), max),
                        node.id
                    );
                }
            }
        }
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                // SIGKILL also ends a process frozen with SIGSTOP.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// A process started by [`Cluster::start_impostor`]. Killed on drop (log tail printed if panicking).
pub struct Impostor {
    child: Option<Child>,
    log_path: PathBuf,
    api: Api,
}

impl Impostor {
    /// Client for the impostor's HTTP port (short timeout).
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// Whether the process has exited on its own.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().expect("query the impostor process"))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Kills the process and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "--- impostor log ---\n{}\n--- end of impostor log ---",
                file_tail(&self.log_path, LOG_TAIL_BYTES)
            );
        }
        self.kill9();
    }
}
