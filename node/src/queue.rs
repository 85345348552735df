//! `TaskQueues`: the tasks workers may poll, per task type, on this node's led partitions, and
//! the tasks IN_PROGRESS there (what a task type's concurrency limit counts).
//!
//! The queue is derived state: after every decision a workflow actor publishes its workflow's
//! [`engine::ready_tasks`](engine::ready_tasks) and
//! [`engine::in_progress_tasks`](engine::in_progress_tasks), which replace whatever the queue held
//! for that workflow. Nothing here is stored; after a restart the partitions publish again from their state.
//! Taking a task out of the queue is only a claim: the poller then asks the workflow actor to lease it,
//! and the lease is the committed decision (a stale claim is refused there). A claim not leased
//! goes back ([`TaskQueues::restore`]) unless its workflow published since.
//!
//! A poll that found nothing *parks* here while it waits ([`TaskQueues::park`]). A workflow actor
//! whose decision makes tasks ready takes parked polls that want them ([`TaskQueues::hand_off`])
//! and leases the tasks to them in the same write, so a task that has a poller waiting costs no
//! Raft round of its own; the actor answers the poll after the commit.

use engine::{NowMs, Ready};
use proto::limits::PARKED_POLLS_MAX;
use proto::model::Task;
use proto::peer::QueueDomain;
use proto::{TaskId, WorkflowId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, Notify};

/// Order within a type: visible first, then higher priority, then older.
type Slot = (NowMs, i32, TaskId);

#[derive(Default)]
struct TypeQueue {
    /// (visible_at, -priority, task) for tasks of this type, domain split out below.
    by_domain: BTreeMap<Option<String>, BTreeSet<Slot>>,
}

/// What a workflow's last publication put here, so the next one can replace it.
#[derive(Default)]
struct Published {
    /// Which publication this is (they are numbered in the node), so a claim can tell whether
    /// its workflow published since.
    generation: u64,
    ready: Vec<(String, Option<String>, Slot)>,
    in_progress: Vec<(String, TaskId)>,
}

#[derive(Default)]
struct State {
    types: BTreeMap<String, TypeQueue>,
    by_workflow: BTreeMap<WorkflowId, Published>,
    owner: BTreeMap<TaskId, WorkflowId>,
    /// Per task type, the tasks IN_PROGRESS with their start times (what a concurrency limit
    /// counts).
    in_progress: BTreeMap<String, BTreeMap<TaskId, NowMs>>,
    /// Per task type, the last tasks a publication showed leaving IN_PROGRESS (so a keeper learns
    /// that a permit's task ran and ended between two of its counts).
    ended: BTreeMap<String, Ended>,
    publications: u64,
}

/// Most ended tasks kept per type (see `State::ended`).
pub const ENDED_KEPT_MAX: usize = 4_096;

/// Tasks that left IN_PROGRESS, the oldest forgotten past [`ENDED_KEPT_MAX`].
#[derive(Default)]
struct Ended {
    order: VecDeque<TaskId>,
    ids: BTreeSet<TaskId>,
}

impl Ended {
    fn push(&mut self, id: TaskId) {
        if !self.ids.insert(id.clone()) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > ENDED_KEPT_MAX {
            if let Some(oldest) = self.order.pop_front() {
                self.ids.remove(&oldest);
            }
        }
    }
}

/// A claimed task: the poller must now lease it from its workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub task_id: TaskId,
    pub workflow_id: WorkflowId,
    /// Where it was queued, to put it back ([`TaskQueues::restore`]).
    queued: Queued,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Queued {
    generation: u64,
    task_type: String,
    domain: Option<String>,
    slot: Slot,
}

#[derive(Default)]
struct Parking {
    next_id: u64,
    /// Per task type, the parked polls with their ids, oldest first.
    by_type: BTreeMap<String, VecDeque<(u64, Handoff)>>,
}

/// A parked poll, as its poller holds it: the answer comes on `answer` once a workflow actor
/// took it ([`TaskQueues::hand_off`]) and its write committed (no tasks if the write failed).
/// Dropping it unparks the poll.
pub struct Parked<'a> {
    queues: &'a TaskQueues,
    task_type: String,
    id: u64,
    pub answer: oneshot::Receiver<Vec<Task>>,
}

impl Parked<'_> {
    /// Takes the poll out of the parking; false when an actor took it first (its answer is
    /// then on its way).
    pub fn unpark(&self) -> bool {
        let mut p = self.queues.parking();
        let Some(waiters) = p.by_type.get_mut(&self.task_type) else {
            return false;
        };
        let Some(at) = waiters.iter().position(|(id, _)| *id == self.id) else {
            return false;
        };
        waiters.remove(at);
        if waiters.is_empty() {
            p.by_type.remove(&self.task_type);
        }
        true
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.unpark();
    }
}

/// A parked poll, and once a workflow actor took it, what that actor owes it: lease it at most
/// `count` tasks, then answer it.
pub struct Handoff {
    pub worker_id: Option<String>,
    pub count: usize,
    /// The domain it polls: it takes only tasks of that domain, and without a domain only tasks
    /// without one (Conductor's poll with `domain` reads that domain's queue alone).
    domain: Option<String>,
    answer: oneshot::Sender<Vec<Task>>,
}

impl Handoff {
    /// Whether a task of `domain` may go to this poll.
    pub fn takes(&self, domain: Option<&str>) -> bool {
        self.domain.as_deref() == domain
    }

    /// Answers the poll: the tasks leased to it (none when the write failed). A poll that went
    /// away meanwhile loses them to their response timeout, as a lost poll response would.
    pub fn answer(self, tasks: Vec<Task>) {
        let _ = self.answer.send(tasks);
    }
}

/// The node's ready-task queues. Cheap to share behind an `Arc`.
#[derive(Default)]
pub struct TaskQueues {
    state: Mutex<State>,
    /// Per task type, woken when tasks of that type are published; pollers then re-check.
    published: Mutex<BTreeMap<String, Arc<Notify>>>,
    parking: Mutex<Parking>,
}

impl TaskQueues {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere mid-update of plain maps; the maps stay usable
        // and the next publication of each workflow repairs its entries.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn parking(&self) -> std::sync::MutexGuard<'_, Parking> {
        self.parking.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks a poll that found nothing: up to `count` tasks of `task_type` for `worker_id`.
    /// `None` when [`PARKED_POLLS_MAX`] polls are parked already.
    pub fn park(
        &self,
        task_type: &str,
        domain: Option<&str>,
        worker_id: Option<String>,
        count: usize,
    ) -> Option<Parked<'_>> {
        let mut p = self.parking();
        if p.by_type.values().map(VecDeque::len).sum::<usize>() >= PARKED_POLLS_MAX {
            return None;
        }
        let (answer, rx) = oneshot::channel();
        p.next_id += 1;
        let id = p.next_id;
        p.by_type
            .entry(task_type.to_owned())
            .or_default()
            .push_back((
                id,
                Handoff {
                    worker_id,
                    count,
                    domain: domain.map(str::to_owned),
                    answer,
                },
            ));
        Some(Parked {
            queues: self,
            task_type: task_type.to_owned(),
            id,
            answer: rx,
        })
    }

    /// Polls parked now.
    pub fn parked(&self) -> usize {
        self.parking().by_type.values().map(VecDeque::len).sum()
    }

    /// Polls parked now, per task type.
    pub fn parked_by_type(&self) -> BTreeMap<String, u64> {
        let p = self.parking();
        p.by_type
            .iter()
            .map(|(t, polls)| (t.clone(), polls.len() as u64))
            .collect()
    }

    /// Takes the oldest parked poll that may lease a ready task of `task_type` and `domain`.
    pub fn hand_off(&self, task_type: &str, domain: Option<&str>) -> Option<Handoff> {
        let mut p = self.parking();
        let waiters = p.by_type.get_mut(task_type)?;
        let at = waiters.iter().position(|(_, w)| w.takes(domain))?;
        let (_, handoff) = waiters.remove(at)?;
        if waiters.is_empty() {
            p.by_type.remove(task_type);
        }
        Some(handoff)
    }

    /// Replaces the ready tasks of `workflow` with `ready`, and its tasks IN_PROGRESS with
    /// `in_progress` (type, id, start time).
    pub fn publish(
        &self,
        workflow: &WorkflowId,
        ready: Vec<Ready>,
        in_progress: Vec<(String, TaskId, NowMs)>,
    ) {
        let mut s = self.lock();
        Self::note_ended(&mut s, workflow, &in_progress);
        Self::remove_locked(&mut s, workflow);
        if ready.is_empty() && in_progress.is_empty() {
            return;
        }
        s.publications += 1;
        let mut mine = Published {
            generation: s.publications,
            ..Published::default()
        };
        let mut types: Vec<String> = Vec::new();
        for r in ready {
            if !types.contains(&r.task_type) {
                types.push(r.task_type.clone());
            }
            let slot = (r.visible_at_ms, -r.priority, r.task_id.clone());
            Self::queue_locked(&mut s, &r.task_type, r.domain.clone(), slot.clone());
            s.owner.insert(r.task_id, workflow.clone());
            mine.ready.push((r.task_type, r.domain, slot));
        }
        for (task_type, id, started) in in_progress {
            let held = s.in_progress.entry(task_type.clone()).or_default();
            held.insert(id.clone(), started);
            mine.in_progress.push((task_type, id));
        }
        s.by_workflow.insert(workflow.clone(), mine);
        drop(s);
        let notifiers = self.published.lock().unwrap_or_else(|e| e.into_inner());
        for t in types {
            if let Some(n) = notifiers.get(&t) {
                n.notify_waiters();
            }
        }
    }

    /// Records the tasks of `workflow`'s last publication that `in_progress` no longer holds.
    fn note_ended(s: &mut State, workflow: &WorkflowId, in_progress: &[(String, TaskId, NowMs)]) {
        let Some(published) = s.by_workflow.get(workflow) else {
            return;
        };
        let gone: Vec<(String, TaskId)> = published
            .in_progress
            .iter()
            .filter(|(_, id)| !in_progress.iter().any(|(_, still, _)| still == id))
            .cloned()
            .collect();
        for (ty, id) in gone {
            s.ended.entry(ty).or_default().push(id);
        }
    }

    fn queue_locked(s: &mut State, task_type: &str, domain: Option<String>, slot: Slot) {
        s.types
            .entry(task_type.to_owned())
            .or_default()
            .by_domain
            .entry(domain)
            .or_default()
            .insert(slot);
    }

    fn remove_locked(s: &mut State, workflow: &WorkflowId) {
        let Some(published) = s.by_workflow.remove(workflow) else {
            return;
        };
        for (ty, id) in published.in_progress {
            if let Some(held) = s.in_progress.get_mut(&ty) {
                held.remove(&id);
                if held.is_empty() {
                    s.in_progress.remove(&ty);
                }
            }
        }
        for (ty, domain, slot) in published.ready {
            s.owner.remove(&slot.2);
            if let Some(q) = s.types.get_mut(&ty) {
                if let Some(set) = q.by_domain.get_mut(&domain) {
                    set.remove(&slot);
                    if set.is_empty() {
                        q.by_domain.remove(&domain);
                    }
                }
                if q.by_domain.is_empty() {
                    s.types.remove(&ty);
                }
            }
        }
    }

    /// Forgets the tasks of every workflow of a partition (its leadership moved elsewhere).
    pub fn forget_partition(&self, partition: proto::PartitionId, partitions: u16) {
        let mut s = self.lock();
        let gone: Vec<WorkflowId> = s
            .by_workflow
            .keys()
            .filter(|w| w.partition(partitions) == partition)
            .cloned()
            .collect();
        for w in gone {
            Self::remove_locked(&mut s, &w);
        }
    }

    /// Claims up to `count` tasks of `task_type` visible at `now`, of exactly the given domain (no
    /// domain: only tasks without one), as Conductor's poll reads only the queue of its domain.
    pub fn claim(
        &self,
        task_type: &str,
        domain: Option<&str>,
        count: usize,
        now: NowMs,
    ) -> Vec<Claim> {
        let mut s = self.lock();
        let mut out = Vec::new();
        let d = domain.map(str::to_owned);
        while out.len() < count {
            let Some(slot) = s
                .types
                .get(task_type)
                .and_then(|q| q.by_domain.get(&d))
                .and_then(|set| set.iter().next().cloned())
            else {
                break;
            };
            if slot.0 > now {
                break;
            }
            let Some(wf) = s.owner.get(&slot.2).cloned() else {
                break;
            };
            // Claimed tasks leave the queue; the workflow's next publication restores any whose
            // lease did not happen.
            let mut generation = 0;
            if let Some(published) = s.by_workflow.get_mut(&wf) {
                published.ready.retain(|e| e.2 != slot);
                generation = published.generation;
            }
            s.owner.remove(&slot.2);
            if let Some(q) = s.types.get_mut(task_type) {
                if let Some(set) = q.by_domain.get_mut(&d) {
                    set.remove(&slot);
                }
            }
            out.push(Claim {
                task_id: slot.2.clone(),
                workflow_id: wf,
                queued: Queued {
                    generation,
                    task_type: task_type.to_owned(),
                    domain: d.clone(),
                    slot,
                },
            });
        }
        out
    }

    /// Puts claimed tasks that were not leased back where they were, unless their workflow
    /// published since (its publication says what is ready now).
    pub fn restore(&self, claims: Vec<Claim>) {
        let mut s = self.lock();
        for c in claims {
            let q = c.queued;
            let current = s
                .by_workflow
                .get_mut(&c.workflow_id)
                .filter(|p| p.generation == q.generation);
            let Some(published) = current else {
                continue;
            };
            published
                .ready
                .push((q.task_type.clone(), q.domain.clone(), q.slot.clone()));
            s.owner.insert(c.task_id, c.workflow_id);
            Self::queue_locked(&mut s, &q.task_type, q.domain, q.slot);
        }
    }

    /// The tasks of `task_type` IN_PROGRESS that `counted` accepts (those of some partitions),
    /// with their start times.
    pub fn in_progress(
        &self,
        task_type: &str,
        counted: impl Fn(&TaskId) -> bool,
    ) -> Vec<(TaskId, NowMs)> {
        let s = self.lock();
        let Some(held) = s.in_progress.get(task_type) else {
            return Vec::new();
        };
        held.iter()
            .filter(|(id, _)| counted(id))
            .map(|(id, at)| (id.clone(), *at))
            .collect()
    }

    /// Which of `asked` (tasks of `task_type`) were seen leaving IN_PROGRESS here.
    pub fn ended(&self, task_type: &str, asked: &[TaskId]) -> Vec<TaskId> {
        let s = self.lock();
        let Some(ended) = s.ended.get(task_type) else {
            return Vec::new();
        };
        asked
            .iter()
            .filter(|id| ended.ids.contains(*id))
            .cloned()
            .collect()
    }

    /// The earliest time a task of this type and exactly this domain becomes visible, if any is
    /// queued.
    pub fn next_visible(&self, task_type: &str, domain: Option<&str>) -> Option<NowMs> {
        let s = self.lock();
        let set = s
            .types
            .get(task_type)?
            .by_domain
            .get(&domain.map(str::to_owned))?;
        set.iter().next().map(|first| first.0)
    }

    /// The notifier of a task type: `notified()` completes at the next publication of that type.
    /// Register (`enable`) the future before checking the queue so that a publication in between is
    /// not missed.
    pub fn notifier(&self, task_type: &str) -> Arc<Notify> {
        let mut notifiers = self.published.lock().unwrap_or_else(|e| e.into_inner());
        notifiers.entry(task_type.to_owned()).or_default().clone()
    }

    /// Queued tasks per type (visible or not).
    pub fn sizes(&self) -> BTreeMap<String, u64> {
        self.sizes_where(&QueueDomain::Every, |_| true)
    }

    /// Queued tasks per type (visible or not) of the domains `domain` covers, counting only the
    /// tasks `counted` accepts (those of some partitions).
    pub fn sizes_where(
        &self,
        domain: &QueueDomain,
        counted: impl Fn(&TaskId) -> bool,
    ) -> BTreeMap<String, u64> {
        let s = self.lock();
        let mut out = BTreeMap::new();
        for (t, q) in &s.types {
            let in_domains = q
                .by_domain
                .iter()
                .filter(|(d, _)| domain.covers(d.as_deref()));
            let n = in_domains
                .flat_map(|(_, set)| set.iter())
                .filter(|slot| counted(&slot.2))
                .count();
            if n > 0 {
                out.insert(t.clone(), n as u64);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::PartitionId;

    fn ready(id: u128, ty: &str, at: NowMs, priority: i32) -> Ready {
        Ready {
            task_id: TaskId::new(PartitionId(0), id << 16),
            task_type: ty.into(),
            domain: None,
            priority,
            visible_at_ms: at,
        }
    }

    #[test]
    fn claims_visible_tasks_in_order_and_publication_replaces() {
        let q = TaskQueues::default();
        let w1 = WorkflowId::new(PartitionId(0), 1 << 16);
        let w2 = WorkflowId::new(PartitionId(0), 2 << 16);
        q.publish(
            &w1,
            vec![ready(1, "a", 10, 0), ready(2, "a", 50, 0)],
            vec![],
        );
        q.publish(&w2, vec![ready(3, "a", 10, 5), ready(4, "b", 0, 0)], vec![]);
        let got = q.claim("a", None, 10, 20);
        assert_eq!(
            got.iter().map(|c| c.task_id.clone()).collect::<Vec<_>>(),
            vec![ready(3, "a", 0, 0).task_id, ready(1, "a", 0, 0).task_id]
        );
        assert_eq!(q.next_visible("a", None), Some(50));
        q.publish(&w1, vec![], vec![]);
        assert_eq!(q.next_visible("a", None), None);
        assert_eq!(q.sizes().get("b"), Some(&1));
    }

    fn in_domain(id: u128, domain: Option<&str>) -> Ready {
        Ready {
            domain: domain.map(str::to_owned),
            ..ready(id, "a", 0, 0)
        }
    }

    #[test]
    fn an_unleased_claim_goes_back_unless_its_workflow_published_since() {
        let q = TaskQueues::default();
        let w = WorkflowId::new(PartitionId(0), 1 << 16);
        q.publish(&w, vec![ready(1, "a", 0, 0), ready(2, "a", 0, 0)], vec![]);
        let claims = q.claim("a", None, 2, 0);
        assert_eq!(q.sizes().get("a"), None);
        q.restore(claims);
        assert_eq!(q.sizes().get("a"), Some(&2), "both back");
        let claims = q.claim("a", None, 1, 0);
        q.publish(&w, vec![ready(2, "a", 0, 0)], vec![]);
        q.restore(claims);
        assert_eq!(q.sizes().get("a"), Some(&1), "the newer publication stands");
    }

    #[test]
    fn tasks_in_progress_are_counted_per_type_and_replaced_by_publication() {
        let q = TaskQueues::default();
        let w = WorkflowId::new(PartitionId(0), 1 << 16);
        let id = ready(1, "a", 0, 0).task_id;
        q.publish(&w, vec![], vec![("a".into(), id.clone(), 42)]);
        assert_eq!(q.in_progress("a", |_| true), vec![(id.clone(), 42)]);
        assert!(q.in_progress("a", |_| false).is_empty());
        assert!(q.in_progress("b", |_| true).is_empty());
        q.publish(&w, vec![], vec![]);
        assert!(q.in_progress("a", |_| true).is_empty());
        let other = ready(2, "a", 0, 0).task_id;
        assert_eq!(
            q.ended("a", &[other, id.clone()]),
            vec![id],
            "it ran and ended"
        );
    }

    #[test]
    fn a_poll_claims_only_tasks_of_its_own_domain() {
        let q = TaskQueues::default();
        let w = WorkflowId::new(PartitionId(0), 1 << 16);
        let ready = vec![
            in_domain(1, None),
            in_domain(2, Some("d")),
            in_domain(3, Some("e")),
        ];
        q.publish(&w, ready, vec![]);
        assert_eq!(q.next_visible("a", Some("x")), None, "nothing in domain x");
        assert!(
            q.claim("a", Some("x"), 10, 0).is_empty(),
            "not the plain task"
        );
        let ids = |claims: Vec<Claim>| claims.into_iter().map(|c| c.task_id).collect::<Vec<_>>();
        assert_eq!(
            ids(q.claim("a", Some("d"), 10, 0)),
            vec![in_domain(2, None).task_id]
        );
        assert_eq!(
            ids(q.claim("a", None, 10, 0)),
            vec![in_domain(1, None).task_id]
        );
        assert_eq!(q.next_visible("a", None), None);
        assert_eq!(q.next_visible("a", Some("e")), Some(0));
        let only = |d: Option<&str>| QueueDomain::Only(d.map(str::to_owned));
        assert_eq!(q.sizes_where(&only(Some("e")), |_| true).get("a"), Some(&1));
        assert!(q.sizes_where(&only(None), |_| true).is_empty());
        assert!(q.sizes_where(&QueueDomain::Every, |_| false).is_empty());
    }

    #[test]
    fn an_actor_takes_the_oldest_parked_poll_that_may_lease_the_task() {
        let q = TaskQueues::default();
        let mut plain = q.park("a", None, Some("w1".into()), 4).expect("room");
        let mut in_d = q.park("a", Some("d"), Some("w2".into()), 1).expect("room");
        let other_type = q.park("b", None, None, 1).expect("room");
        assert_eq!(q.parked(), 3);
        // A task of domain `d` goes only to a poll of that domain.
        let h = q.hand_off("a", Some("d")).expect("the poll of domain d");
        assert_eq!((h.worker_id.as_deref(), h.count), (Some("w2"), 1));
        assert!(!h.takes(None) && h.takes(Some("d")) && !h.takes(Some("e")));
        assert!(q.hand_off("a", Some("d")).is_none(), "taken once");
        // A taken poll cannot unpark: its answer is on the way.
        assert!(!in_d.unpark());
        h.answer(Vec::new());
        assert_eq!(in_d.answer.try_recv().map(|t| t.len()), Ok(0), "answered");
        // A task without a domain goes to the oldest poll of its type without a domain.
        let in_e = q.park("a", Some("e"), Some("w3".into()), 1).expect("room");
        let h = q.hand_off("a", None).expect("the plain poll");
        assert!(
            q.hand_off("a", None).is_none(),
            "a poll of domain e takes no plain task"
        );
        assert!(in_e.unpark());
        assert_eq!(h.worker_id.as_deref(), Some("w1"));
        drop(h);
        assert!(
            plain.answer.try_recv().is_err(),
            "dropped handoff: no tasks"
        );
        // Dropping a parked poll unparks it.
        assert_eq!(q.parked(), 1);
        drop(other_type);
        assert_eq!(q.parked(), 0);
        assert!(q.hand_off("b", None).is_none());
    }
}
