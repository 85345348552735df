//! The system under test: a value that starts, names its HTTP endpoint and processes, and stops.
//!
//! Two kinds: [`TargetSpec::LocalServer`] (one `baton server` child on loopback, the embedded
//! default) and [`TargetSpec::LocalCluster`] (several `baton server` children on loopback forming
//! one cluster, RF = min(3, nodes), with certificates from `baton certs`). A target owns its
//! temporary directory and kills its processes when dropped, so a failed run leaves nothing behind.

use anyhow::{bail, Context};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started node has to answer `GET /health`.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// How much of a node's log to print when it fails to start.
const LOG_TAIL_BYTES: u64 = 4_000;

/// What to start.
#[derive(Debug, Clone)]
pub enum TargetSpec {
    /// One `baton server` process with a fresh data directory on a free loopback port.
    LocalServer {
        bin: PathBuf,
        partitions: u16,
        /// Serve QUIC workers (`--workers`), with a certificate for [`QUIC_WORKER_ID`].
        quic: bool,
        /// Set access control up; every request then carries a token.
        auth: bool,
    },
    /// `nodes` `baton server` processes forming one cluster on loopback.
    LocalCluster {
        bin: PathBuf,
        nodes: u16,
        partitions: u16,
        quic: bool,
        auth: bool,
    },
}

/// The id of the bench's QUIC workers' certificate (every bench worker shares it).
pub const QUIC_WORKER_ID: &str = "bench";

impl TargetSpec {
    /// A one-line description for the report (cluster size, replication, partitions).
    pub fn describe(&self) -> String {
        let shape = self.shape();
        match self {
            TargetSpec::LocalServer { auth: true, .. }
            | TargetSpec::LocalCluster { auth: true, .. } => {
                format!("{shape}, access control on (a token on every request)")
            }
            _ => shape,
        }
    }

    fn shape(&self) -> String {
        match self {
            TargetSpec::LocalServer { partitions, .. } => {
                format!("1 node (local baton server), RF 1, {partitions} partitions")
            }
            TargetSpec::LocalCluster {
                nodes, partitions, ..
            } => format!(
                "{nodes} nodes (local baton servers on loopback), RF {}, {partitions} partitions",
                (*nodes).min(3)
            ),
        }
    }

    /// The same target with access control set up (`true`) or not.
    pub fn with_auth(&self, on: bool) -> TargetSpec {
        let mut spec = self.clone();
        match &mut spec {
            TargetSpec::LocalServer { auth, .. } | TargetSpec::LocalCluster { auth, .. } => {
                *auth = on
            }
        }
        spec
    }

    /// The `baton` binary the target runs.
    pub fn bin(&self) -> &Path {
        match self {
            TargetSpec::LocalServer { bin, .. } | TargetSpec::LocalCluster { bin, .. } => bin,
        }
    }
}

/// A running target.
pub struct Target {
    /// Each node's HTTP base URL, without a trailing slash.
    urls: Vec<String>,
    /// The processes that make up the target (their CPU and RSS are what the bench reports).
    children: Vec<Child>,
    /// Each node's log.
    logs: Vec<PathBuf>,
    /// Each node's QUIC worker address (empty unless the spec asked for QUIC workers).
    worker_addrs: Vec<SocketAddr>,
    /// Certificates, data directories and logs; removed when the target is dropped.
    dir: tempfile::TempDir,
}

impl Target {
    /// Starts the target and waits until it answers `GET /health`.
    pub fn start(spec: &TargetSpec) -> anyhow::Result<Self> {
        let bin = spec.bin();
        if !bin.is_file() {
            bail!(
                "baton binary not found at {}: build it (`cargo build --release -p baton-node \
                 --bin baton`) or pass --baton-bin",
                bin.display()
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("baton-bench-")
            .tempdir()
            .context("cannot create the target's directory")?;
        let mut target = Target {
            urls: Vec::new(),
            children: Vec::new(),
            logs: Vec::new(),
            worker_addrs: Vec::new(),
            dir,
        };
        let certs = target.dir.path().join("certs");
        let auth = match spec {
            TargetSpec::LocalServer {
                partitions,
                quic,
                auth,
                ..
            } => {
                target.start_server(bin, &certs, *partitions, *quic)?;
                *auth
            }
            TargetSpec::LocalCluster {
                nodes,
                partitions,
                quic,
                auth,
                ..
            } => {
                target.start_cluster(bin, &certs, *nodes, *partitions, *quic)?;
                *auth
            }
        };
        if auth {
            target.set_up_access()?;
        }
        Ok(target)
    }

    /// Sets access control up (`POST /api/admin/access`), exchanges the administrator's key for
    /// a token, and has every client of the bench send it from then on.
    fn set_up_access(&self) -> anyhow::Result<()> {
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let url = &self.urls[0];
        let key: Value = http
            .post(format!("{url}/api/admin/access"))
            .send()?
            .error_for_status()
            .context("setting access control up")?
            .json()?;
        let body = serde_json::json!({"keyId": key["id"], "keySecret": key["secret"]});
        let answer: Value = http
            .post(format!("{url}/api/token"))
            .json(&body)
            .send()?
            .error_for_status()
            .context("exchanging the administrator's key for a token")?
            .json()?;
        let token = answer["token"].as_str().context("a token")?;
        super::client::use_token(token.to_owned());
        Ok(())
    }

    /// One node (id 1), with QUIC workers if `quic`; waits until it is ready.
    fn start_server(
        &mut self,
        bin: &Path,
        certs: &Path,
        partitions: u16,
        quic: bool,
    ) -> anyhow::Result<()> {
        let mut args = Vec::new();
        if quic {
            write_certs(bin, certs, &[1])?;
            write_worker_cert(bin, certs)?;
            args = self.quic_args(certs)?;
        }
        self.spawn(bin, 1, partitions, &args)?;
        self.wait_ready(usize::from(partitions) + 1)
    }

    /// Nodes 1..=`nodes` forming one cluster on free loopback ports, with the cluster's
    /// certificates (and QUIC workers if `quic`); waits until they are ready.
    fn start_cluster(
        &mut self,
        bin: &Path,
        certs: &Path,
        nodes: u16,
        partitions: u16,
        quic: bool,
    ) -> anyhow::Result<()> {
        let ids: Vec<u16> = (1..=nodes).collect();
        write_certs(bin, certs, &ids)?;
        if quic {
            write_worker_cert(bin, certs)?;
        }
        let peers: Vec<(u16, u16)> = ids
            .iter()
            .map(|id| free_udp_port().map(|p| (*id, p)))
            .collect::<anyhow::Result<_>>()?;
        let cluster = peers
            .iter()
            .map(|(id, p)| format!("{id}=127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        for (id, port) in &peers {
            let mut args = vec![
                "--listen".to_owned(),
                format!("127.0.0.1:{port}"),
                "--cluster".to_owned(),
                cluster.clone(),
            ];
            if quic {
                args.extend(self.quic_args(certs)?);
            } else {
                args.extend(["--certs".to_owned(), certs.display().to_string()]);
            }
            self.spawn(bin, *id, partitions, &args)?;
        }
        self.wait_ready(usize::from(partitions) + 1)
    }

    /// The arguments that make a node serve QUIC workers on a free UDP port (recorded in
    /// `worker_addrs`), with the certificates in `certs`.
    fn quic_args(&mut self, certs: &Path) -> anyhow::Result<Vec<String>> {
        let addr = format!("127.0.0.1:{}", free_udp_port()?);
        self.worker_addrs.push(addr.parse()?);
        Ok(vec![
            "--workers".into(),
            addr,
            "--certs".into(),
            certs.display().to_string(),
        ])
    }

    /// Every node's HTTP base URL.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Each node's QUIC worker address (empty without QUIC workers).
    pub fn worker_addrs(&self) -> &[SocketAddr] {
        &self.worker_addrs
    }

    /// Where the certificates are (the cluster CA and the QUIC workers' certificate).
    pub fn certs_dir(&self) -> PathBuf {
        self.dir.path().join("certs")
    }

    /// The process ids of the target's processes.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// The last bytes of each node's log.
    pub fn log_tail(&self) -> String {
        self.logs
            .iter()
            .enumerate()
            .map(|(i, log)| format!("--- node {} ---\n{}", i + 1, file_tail(log, LOG_TAIL_BYTES)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Kills node `index` (0-based, in start order) with SIGKILL and reaps it; its URL and pid
    /// stay listed (requests to it fail).
    pub fn kill(&mut self, index: usize) -> anyhow::Result<()> {
        let child = self
            .children
            .get_mut(index)
            .with_context(|| format!("no node at index {index}"))?;
        child.kill().context("kill")?;
        child.wait().context("reap")?;
        Ok(())
    }

    /// Kills and reaps every process.
    pub fn stop(&mut self) {
        for mut child in self.children.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Target {
    /// Starts node `id` with a fresh data directory and HTTP port, plus `extra` arguments.
    fn spawn(
        &mut self,
        bin: &Path,
        id: u16,
        partitions: u16,
        extra: &[String],
    ) -> anyhow::Result<()> {
        let port = free_port()?;
        let log = self.dir.path().join(format!("node-{id}.log"));
        let log_file = File::create(&log).context("cannot create the server log")?;
        let child = Command::new(bin)
            .arg("server")
            .arg("--node-id")
            .arg(id.to_string())
            .arg("--data-dir")
            .arg(self.dir.path().join(format!("data-{id}")))
            .arg("--http")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--partitions")
            .arg(partitions.to_string())
            .args(extra)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(
                log_file
                    .try_clone()
                    .context("cannot clone the log handle")?,
            )
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        self.urls.push(format!("http://127.0.0.1:{port}"));
        self.children.push(child);
        self.logs.push(log);
        Ok(())
    }

    /// Waits until every node answers `GET /health` and the nodes report `groups` groups (the
    /// meta group and the partitions), each with a leader that every node names.
    fn wait_ready(&mut self, groups: usize) -> anyhow::Result<()> {
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(2))
            .default_headers(super::client::default_headers())
            .build()?;
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            for child in &mut self.children {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "baton exited during start-up with {status}\n{}",
                        self.log_tail()
                    );
                }
            }
            let last = match ready(&http, &self.urls, groups) {
                Ok(()) => return Ok(()),
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() >= deadline {
                bail!(
                    "the target was not ready within {START_DEADLINE:?}: {last}\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether every node is healthy and agrees on a leader of each of `groups` groups.
fn ready(http: &reqwest::blocking::Client, urls: &[String], groups: usize) -> anyhow::Result<()> {
    let mut leaders: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for url in urls {
        let health = http.get(format!("{url}/health")).send()?;
        if !health.status().is_success() {
            bail!("{url}/health answered {}", health.status());
        }
        let status: Vec<Value> = http
            .get(format!("{url}/api/admin/status"))
            .send()?
            .error_for_status()?
            .json()?;
        for group in status {
            let name = group["name"].as_str().unwrap_or_default().to_owned();
            let Some(leader) = group["leader"].as_u64() else {
                bail!("{url} knows no leader of {name}");
            };
            leaders.entry(name).or_default().insert(leader);
        }
    }
    if leaders.len() != groups {
        bail!("{} groups known, expected {groups}", leaders.len());
    }
    if let Some((name, seen)) = leaders.iter().find(|(_, seen)| seen.len() != 1) {
        bail!("nodes disagree on the leader of {name}: {seen:?}");
    }
    Ok(())
}

/// Runs `baton certs` for `ids` into `dir` (cluster and workers CAs, one certificate per node).
fn write_certs(bin: &Path, dir: &Path, ids: &[u16]) -> anyhow::Result<()> {
    let list: Vec<String> = ids.iter().map(u16::to_string).collect();
    let dir = dir.display().to_string();
    run_baton(
        bin,
        &[
            "certs",
            "--out",
            &dir,
            "--nodes",
            &list.join(","),
            "--host",
            "127.0.0.1",
        ],
    )
}

/// Runs `baton worker-cert` for [`QUIC_WORKER_ID`], allowed every task type, into `dir`.
fn write_worker_cert(bin: &Path, dir: &Path) -> anyhow::Result<()> {
    let dir = dir.display().to_string();
    run_baton(
        bin,
        &[
            "worker-cert",
            "--certs",
            &dir,
            "--id",
            QUIC_WORKER_ID,
            "--task-types",
            "*",
        ],
    )
}

/// Runs a `baton` subcommand to completion; its stderr is the error when it fails.
fn run_baton(bin: &Path, args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {} {}", bin.display(), args[0]))?;
    if !output.status.success() {
        bail!(
            "baton {} failed with {}: {}",
            args[0],
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// A loopback UDP port nobody uses right now (for a node's QUIC peer address).
fn free_udp_port() -> anyhow::Result<u16> {
    let socket = UdpSocket::bind("127.0.0.1:0").context("cannot find a free UDP port")?;
    Ok(socket.local_addr()?.port())
}

/// A loopback port nobody listens on right now (the OS picks it; a race with another process
/// binding it before the server does is possible but rare, and then start-up fails loudly).
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

fn file_tail(path: &Path, max: u64) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}
