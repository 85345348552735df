//! What operators ask of a node: its health, the gauges read at each scrape, the quarantine
//! (workflows whose stored record could not be decoded, set aside by their partition's leader in
//! `partition::stored`, listed here and deleted once looked at), and the digests and records the
//! simulator checks replicas with.

use super::workflows::parse_workflow_id;
use super::{Stopping, Tasks, Workflows};
use crate::error::{Error, Result};
use crate::host::{Host, RecoveryState};
use crate::partition::stored;
use crate::partition::Partition;
use proto::record::{PartitionCommand, PartitionOutcome};
use std::sync::Arc;

/// Longest the health check waits for the meta leader to confirm a quorum.
const HEALTH_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Node health.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub healthy: bool,
    pub partitions: usize,
    pub partitions_led: usize,
    /// Partitions whose replica here does not run, with why: led here with actors that could not
    /// start (none of their workflows run), or stopped after their group failed, until they are
    /// reopened. The node is not healthy while any is listed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partitions_stopped: Vec<StoppedPartition>,
    /// The node's shutdown has begun: it takes no new work, so it is not healthy (load balancers
    /// and readiness checks send requests elsewhere).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stopping: bool,
}

/// A partition whose replica here does not run (see [`Health`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoppedPartition {
    pub partition: u16,
    pub reason: String,
    /// For a replica stopped after its group failed: failures in a row, and how long until it
    /// is reopened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failures: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reopen_in_ms: Option<u64>,
}

/// A quarantined workflow as `GET /api/admin/quarantine` lists it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuarantineEntry {
    pub partition: u16,
    pub workflow_id: String,
    pub reason: String,
    /// When it was set aside (epoch ms).
    pub time: i64,
    /// Size of the stored row set aside.
    pub bytes: usize,
}

/// The admin service.
pub struct Admin {
    pub(crate) host: Arc<Host>,
    tasks: Arc<Tasks>,
    workflows: Arc<Workflows>,
    stopping: Stopping,
}

impl Admin {
    pub(crate) fn new(
        host: Arc<Host>,
        tasks: Arc<Tasks>,
        workflows: Arc<Workflows>,
        stopping: Stopping,
    ) -> Self {
        Self {
            host,
            tasks,
            workflows,
            stopping,
        }
    }

    /// Healthy when this node can serve: a quorum of the meta group answers (it is the confirmed
    /// meta leader, or the meta leader confirms its leadership within a second), and every hosted
    /// partition has a leader — a confirmed one where that leader is this node. A node restarted
    /// without a quorum reachable is therefore not healthy, whatever its saved votes say; nor is
    /// a node whose shutdown has begun.
    pub async fn health(&self) -> Health {
        let hosted = self.host.hosted();
        let stopping = self.stopping.begun();
        let led = hosted.iter().filter(|p| p.group.is_leader()).count();
        let partitions_ok = hosted.iter().all(|p| match p.group.leader() {
            Some(n) if n == self.host.node => p.group.is_leader(),
            Some(_) => true,
            None => false,
        });
        let meta_ok = match self.host.meta.leader() {
            _ if stopping => false,
            Some(n) if n == self.host.node => self.host.meta.is_leader(),
            Some(n) => {
                let ask = self.host.forward_within(
                    n,
                    0,
                    proto::peer::Request::MetaReadIndex,
                    HEALTH_PROBE_TIMEOUT,
                );
                matches!(ask.await, Ok(proto::peer::Reply::Index(_)))
            }
            None => false,
        };
        let partitions_stopped = self.stopped_partitions(&hosted);
        Health {
            healthy: !stopping && meta_ok && partitions_ok && partitions_stopped.is_empty(),
            partitions: hosted.len(),
            partitions_led: led,
            partitions_stopped,
            stopping,
        }
    }

    /// The partitions whose replica here does not run (see [`Health::partitions_stopped`]).
    fn stopped_partitions(&self, hosted: &[Arc<Partition>]) -> Vec<StoppedPartition> {
        let actors = hosted.iter().filter_map(|p| {
            p.stopped().map(|reason| StoppedPartition {
                partition: p.id.0,
                reason,
                failures: None,
                reopen_in_ms: None,
            })
        });
        let now = tokio::time::Instant::now();
        let groups = self.host.stopped_replicas().into_iter().map(|(p, r)| {
            let retry_at = match r.state {
                RecoveryState::Stopped { retry_at } => retry_at,
                RecoveryState::Running { .. } => now,
            };
            StoppedPartition {
                partition: p,
                reason: r.reason,
                failures: Some(r.failures),
                reopen_in_ms: Some(retry_at.saturating_duration_since(now).as_millis() as u64),
            }
        });
        let mut all: Vec<_> = actors.chain(groups).collect();
        all.sort_by_key(|s| s.partition);
        all
    }

    /// Every quarantined workflow of the partitions hosted here, by partition and id.
    pub fn quarantine(&self) -> Result<Vec<QuarantineEntry>> {
        let mut out = Vec::new();
        for p in self.host.hosted() {
            for (id, entry) in stored::quarantine_entries(p.state())? {
                out.push(QuarantineEntry {
                    partition: p.id.0,
                    workflow_id: id.to_string(),
                    reason: entry.reason,
                    time: entry.time,
                    bytes: entry.row.len(),
                });
            }
        }
        Ok(out)
    }

    /// Deletes a quarantined workflow's entry (and the row it kept) for good.
    pub async fn drop_quarantined(&self, id: &str) -> Result<()> {
        let id = parse_workflow_id(id)?;
        let partition = self.host.partition_id_of(&id);
        let command = PartitionCommand::DropQuarantined {
            workflow_id: id.clone(),
        };
        match self.host.partition_command(partition, command).await? {
            PartitionOutcome::Applied => Ok(()),
            PartitionOutcome::NotFound => {
                Err(Error::NotFound(format!("workflow {id} is not quarantined")))
            }
            other => Err(Error::Internal(format!(
                "unexpected outcome of a quarantine removal: {other:?}"
            ))),
        }
    }
}

impl Admin {
    /// Sets the gauges (`crate::metrics`, `cluster::metrics`) read when scraped: queues and
    /// parked polls per task type, every Raft group hosted here, and what needs an operator.
    pub fn observe_gauges(&self) {
        let queues = &self.tasks.queues;
        crate::metrics::observe_queues(&queues.sizes(), &queues.parked_by_type());
        for status in self.host.group_statuses() {
            cluster::metrics::observe(&status);
        }
        self.observe_partitions();
    }

    /// Quarantined workflows and stopped partitions, per partition hosted here, read from
    /// storage now.
    fn observe_partitions(&self) {
        for p in self.host.hosted() {
            let label = p.id.0.to_string();
            let quarantined = stored::quarantine_entries(p.state()).map_or(0, |q| q.len());
            metrics::gauge!(crate::metrics::QUARANTINED_WORKFLOWS, "partition" => label.clone())
                .set(quarantined as f64);
            let stopped = if p.stopped().is_some() { 1.0 } else { 0.0 };
            metrics::gauge!(crate::metrics::PARTITION_STOPPED, "partition" => label).set(stopped);
        }
        for (p, _) in self.host.stopped_replicas() {
            metrics::gauge!(crate::metrics::PARTITION_STOPPED, "partition" => p.to_string())
                .set(1.0);
        }
    }
}

impl Admin {
    /// A digest of every hosted group's state with the applied index it was taken at (replicas at
    /// the same index must agree).
    pub fn digests(&self) -> Vec<(String, Option<u64>, u64)> {
        let mut out = Vec::new();
        let hosted = self.host.hosted();
        let groups = std::iter::once(&self.host.meta).chain(hosted.iter().map(|p| &p.group));
        for g in groups {
            if let Ok((applied, digest)) = g.state_digest() {
                out.push((g.name().to_owned(), applied, digest));
            }
        }
        out
    }

    /// Every workflow record in this node's replica of partition `p` (none when it hosts no
    /// replica), read from local state: for the simulator's invariant checks and diagnostics.
    pub fn records(&self, p: u16) -> Vec<proto::record::WorkflowRecord> {
        let Some(partition) = self.host.partition(proto::PartitionId(p)) else {
            return Vec::new();
        };
        stored::records(partition.state()).collect()
    }

    /// The Raft status of every group on this node: the meta group, then the partitions in order.
    pub fn groups(&self) -> Vec<cluster::GroupStatus> {
        self.host.group_statuses()
    }

    /// Storage flushes (fsyncs) this node asked for since it started.
    pub fn storage_flushes(&self) -> u64 {
        self.host.db.flushes()
    }

    /// Workflows requests on this node wait for (execute requests, waits forwarded here).
    pub fn watched_workflows(&self) -> usize {
        self.workflows.watched_workflows()
    }

    /// Polls parked on this node, waiting for tasks.
    pub fn parked_polls(&self) -> usize {
        self.tasks.parked_polls()
    }
}
