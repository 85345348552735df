//! Votes are durable (one vote per node per term; Raft §5.2 and Figure 2: currentTerm
//! and votedFor are persisted before answering). A replica's term never goes back, across its
//! crashes and restarts included; a term that went back means a vote was acknowledged but lost, and
//! the node could vote twice in one term. A replica that a running node stops hosting (moved away,
//! its data deleted) is forgotten: hosted again later, it is a new member that starts at term 0.
//!
//! Leaders themselves are identified by openraft's leader id (term, node): openraft 0.9 without the
//! `single-term-leader` feature lets a candidate with a greater (term, node) pair win within the same
//! term, so "one leader per term" is "one leader per leader id" here, which the vote order above
//! guarantees; what leaders commit is checked by `replica_digests`.

use super::GroupSample;
use proto::NodeId;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct Terms {
    /// (group, node) -> the highest term seen on that replica.
    seen: BTreeMap<(String, NodeId), u64>,
}

impl Terms {
    pub fn observe(&mut self, samples: &[GroupSample]) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let sampled: std::collections::BTreeSet<NodeId> = samples.iter().map(|s| s.node).collect();
        self.seen.retain(|(group, node), _| {
            !sampled.contains(node) || samples.iter().any(|s| s.node == *node && &s.group == group)
        });
        for s in samples {
            let key = (s.group.clone(), s.node);
            let before = self.seen.get(&key).copied().unwrap_or(0);
            if s.term < before {
                out.push((
                    "votes are durable",
                    format!(
                        "group {} on node {}: term went back from {before} to {}",
                        s.group, s.node, s.term
                    ),
                ));
            } else {
                self.seen.insert(key, s.term);
            }
        }
        out
    }
}
