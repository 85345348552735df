//! The quarantine seen from the API: workflows whose stored record could not be decoded, set
//! aside by their partition's leader (`partition::stored`), listed for operators and deleted
//! once looked at. Listing reads the replicas hosted here; deleting goes to the leader.

use super::workflows::parse_workflow_id;
use super::Inner;
use crate::error::{Error, Result};
use crate::partition::stored;
use crate::service::QuarantineEntry;
use proto::record::{PartitionCommand, PartitionOutcome};

impl Inner {
    /// Every quarantined workflow of the partitions hosted here, by partition and id.
    pub fn quarantine(&self) -> Result<Vec<QuarantineEntry>> {
        let mut out = Vec::new();
        for p in self.hosted() {
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
        let partition = self.partition_id_of(&id);
        let command = PartitionCommand::DropQuarantined {
            workflow_id: id.clone(),
        };
        match self.partition_command(partition, command).await? {
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

impl Inner {
    /// Sets the gauges (`crate::metrics`, `cluster::metrics`) read when scraped: queues and
    /// parked polls per task type, every Raft group hosted here, and what needs an operator.
    pub fn observe_gauges(&self) {
        crate::metrics::observe_queues(&self.queues.sizes(), &self.queues.parked_by_type());
        for status in self.group_statuses() {
            cluster::metrics::observe(&status);
        }
        self.observe_partitions();
    }

    /// Quarantined workflows and stopped partitions, per partition hosted here, read from
    /// storage now.
    fn observe_partitions(&self) {
        for p in self.hosted() {
            let label = p.id.0.to_string();
            let quarantined = stored::quarantine_entries(p.state()).map_or(0, |q| q.len());
            metrics::gauge!(crate::metrics::QUARANTINED_WORKFLOWS, "partition" => label.clone())
                .set(quarantined as f64);
            let stopped = if p.stopped().is_some() { 1.0 } else { 0.0 };
            metrics::gauge!(crate::metrics::PARTITION_STOPPED, "partition" => label).set(stopped);
        }
    }
}
