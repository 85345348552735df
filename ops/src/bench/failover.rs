//! W7: W2's open loop on a cluster while the node leading the most partitions is killed
//! (`SIGKILL`) halfway through. Starts and completion checks go to the other nodes only; the
//! workers move to another node when theirs stops answering. It reports whether anything was lost
//! (an acknowledged start that never completed) and how long the killed leader's partitions took
//! writes again: for each such partition, from the kill to the first acknowledged start, sent
//! after the kill, of a workflow on that partition.

use super::client::Client;
use super::stats;
use super::target::Target;
use super::workloads::{self, Fault, Outcome};
use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::time::Duration;

/// What W7 saw.
pub struct Report {
    pub outcome: Outcome,
    /// The killed node's id (1-based, as `--node-id`).
    pub victim: u16,
    /// The partitions it led when it was killed, each with the milliseconds until writes to it
    /// resumed (`None`: no start on it was acknowledged after the kill).
    pub resumed_ms: Vec<(u16, Option<f64>)>,
    /// CPU of the surviving nodes over the run.
    pub cpu_ms: u64,
    /// RSS of the surviving nodes at the end.
    pub rss_mib: f64,
}

impl Report {
    /// The slowest partition's time to take writes again, if every one did.
    pub fn worst_resume_ms(&self) -> Option<f64> {
        self.resumed_ms
            .iter()
            .map(|(_, ms)| *ms)
            .try_fold(0.0_f64, |acc, ms| ms.map(|ms| acc.max(ms)))
    }

    pub fn note(&self) -> String {
        let per: Vec<String> = self
            .resumed_ms
            .iter()
            .map(|(p, ms)| match ms {
                Some(ms) => format!("p{p} {ms:.0} ms"),
                None => format!("p{p} never"),
            })
            .collect();
        format!(
            "killed node {} (leader of {} partitions) halfway; writes resumed after: {}",
            self.victim,
            self.resumed_ms.len(),
            per.join(", ")
        )
    }
}

/// Runs W7 on `target` (at least 3 nodes, so the killed node's partitions keep a quorum).
pub fn run(
    target: &mut Target,
    partitions: u16,
    rate: f64,
    duration: Duration,
    drain: Duration,
    progress: &dyn Fn(String),
) -> anyhow::Result<Report> {
    let urls = target.urls().to_vec();
    if urls.len() < 3 {
        bail!("W7 needs a cluster of at least 3 nodes");
    }
    let led = leaderships(&Client::new(&urls[0])?)?;
    let (victim, victim_partitions) = led
        .iter()
        .max_by_key(|(node, parts)| (parts.len(), **node))
        .map(|(node, parts)| (*node, parts.clone()))
        .context("no partition has a leader")?;
    let victim_index = usize::from(victim)
        .checked_sub(1)
        .filter(|i| *i < urls.len())
        .with_context(|| format!("node {victim} is not one of the target's nodes"))?;
    let pids: Vec<u32> = target
        .pids()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != victim_index)
        .map(|(_, p)| p)
        .collect();
    progress(format!(
        "W7: node {victim} leads partitions {victim_partitions:?}; it is killed after {} s",
        (duration / 2).as_secs_f64()
    ));
    let cpu_before = stats::cpu_ms(&pids);
    let mut kill = || {
        progress(format!("W7: kill -9 node {victim}"));
        target.kill(victim_index)
    };
    // Starts go to every node, the victim too until it dies (then its starters move on), so
    // its partitions hold workflows in flight when it is killed.
    let outcome = workloads::open_loop(
        &urls,
        workloads::Flow::Conductor(workloads::W2),
        rate,
        duration,
        drain,
        progress,
        Some(Fault {
            at: duration / 2,
            act: &mut kill,
        }),
        // Lost is counted over acknowledged starts, so W7 starts and polls.
        workloads::Completion::StatusPolls,
    )?;
    let cpu_ms = stats::cpu_ms(&pids).saturating_sub(cpu_before);
    let killed_at = outcome.fault_at.context("the kill never happened")?;
    let resumed_ms = victim_partitions
        .iter()
        .map(|&p| {
            let first = outcome
                .starts
                .iter()
                .filter(|s| s.sent >= killed_at && partition_of(&s.id, partitions) == Some(p))
                .map(|s| s.acked)
                .min();
            (
                p,
                first.map(|t| t.saturating_duration_since(killed_at).as_secs_f64() * 1_000.0),
            )
        })
        .collect();
    Ok(Report {
        outcome,
        victim,
        resumed_ms,
        cpu_ms,
        rss_mib: stats::rss_mib(&pids),
    })
}

/// Node id -> the partitions it leads, as `admin` sees it.
fn leaderships(admin: &Client) -> anyhow::Result<BTreeMap<u16, Vec<u16>>> {
    let mut led: BTreeMap<u16, Vec<u16>> = BTreeMap::new();
    for group in admin.groups()? {
        let name = group["name"].as_str().unwrap_or_default();
        let Some(p) = name.strip_prefix('p').and_then(|p| p.parse::<u16>().ok()) else {
            continue;
        };
        if let Some(leader) = group["leader"].as_u64().and_then(|l| u16::try_from(l).ok()) {
            led.entry(leader).or_default().push(p);
        }
    }
    Ok(led)
}

fn partition_of(id: &str, partitions: u16) -> Option<u16> {
    proto::WorkflowId::parse(id)
        .ok()
        .map(|w| w.partition(partitions).0)
}
