//! Rolling upgrades in a run: in an upgrade seed the nodes start on a binary that serves cluster
//! version 1 only and are replaced, one at a time during the safety phase, by one that serves
//! versions 1 and 2 (a node restarted on its own disk with the wider range). Once every member
//! serves version 2 the meta leader activates it. The invariant `versions_served` checks that no
//! node ever holds an active version its binary does not serve.

use proto::version::{ClusterVersion, VersionRange};
use proto::NodeId;

/// One seed in this many upgrades its nodes.
pub const UPGRADE_EVERY: u64 = 5;

/// What the nodes serve before their upgrade.
pub const OLD: VersionRange = VersionRange {
    min: ClusterVersion::FIRST,
    max: ClusterVersion::FIRST,
};

/// What they serve after it: one version past the first.
pub const NEW: VersionRange = VersionRange {
    min: ClusterVersion::FIRST,
    max: ClusterVersion(2),
};

/// Whether the run of `seed` upgrades its nodes.
pub fn upgrades(seed: u64) -> bool {
    seed % UPGRADE_EVERY == UPGRADE_EVERY - 1
}

/// The upgrades still to make: when, and which node.
#[derive(Debug, Default)]
pub struct Schedule {
    due: Vec<(u64, NodeId)>,
}

impl Schedule {
    /// Node `i` of `nodes` is upgraded at `(i + 1) / (n + 1)` of the safety phase.
    pub fn spread(nodes: &[NodeId], safety_ms: u64) -> Schedule {
        let n = nodes.len() as u64;
        let due = nodes
            .iter()
            .enumerate()
            .map(|(i, id)| (safety_ms * (i as u64 + 1) / (n + 1), *id))
            .collect();
        Schedule { due }
    }

    /// The first node whose upgrade is due at `now`, if any (it stays due until taken).
    pub fn next_due(&self, now: u64) -> Option<NodeId> {
        self.due
            .iter()
            .find(|(at, _)| *at <= now)
            .map(|(_, id)| *id)
    }

    /// `id` is upgraded.
    pub fn done(&mut self, id: NodeId) {
        self.due.retain(|(_, n)| *n != id);
    }
}
