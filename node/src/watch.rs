//! `Watches`: requests on this node that wait for a workflow to change (`POST
//! /api/workflow/execute`, which answers when the workflow it started finishes).
//!
//! A workflow actor publishes its workflow after every committed decision
//! ([`crate::partition::PartitionCtx::publish`]); that also wakes whoever watches the workflow here.
//! A waiter reads the committed record itself after it is woken, so a wake-up carries nothing and
//! a spurious one costs one read. Only the partition's leader publishes, so a waiter on another node
//! asks the leader to wait for it ([`crate::forward::Forward::Wait`]); a waiter re-reads now and then
//! anyway, so a leadership change while it waits costs it at most that pause.
//!
//! Nothing here is stored or replicated: it is an edge of the node, not part of any decision.

use proto::WorkflowId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The workflows someone on this node waits for, with how many wait for each.
#[derive(Default)]
pub struct Watches {
    waiting: Mutex<HashMap<WorkflowId, (Arc<Notify>, usize)>>,
}

impl Watches {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WorkflowId, (Arc<Notify>, usize)>> {
        // A poisoned lock only means a panic elsewhere between two plain map updates.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts watching `id`; the watch ends when the answer is dropped.
    pub fn watch(self: &Arc<Self>, id: &WorkflowId) -> Watch {
        let notify = {
            let mut waiting = self.lock();
            let entry = waiting
                .entry(id.clone())
                .or_insert_with(|| (Arc::new(Notify::new()), 0));
            entry.1 += 1;
            entry.0.clone()
        };
        Watch {
            watches: self.clone(),
            id: id.clone(),
            notify,
        }
    }

    /// `id` changed: wake its watchers (nothing to do when nobody watches it).
    pub fn changed(&self, id: &WorkflowId) {
        if let Some((notify, _)) = self.lock().get(id) {
            notify.notify_waiters();
        }
    }

    /// How many workflows are watched (for tests and status).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is watched.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One waiter's interest in one workflow.
pub struct Watch {
    watches: Arc<Watches>,
    id: WorkflowId,
    notify: Arc<Notify>,
}

impl Watch {
    /// What wakes this watch. Create (and `enable`) the `notified()` future before reading the
    /// record, so a change committed between the read and the wait is not missed.
    pub fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut waiting = self.watches.lock();
        if let Some(entry) = waiting.get_mut(&self.id) {
            entry.1 -= 1;
            if entry.1 == 0 {
                waiting.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn id(n: u128) -> WorkflowId {
        WorkflowId::new(proto::PartitionId(0), n << 16)
    }

    #[tokio::test]
    async fn a_change_wakes_the_watchers_of_that_workflow_only() {
        let watches = Arc::new(Watches::default());
        let (a, b) = (id(1), id(2));
        let watch_a = watches.watch(&a);
        let watch_b = watches.watch(&b);
        let woken_a = watch_a.notify().notified();
        let woken_b = watch_b.notify().notified();
        tokio::pin!(woken_a, woken_b);
        woken_a.as_mut().enable();
        woken_b.as_mut().enable();
        watches.changed(&a);
        tokio::time::timeout(Duration::from_secs(5), woken_a)
            .await
            .expect("the watcher of a is woken");
        assert!(
            futures::FutureExt::now_or_never(woken_b.as_mut()).is_none(),
            "b did not change, so its watcher is not woken"
        );
    }

    #[test]
    fn the_last_watch_dropped_forgets_the_workflow() {
        let watches = Arc::new(Watches::default());
        let a = id(1);
        let first = watches.watch(&a);
        let second = watches.watch(&a);
        assert_eq!(watches.len(), 1);
        drop(first);
        assert_eq!(watches.len(), 1);
        drop(second);
        assert!(watches.is_empty());
        watches.changed(&a);
    }
}
