//! Typed ids. Workflow and task ids are UUID-shaped strings whose last four hex digits carry the
//! partition, so any node routes a request without a lookup (DESIGN §3). The other 112 bits come from
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
