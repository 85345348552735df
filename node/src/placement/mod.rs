//! Where partitions live. On a fresh cluster: which nodes hold a partition's replicas and which of
//! them forms (and so first leads) its group — a pure function of the initial member list, so
//! every node computes the same answer without asking anyone. Afterwards, as members join and
//! drain, [`plan`] decides the membership steps that move replicas and leaders.

pub mod plan;

use proto::{NodeId, PartitionId};

/// Replicas per partition when the cluster has enough nodes.
pub const REPLICATION_FACTOR: usize = 3;
/// Voters of the meta group at most; further nodes would be learners.
pub const META_VOTERS_MAX: usize = 5;

/// The voters of `partition`: `min(3, N)` consecutive nodes starting at `partition mod N`, so
/// replicas and first leaders spread evenly. `nodes` must be sorted and non-empty.
pub fn partition_voters(partition: PartitionId, nodes: &[NodeId]) -> Vec<NodeId> {
    let n = nodes.len();
    if n == 0 {
        return Vec::new();
    }
    let rf = REPLICATION_FACTOR.min(n);
    let first = usize::from(partition.0) % n;
    let mut voters: Vec<NodeId> = (0..rf).map(|i| nodes[(first + i) % n]).collect();
    voters.sort();
    voters
}

/// The node that forms `partition`'s group on a fresh cluster: the first of its replica run.
pub fn partition_former(partition: PartitionId, nodes: &[NodeId]) -> Option<NodeId> {
    (!nodes.is_empty()).then(|| nodes[usize::from(partition.0) % nodes.len()])
}

/// The voters of the meta group: the first nodes, up to [`META_VOTERS_MAX`].
pub fn meta_voters(nodes: &[NodeId]) -> Vec<NodeId> {
    nodes.iter().take(META_VOTERS_MAX).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: u64) -> Vec<NodeId> {
        (1..=n).map(NodeId).collect()
    }

    #[test]
    fn replicas_and_formers_spread_over_nodes() {
        let nodes = ids(4);
        assert_eq!(
            partition_voters(PartitionId(0), &nodes),
            vec![NodeId(1), NodeId(2), NodeId(3)]
        );
        assert_eq!(
            partition_voters(PartitionId(3), &nodes),
            vec![NodeId(1), NodeId(2), NodeId(4)]
        );
        let formers: Vec<_> = (0..8)
            .filter_map(|p| partition_former(PartitionId(p), &nodes))
            .collect();
        for n in &nodes {
            assert_eq!(formers.iter().filter(|f| *f == n).count(), 2, "{n}");
        }
    }

    #[test]
    fn small_clusters_replicate_on_every_node() {
        assert_eq!(partition_voters(PartitionId(5), &ids(2)), ids(2));
        assert_eq!(partition_voters(PartitionId(5), &ids(1)), ids(1));
        assert_eq!(meta_voters(&ids(7)).len(), META_VOTERS_MAX);
    }
}
