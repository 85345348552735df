//! `Watches`: requests on this node that wait for a workflow to change (`POST
//! /api/workflow/execute`, which answers when the workflow it started finishes).
//!
//! A workflow actor publishes its workflow after every committed decision
//! ([`crate::partition::PartitionCtx::publish`]); once a publication brings the workflow where one
//! of its watchers waits for it to get ([`Until`]), the watch keeps that committed record
//! ([`Watch::latest`]) and wakes the watchers, so a waiter answers without reading storage (a
//! finished W2 workflow's chain decoded per answer was 8% of a loaded node's CPU). Only the
//! partition's leader publishes, so a waiter on another node asks the leader to wait for it
//! ([`proto::peer::Request::Wait`]), and a waiter reads the stored record whenever it cannot
//! be sure the watch saw every change (see `service::wait`).
//!
//! Nothing here is stored or replicated: it is an edge of the node, not part of any decision.

use proto::model::Workflow;
use proto::record::WorkflowRecord;
use proto::WorkflowId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Where a wait ends (besides its deadline).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Until {
    /// Task reference names: the wait ends once the workflow holds a task of one of them (scheduled
    /// or later), or once it finishes.
    pub task_refs: Vec<String>,
    /// The wait also ends once a Serverless Workflow instance waits in a `listen` (an A2A task
    /// that asks for input).
    pub listening: bool,
}

impl Until {
    /// Whether `wf` got where the wait ends.
    pub fn reached(&self, wf: &Workflow) -> bool {
        wf.status.is_terminal()
            || self.task_refs.iter().any(|r| wf.task_by_ref(r).is_some())
            || (self.listening && listens(wf))
    }
}

/// Whether `wf` is a running Serverless Workflow instance waiting in a `listen`.
pub fn listens(wf: &Workflow) -> bool {
    wf.status == proto::model::WorkflowStatus::Running
        && wf
            .dsl
            .as_ref()
            .is_some_and(|run| !run.listening().is_empty())
}

/// The watchers of one workflow.
struct Watched {
    notify: Arc<Notify>,
    watchers: usize,
    /// Every task reference some watcher waits for (kept until the last watch ends).
    until: Until,
    /// The newest publication that reached `until` (each watcher checks its own).
    latest: Option<Seen>,
}

/// A publication a watch kept.
#[derive(Debug, Clone)]
pub enum Seen {
    /// The committed record, as published.
    Reached(Arc<WorkflowRecord>),
    /// The workflow was removed.
    Removed,
}

/// The workflows someone on this node waits for.
#[derive(Default)]
pub struct Watches {
    waiting: Mutex<HashMap<WorkflowId, Watched>>,
}

impl Watches {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WorkflowId, Watched>> {
        // A poisoned lock only means a panic elsewhere between two plain map updates.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts watching `id` until it reaches `until`; the watch ends when the answer is dropped.
    pub fn watch(self: &Arc<Self>, id: &WorkflowId, until: &Until) -> Watch {
        let notify = {
            let mut waiting = self.lock();
            let entry = waiting.entry(id.clone()).or_insert_with(|| Watched {
                notify: Arc::new(Notify::new()),
                watchers: 0,
                until: Until::default(),
                latest: None,
            });
            entry.watchers += 1;
            entry.until.listening |= until.listening;
            for r in &until.task_refs {
                if !entry.until.task_refs.contains(r) {
                    entry.until.task_refs.push(r.clone());
                }
            }
            entry.notify.clone()
        };
        Watch {
            watches: self.clone(),
            id: id.clone(),
            notify,
        }
    }

    /// `id` was published as `record` (`None`: removed): if it got where one of its watchers
    /// waits for it to get, keep the record (a copy, only then) and wake them.
    pub fn changed(&self, id: &WorkflowId, record: Option<&WorkflowRecord>) {
        if let Some(w) = self.lock().get_mut(id) {
            match record {
                Some(r) if w.until.reached(&r.workflow) => {
                    w.latest = Some(Seen::Reached(Arc::new(r.clone())));
                    w.notify.notify_waiters();
                }
                Some(_) => {}
                None => {
                    w.latest = Some(Seen::Removed);
                    w.notify.notify_waiters();
                }
            }
        }
    }

    /// How many workflows are watched (for tests and status).
    pub fn len(&self) -> usize {
        self.lock().len()
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

    /// The newest publication since the watch began that reached where some watcher of this
    /// workflow waits (a record: check it against this watch's own [`Until`]), or its removal;
    /// `None` if there was none.
    pub fn latest(&self) -> Option<Seen> {
        self.watches
            .lock()
            .get(&self.id)
            .and_then(|w| w.latest.clone())
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut waiting = self.watches.lock();
        if let Some(entry) = waiting.get_mut(&self.id) {
            entry.watchers -= 1;
            if entry.watchers == 0 {
                waiting.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::testing::{def_of, simple, H};
    use futures::FutureExt;
    use proto::model::WorkflowStatus;
    use serde_json::json;

    fn id(n: u128) -> WorkflowId {
        WorkflowId::new(proto::PartitionId(0), n << 16)
    }

    #[test]
    fn a_wait_ends_when_the_workflow_finishes_or_holds_a_named_task() {
        let mut h = H::start(def_of(vec![simple("t1"), simple("t2")]), json!({}));
        let plain = Until::default();
        let at_t2 = Until {
            task_refs: vec!["approval".into(), "t2".into()],
            ..Until::default()
        };
        assert!(!plain.reached(h.wf()));
        assert!(!at_t2.reached(h.wf()), "t2 is not scheduled yet");
        h.complete("t1", json!({}));
        assert!(
            !plain.reached(h.wf()),
            "a task alone does not end a plain wait"
        );
        assert!(at_t2.reached(h.wf()), "t2 is scheduled now");
        h.complete("t2", json!({}));
        assert_eq!(h.status(), WorkflowStatus::Completed);
        assert!(plain.reached(h.wf()), "a finished workflow ends every wait");
    }

    #[test]
    fn a_publication_wakes_only_the_watchers_it_brings_where_they_wait() {
        let mut h = H::start(def_of(vec![simple("t1"), simple("t2")]), json!({}));
        let watches = Arc::new(Watches::default());
        let (a, b, c) = (id(1), id(2), id(3));
        let (plain, at_t2, removed) = (
            watches.watch(&a, &Until::default()),
            watches.watch(
                &b,
                &Until {
                    task_refs: vec!["t2".into()],
                    ..Until::default()
                },
            ),
            watches.watch(&c, &Until::default()),
        );
        let woken_plain = plain.notify().notified();
        let woken_t2 = at_t2.notify().notified();
        let woken_removed = removed.notify().notified();
        tokio::pin!(woken_plain, woken_t2, woken_removed);
        woken_plain.as_mut().enable();
        woken_t2.as_mut().enable();
        woken_removed.as_mut().enable();

        watches.changed(&a, Some(&h.rec));
        watches.changed(&b, Some(&h.rec));
        assert!(
            woken_plain.as_mut().now_or_never().is_none(),
            "running at t1"
        );
        assert!(
            woken_t2.as_mut().now_or_never().is_none(),
            "t2 not scheduled"
        );

        h.complete("t1", json!({}));
        watches.changed(&a, Some(&h.rec));
        watches.changed(&b, Some(&h.rec));
        assert!(
            woken_plain.as_mut().now_or_never().is_none(),
            "still running"
        );
        assert!(
            woken_t2.as_mut().now_or_never().is_some(),
            "t2 is scheduled"
        );

        h.complete("t2", json!({}));
        watches.changed(&a, Some(&h.rec));
        assert!(woken_plain.as_mut().now_or_never().is_some(), "finished");

        assert!(woken_removed.as_mut().now_or_never().is_none());
        watches.changed(&c, None);
        assert!(
            woken_removed.as_mut().now_or_never().is_some(),
            "a removal ends every wait"
        );
    }

    #[test]
    fn a_watch_keeps_the_newest_publication_that_reached_where_it_waits() {
        let mut h = H::start(def_of(vec![simple("t1"), simple("t2")]), json!({}));
        let watches = Arc::new(Watches::default());
        let a = id(1);
        let at_t2 = watches.watch(
            &a,
            &Until {
                task_refs: vec!["t2".into()],
                ..Until::default()
            },
        );
        watches.changed(&a, Some(&h.rec));
        assert!(at_t2.latest().is_none(), "t2 is not scheduled yet");

        h.complete("t1", json!({}));
        watches.changed(&a, Some(&h.rec));
        let Some(Seen::Reached(r)) = at_t2.latest() else {
            panic!("t2 is scheduled: the record is kept");
        };
        assert_eq!(*r, h.rec);

        h.complete("t2", json!({}));
        watches.changed(&a, Some(&h.rec));
        let Some(Seen::Reached(r)) = at_t2.latest() else {
            panic!("the finished record replaces the earlier one");
        };
        assert_eq!(r.workflow.status, WorkflowStatus::Completed);

        watches.changed(&a, None);
        assert!(matches!(at_t2.latest(), Some(Seen::Removed)));
        drop(at_t2);
        let later = watches.watch(&a, &Until::default());
        assert!(later.latest().is_none(), "a new watch starts empty");
    }

    #[test]
    fn the_last_watch_dropped_forgets_the_workflow() {
        let watches = Arc::new(Watches::default());
        let a = id(1);
        let first = watches.watch(&a, &Until::default());
        let second = watches.watch(&a, &Until::default());
        assert_eq!(watches.len(), 1);
        drop(first);
        assert_eq!(watches.len(), 1);
        drop(second);
        assert_eq!(watches.len(), 0);
        watches.changed(&a, None);
    }
}
