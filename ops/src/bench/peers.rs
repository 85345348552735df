//! Peer systems that install on this machine run beside Baton in the same bench run.
//!
//! Each peer is a folder `bench/peers/<name>/` with an executable `run` that installs the system
//! into a cache directory outside the repository, starts it, runs one workload and prints one JSON
//! line (the contract is in `bench/peers/peerbench.py`). This module runs those scripts with the
//! same workload sizes Baton ran and reads their lines back.

use anyhow::{bail, Context};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The peers known to the bench, in the order they run.
pub const KNOWN: [&str; 3] = ["dbos", "celery", "restate"];

/// The folder holding the peers' scripts: next to this crate in the source tree.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("bench")
        .join("peers")
}

/// What one peer reported for one workload.
#[derive(Debug, Clone)]
pub struct PeerResult {
    pub system: String,
    pub version: String,
    pub durability: String,
    pub workers: String,
    pub notes: String,
    pub steps_per_workflow: u64,
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    pub elapsed_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub cpu_ms: u64,
    pub rss_mib: f64,
}

impl PeerResult {
    fn parse(line: &str) -> anyhow::Result<Self> {
        let v: Value = serde_json::from_str(line).context("the peer's result is not JSON")?;
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        let int = |k: &str| v[k].as_u64().unwrap_or(0);
        let float = |k: &str| v[k].as_f64().unwrap_or(0.0);
        if !v["completed"].is_u64() || !v["started"].is_u64() {
            bail!("the peer's result has no started/completed counts: {line}");
        }
        Ok(Self {
            system: text("system"),
            version: text("version"),
            durability: text("durability"),
            workers: text("workers"),
            notes: text("notes"),
            steps_per_workflow: int("steps_per_workflow"),
            started: int("started"),
            completed: int("completed"),
            failed: int("failed"),
            elapsed_s: float("elapsed_s"),
            p50_ms: float("p50_ms"),
            p99_ms: float("p99_ms"),
            p999_ms: float("p999_ms"),
            cpu_ms: int("cpu_ms"),
            rss_mib: float("rss_mib"),
        })
    }

    pub fn steps_per_s(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            (self.completed * self.steps_per_workflow) as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    pub fn lost(&self) -> u64 {
        self.started.saturating_sub(self.completed + self.failed)
    }
}

/// One workload as the peers run it.
pub enum PeerWorkload {
    /// One task per workflow, one at a time.
    W1 { count: u64, warmup: u64 },
    /// Fork of 3 + join, open loop.
    W2 {
        rate: f64,
        secs: u64,
        drain_secs: u64,
        warmup: u64,
    },
}

/// Runs peer `name`'s script for `workload`; its progress goes to our stderr.
pub fn run(dir: &Path, name: &str, workload: &PeerWorkload) -> anyhow::Result<PeerResult> {
    let script = dir.join(name).join("run");
    if !script.is_file() {
        bail!("no peer script at {}", script.display());
    }
    let mut cmd = Command::new(&script);
    match workload {
        PeerWorkload::W1 { count, warmup } => cmd.args([
            "--workload".to_owned(),
            "W1".to_owned(),
            "--count".to_owned(),
            count.to_string(),
            "--warmup".to_owned(),
            warmup.to_string(),
        ]),
        PeerWorkload::W2 {
            rate,
            secs,
            drain_secs,
            warmup,
        } => cmd.args([
            "--workload".to_owned(),
            "W2".to_owned(),
            "--rate".to_owned(),
            rate.to_string(),
            "--secs".to_owned(),
            secs.to_string(),
            "--drain-secs".to_owned(),
            drain_secs.to_string(),
            "--warmup".to_owned(),
            warmup.to_string(),
        ]),
    };
    let output = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !output.status.success() {
        bail!("{} exited with {}", script.display(), output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .with_context(|| format!("{} printed no result", script.display()))?;
    PeerResult::parse(line).with_context(|| format!("reading {}'s result", script.display()))
}
