//! Ids derived from hashes: the same on every build and machine, so that an effect which
//! starts a workflow under one (a failure workflow, a START_WORKFLOW's, a SUB_WORKFLOW's
//! child) starts it once however often it is repeated.

use proto::{PartitionId, WorkflowId};

/// The partition bits of a Baton id (its last four hex digits).
pub(crate) fn partition_of(id: &WorkflowId) -> PartitionId {
    let s = id.as_str();
    let tail = s.get(s.len().saturating_sub(4)..).unwrap_or("0");
    PartitionId(u16::from_str_radix(tail, 16).unwrap_or(0))
}

/// FNV-1a over `bytes` from `seed`: a hash that is the same on every build and machine.
pub(crate) fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(seed, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// An id on `base`'s partition with bits from a hash of `key`: the same on every build and
/// machine, so an effect that starts a workflow under it starts one however often it is repeated.
pub(crate) fn derived_id(base: &WorkflowId, key: &str) -> WorkflowId {
    WorkflowId::new(partition_of(base), derived_bits(key))
}

/// 128 bits from a hash of `key`, the same on every build and machine.
pub(crate) fn derived_bits(key: &str) -> u128 {
    let key = key.as_bytes();
    let hi = fnv1a(0xcbf2_9ce4_8422_2325, key);
    let lo = fnv1a(0x84222325_cbf29ce4, key);
    (u128::from(hi) << 64) | u128::from(lo)
}

/// An id with bits from a hash of `key` on the partition another hash of it picks: spread over
/// the cluster's partitions whatever their number.
pub(crate) fn spread_id(key: &str) -> WorkflowId {
    let spread = fnv1a(0x9e37_79b9_7f4a_7c15, key.as_bytes());
    WorkflowId::new(PartitionId(spread as u16), derived_bits(key))
}
