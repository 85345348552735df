//! The system under test: a value that starts, names its HTTP endpoint and processes, and stops.
//!
//! Only one kind exists yet ([`TargetSpec::LocalServer`], one `baton server` child on loopback);
//! a 3-node cluster and QUIC workers are further kinds to add here. A target owns its temporary
//! data directory and kills its processes when dropped, so a failed run leaves nothing behind.

use anyhow::{bail, Context};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
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
    LocalServer { bin: PathBuf, partitions: u16 },
}

impl TargetSpec {
    /// A one-line description for the report (cluster size, replication, partitions).
    pub fn describe(&self) -> String {
        match self {
            TargetSpec::LocalServer { partitions, .. } => {
                format!("1 node (local baton server), RF 1, {partitions} partitions")
            }
        }
    }
}

/// A running target.
pub struct Target {
    url: String,
    /// The processes that make up the target (their CPU and RSS are what the bench reports).
    children: Vec<Child>,
    log: PathBuf,
    /// Holds the data directory alive until the target is dropped.
    _dir: tempfile::TempDir,
}

impl Target {
    /// Starts the target and waits until it answers `GET /health`.
    pub fn start(spec: &TargetSpec) -> anyhow::Result<Self> {
        match spec {
            TargetSpec::LocalServer { bin, partitions } => local_server(bin, *partitions),
        }
    }

    /// The HTTP base URL, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The process ids of the target's processes.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// The last bytes of the target's log.
    pub fn log_tail(&self) -> String {
        file_tail(&self.log, LOG_TAIL_BYTES)
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

fn local_server(bin: &Path, partitions: u16) -> anyhow::Result<Target> {
    if !bin.is_file() {
        bail!(
            "baton binary not found at {}: build it (`cargo build -p baton-node --bin baton`) \
             or pass --baton-bin",
            bin.display()
        );
    }
    let dir = tempfile::Builder::new()
        .prefix("baton-bench-")
        .tempdir()
        .context("cannot create the data directory")?;
    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    let log = dir.path().join("server.log");
    let log_file = File::create(&log).context("cannot create the server log")?;
    let child = Command::new(bin)
        .arg("server")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--http")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--partitions")
        .arg(partitions.to_string())
        .stdin(Stdio::null())
        .stdout(
            log_file
                .try_clone()
                .context("cannot clone the log handle")?,
        )
        .stderr(log_file)
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let mut target = Target {
        url,
        children: vec![child],
        log,
        _dir: dir,
    };
    wait_healthy(&mut target)?;
    Ok(target)
}

/// A loopback port nobody listens on right now (the OS picks it; a race with another process
/// binding it before the server does is possible but rare, and then start-up fails loudly).
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

fn wait_healthy(target: &mut Target) -> anyhow::Result<()> {
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let deadline = Instant::now() + START_DEADLINE;
    let health = format!("{}/health", target.url);
    loop {
        for child in &mut target.children {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "baton exited during start-up with {status}\n--- log ---\n{}",
                    target.log_tail()
                );
            }
        }
        if let Ok(resp) = http.get(&health).send() {
            if resp.status().is_success() {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            bail!(
                "{health} did not answer within {START_DEADLINE:?}\n--- log ---\n{}",
                target.log_tail()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
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
