//! A Serverless Workflow instance's lifecycle CloudEvents on their way to the operator's sink
//! (`baton server --dsl-lifecycle-sink`): the decider appends the events each decision caused
//! (`engine::dsl::lifecycle`), the leader publishes them in order after the commit and at
//! recovery, and its report removes them. They live in the record, so a leader that dies
//! before publishing leaves them to the next one: at least once, each under a stable id.

use crate::limits::DSL_LIFECYCLE_PENDING_MAX;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The events an instance owes its sink.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleOutbox {
    /// The sequence number the next event takes.
    pub next_seq: u64,
    /// The events not reported published, oldest first, at most [`DSL_LIFECYCLE_PENDING_MAX`].
    pub pending: Vec<LifecycleEvent>,
    /// Events dropped unpublished because `pending` was full.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

/// One lifecycle CloudEvent and its place in its instance's sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifecycleEvent {
    pub seq: u64,
    /// The CloudEvent (structured JSON), its `id` naming the instance and `seq`.
    pub event: Value,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LifecycleOutbox {
    /// Appends `event` under the next sequence number (its CloudEvent `id` is
    /// `{instance}:{seq}`), dropping the oldest pending one when full.
    pub fn push(&mut self, instance: &str, mut event: Value) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(map) = event.as_object_mut() {
            map.insert("id".into(), format!("{instance}:{seq}").into());
        }
        self.pending.push(LifecycleEvent { seq, event });
        if self.pending.len() > DSL_LIFECYCLE_PENDING_MAX {
            self.pending.remove(0);
            self.dropped += 1;
        }
    }

    /// Removes the events before `upto` (reported published); whether any went.
    pub fn published(&mut self, upto: u64) -> bool {
        let before = self.pending.len();
        self.pending.retain(|e| e.seq >= upto);
        self.pending.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_take_ids_in_order_and_the_oldest_go_when_full() {
        let mut outbox = LifecycleOutbox::default();
        for _ in 0..DSL_LIFECYCLE_PENDING_MAX + 2 {
            outbox.push("w1", json!({"type": "t"}));
        }
        assert_eq!(outbox.pending.len(), DSL_LIFECYCLE_PENDING_MAX);
        assert_eq!(outbox.dropped, 2);
        assert_eq!(outbox.pending[0].seq, 2);
        assert_eq!(outbox.pending[0].event["id"], "w1:2");
        assert!(outbox.published(10));
        assert_eq!(outbox.pending[0].seq, 10);
        assert!(!outbox.published(10), "nothing more before 10");
    }
}
