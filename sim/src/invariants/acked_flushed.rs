//! Nothing acknowledged is lost: a replica acknowledges log entries to its leader
//! only once they are flushed, so whatever a leader counted as replicated on a node (`matched`)
//! survives that node's crash, unflushed writes lost included. Jepsen's NATS JetStream 2.12.1
//! report is the field example (acknowledged before fsync, lost on crash).

use super::Durable;
use proto::NodeId;
use std::collections::BTreeMap;

pub fn check(
    node: NodeId,
    matched: &BTreeMap<String, u64>,
    durable: &Durable,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (group, acked) in matched {
        let kept = durable.get(group).copied().unwrap_or(0);
        if kept < *acked {
            out.push((
                "acknowledged entries are durable",
                format!(
                    "node {node} acknowledged {group} up to index {acked} but its disk keeps only up to {kept} after the crash"
                ),
            ));
        }
    }
    out
}
