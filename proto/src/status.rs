//! `GroupStatus`: a point-in-time view of one Raft group on one node for the admin API, `batonctl`
//! and peers asking each other (who leads, how far the log and the state machine are).

use crate::NodeId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one group looks like from this node right now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStatus {
    /// Group name (`"meta"`, `"p0"`...).
    pub name: String,
    /// The local node.
    pub node: NodeId,
    /// Raft role of the local node: `Leader`, `Follower`, `Candidate`, `Learner` or `Shutdown`.
    pub role: String,
    /// Current Raft term.
    pub term: u64,
    /// The leader this node knows of, if any.
    pub leader: Option<NodeId>,
    /// Index of the last entry in the local log.
    pub last_log_index: Option<u64>,
    /// Index of the last entry applied to the state machine.
    pub last_applied_index: Option<u64>,
    /// Last index covered by the current snapshot.
    pub snapshot_index: Option<u64>,
    /// Last index purged from the log.
    pub purged_index: Option<u64>,
    /// Voters of the current membership, ascending.
    pub voters: Vec<NodeId>,
    /// Learners of the current membership (replicated to, not voting), ascending.
    pub learners: Vec<NodeId>,
    /// On the leader: the last log index each other member has (`None`: nothing yet). Empty
    /// elsewhere. The leader's `last_log_index` minus this is the member's lag.
    #[serde(default)]
    pub matched: BTreeMap<NodeId, Option<u64>>,
    /// Why the group stopped, if it did (a storage error stops it; it recovers on reopen).
    pub stopped: Option<String>,
}

impl GroupStatus {
    /// On the leader: how many entries `node` is behind this log (0 for the leader itself; `None`
    /// when the leader does not replicate to it).
    pub fn lag(&self, node: NodeId) -> Option<u64> {
        let last = self.last_log_index.unwrap_or(0);
        if node == self.node {
            return Some(0);
        }
        self.matched
            .get(&node)
            .map(|m| last.saturating_sub(m.unwrap_or(0)))
    }
}
