//! Replicas at the same applied index have identical state (Raft §5.3
//! "State Machine Safety"; the determinism of apply: the same log gives the same state). Digests
//! are taken from every replica at each sample and remembered per (group, applied index).

use super::GroupSample;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct Digests {
    /// (group, applied index) -> (digest, node that had it).
    seen: BTreeMap<(String, u64), (u64, proto::NodeId)>,
}

impl Digests {
    pub fn observe(&mut self, samples: &[GroupSample]) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for s in samples {
            let (Some(applied), Some(digest)) = (s.applied, s.digest) else {
                continue;
            };
            let key = (s.group.clone(), applied);
            match self.seen.get(&key) {
                Some((d, node)) if *d != digest => out.push((
                    "equal state at equal applied index",
                    format!(
                        "group {} at index {applied}: node {node} has digest {d:016x}, node {} has {digest:016x}",
                        s.group, s.node
                    ),
                )),
                Some(_) => {}
                None => {
                    self.seen.insert(key, (digest, s.node));
                }
            }
        }
        out
    }
}
