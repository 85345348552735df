//! Work that follows leadership: a service names the tasks that should run on this node now
//! (those of the partitions it leads), and [`follow`] starts the missing ones and stops the rest,
//! so a failover moves them with the partitions.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::task::JoinHandle;

/// How often the tasks running are brought in line with what should run.
const RECONCILE_MS: u64 = 250;

/// A service whose tasks follow leadership.
pub(crate) trait Followers: Send + Sync + Sized + 'static {
    /// What names one task.
    type Key: Ord + Clone + Send + Sync + 'static;

    /// The tasks that should run on this node now.
    fn wanted(self: Arc<Self>) -> impl Future<Output = BTreeSet<Self::Key>> + Send;

    /// Starts the task `key`; it holds the service weakly and ends when the service is gone.
    fn start(service: Weak<Self>, key: &Self::Key) -> JoinHandle<()>;
}

/// Runs until the service is dropped: every [`RECONCILE_MS`], starts the tasks `wanted` names
/// that are not running and stops those it no longer names (or that ended).
pub(crate) async fn follow<S: Followers>(service: Weak<S>) {
    let mut running = Running::<S::Key>(BTreeMap::new());
    let running = &mut running.0;
    loop {
        tokio::time::sleep(Duration::from_millis(RECONCILE_MS)).await;
        let Some(strong) = service.upgrade() else {
            break;
        };
        let wanted = strong.wanted().await;
        running.retain(|key, task| {
            let keep = wanted.contains(key) && !task.is_finished();
            if !keep {
                task.abort();
            }
            keep
        });
        for key in wanted {
            if let std::collections::btree_map::Entry::Vacant(slot) = running.entry(key) {
                let task = S::start(service.clone(), slot.key());
                slot.insert(task);
            }
        }
    }
}

/// The tasks started, stopped when the loop ends or is aborted (at shutdown).
struct Running<K>(BTreeMap<K, JoinHandle<()>>);

impl<K> Drop for Running<K> {
    fn drop(&mut self) {
        for task in self.0.values() {
            task.abort();
        }
    }
}
