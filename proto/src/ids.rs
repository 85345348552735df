//! Typed ids. Workflow and task ids are UUID-shaped strings whose last four hex digits carry the
//! partition, so any node routes a request without a lookup. The other 112 bits come from
//! the caller's seeded randomness, never from the OS, so the engine stays deterministic.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A partition (shard) of workflow state. Partitions are numbered `0..P`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionId(pub u16);

/// A node of the cluster; also its Raft node id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u64);

impl fmt::Display for PartitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// Why a string is not a Baton id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a Baton id (expected a UUID such as 3f2a...-...-0003)")]
pub struct BadId(pub String);

/// Formats 128 bits as a lowercase hyphenated UUID, with the partition in the last 16 bits.
fn format_id(random: u128, partition: PartitionId) -> String {
    let bits = (random & !0xffff_u128) | u128::from(partition.0);
    let h = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Reads the partition out of a UUID-shaped id, checking its shape.
fn parse_partition(s: &str) -> Result<PartitionId, BadId> {
    let bad = || BadId(s.chars().take(80).collect());
    let groups: Vec<&str> = s.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    if groups.len() != 5 || groups.iter().zip(lens).any(|(g, l)| g.len() != l) {
        return Err(bad());
    }
    if !groups
        .iter()
        .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(bad());
    }
    let tail = &groups[4][8..12];
    u16::from_str_radix(tail, 16)
        .map(PartitionId)
        .map_err(|_| bad())
}

macro_rules! uuid_id {
    ($name:ident, $what:literal) => {
        #[doc = concat!("The id of a ", $what, ": a UUID-shaped string carrying its partition.")]
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Makes a new id on `partition` from caller-supplied randomness.
            pub fn new(partition: PartitionId, random: u128) -> Self {
                Self(format_id(random, partition))
            }

            /// Checks the shape of a client-supplied id.
            pub fn parse(s: &str) -> Result<Self, BadId> {
                parse_partition(s)?;
                Ok(Self(s.to_ascii_lowercase()))
            }

            /// The partition that owns this id (modulo the cluster's partition count).
            pub fn partition(&self, partitions: u16) -> PartitionId {
                let p = parse_partition(&self.0).map(|p| p.0).unwrap_or(0);
                PartitionId(p % partitions.max(1))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

uuid_id!(WorkflowId, "workflow instance");
uuid_id!(TaskId, "task (one attempt of a workflow task)");

/// How many characters of a workflow id its tasks' ids begin with: its first 64 bits
/// (`xxxxxxxx-xxxx-xxxx-`).
pub const TASK_OWNER_PREFIX_LEN: usize = 19;

impl TaskId {
    /// A new task of `workflow`: its first 64 bits are the workflow id's, the next 48 are
    /// `random`'s, and the last 16 the workflow's partition bits. The owner of a task is then
    /// found by the prefix it shares with its workflow's id, without an index row.
    pub fn of_workflow(workflow: &WorkflowId, random: u64) -> TaskId {
        let w = workflow.as_str();
        let r = format!("{:012x}", random >> 16);
        match (
            w.get(..TASK_OWNER_PREFIX_LEN),
            w.len().checked_sub(4).and_then(|at| w.get(at..)),
        ) {
            (Some(head), Some(tail)) if w.len() == 36 => {
                TaskId(format!("{head}{}-{}{tail}", &r[..4], &r[4..]))
            }
            // Not UUID-shaped (never made by Baton): random bits on partition 0.
            _ => TaskId::new(PartitionId(0), u128::from(random)),
        }
    }

    /// The beginning this task's id shares with its workflow's id, if it was made by
    /// [`TaskId::of_workflow`].
    pub fn owner_prefix(&self) -> Option<&str> {
        self.0.get(..TASK_OWNER_PREFIX_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_their_partition() {
        let id = WorkflowId::new(PartitionId(5), 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        assert_eq!(id.as_str(), "01234567-89ab-cdef-0123-456789ab0005");
        assert_eq!(id.partition(8), PartitionId(5));
        assert_eq!(WorkflowId::parse(id.as_str()), Ok(id));
    }

    #[test]
    fn a_task_id_begins_with_its_workflows_first_64_bits() {
        let wf = WorkflowId::new(PartitionId(5), 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let task = TaskId::of_workflow(&wf, 0xfedc_ba98_7654_3210);
        assert_eq!(task.as_str(), "01234567-89ab-cdef-fedc-ba9876540005");
        assert_eq!(TaskId::parse(task.as_str()), Ok(task.clone()));
        assert_eq!(task.partition(8), wf.partition(8));
        assert_eq!(
            task.owner_prefix(),
            Some(&wf.as_str()[..TASK_OWNER_PREFIX_LEN])
        );
        assert_ne!(TaskId::of_workflow(&wf, 1 << 16), task);
    }

    #[test]
    fn malformed_ids_are_rejected() {
        for s in [
            "",
            "abc",
            "01234567-89ab-cdef-0123-456789ab000g",
            "0123456789abcdef0123456789abcdef",
        ] {
            assert!(TaskId::parse(s).is_err(), "{s}");
        }
    }
}
