//! The outbox: results and heartbeats waiting to be sent or acknowledged. Pure state, driven by
//! the session; the clock and the rng are passed in.
//!
//! An entry stays until a node acknowledges it (committed) or refuses it for good. Every send
//! takes a fresh `seq` (sequence numbers are never reused over the worker's life, so a late answer
//! on an old connection cannot match a new send); a connection lost with entries in flight makes
//! them unsent again, and they go out on the next connection with the same lease. A node's
//! `Unavailable` delays the entry by [`backoff::RESULT_RETRY`]; `Stale` and every other refusal
//! drop it.
//!
//! Heartbeats of one lease coalesce: a heartbeat asked for while another of the same lease is
//! pending shares its answer. So the outbox holds at most one heartbeat per running task, plus
//! the final results; the session bounds those by withholding credit.

use crate::backoff;
use crate::Error;
use proto::model::TaskResult;
use proto::worker::{ErrorCode, Lease, WorkerFrame};
use rand::Rng;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Most `Unavailable` refusals of one entry before it is dropped (several minutes of retries at
/// the backoff's cap). By then the lease has likely timed out; the node retries the task.
pub(crate) const REFUSALS_MAX: u32 = 100;

/// Answers a heartbeat's caller.
pub(crate) type Waiter = oneshot::Sender<Result<(), Error>>;

#[derive(Debug)]
enum Kind {
    /// A handler's result. `slot` is true until the first send, which frees the task's slot.
    Final { slot: bool },
    /// A heartbeat and everyone waiting for its answer.
    Heartbeat { waiters: Vec<Waiter> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Unsent,
    Sent {
        seq: u64,
    },
    /// Refused as `Unavailable`: sent again from this time.
    RetryAt(Instant),
}

#[derive(Debug)]
struct Entry {
    lease: Lease,
    result: TaskResult,
    kind: Kind,
    state: State,
    /// `Unavailable` refusals so far.
    refusals: u32,
}

/// A frame to write now.
#[derive(Debug)]
pub(crate) struct Send {
    pub(crate) frame: WorkerFrame,
    /// The task type whose slot this send frees (the first send of a final result).
    pub(crate) freed: Option<String>,
}

/// What a node's answer did to the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// No entry was sent with this seq (answered already, or a node's mistake).
    Unknown,
    /// Committed: the entry is gone.
    Acked { task_id: String, heartbeat: bool },
    /// Refused for good: the entry is gone.
    Dropped {
        task_id: String,
        code: ErrorCode,
        message: String,
    },
    /// Refused as unavailable: sent again after `delay`.
    Retry { task_id: String, delay: Duration },
}

/// Results and heartbeats not yet acknowledged.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// The next seq to send with; starts at 1.
    next_seq: u64,
    /// The next entry id; ids order entries by arrival, which is the sending order.
    next_id: u64,
    entries: BTreeMap<u64, Entry>,
    /// Entry id of every seq in flight on the current connection.
    sent: BTreeMap<u64, u64>,
    /// Final results among the entries.
    finals: usize,
}

impl Outbox {
    /// A handler's result for `lease`; the task's slot is freed when it is first sent.
    pub(crate) fn push_final(&mut self, lease: Lease, result: TaskResult) {
        self.insert(lease, result, Kind::Final { slot: true });
        self.finals += 1;
    }

    /// A heartbeat for `lease`, answered through `waiter`; joins a pending one of the same lease.
    pub(crate) fn push_heartbeat(&mut self, lease: Lease, result: TaskResult, waiter: Waiter) {
        let pending = self.entries.values_mut().find_map(|e| match &mut e.kind {
            Kind::Heartbeat { waiters } if e.lease == lease => Some(waiters),
            _ => None,
        });
        match pending {
            Some(waiters) => waiters.push(waiter),
            None => self.insert(
                lease,
                result,
                Kind::Heartbeat {
                    waiters: vec![waiter],
                },
            ),
        }
    }

    fn insert(&mut self, lease: Lease, result: TaskResult, kind: Kind) {
        let id = self.next_id;
        self.next_id += 1;
        let entry = Entry {
            lease,
            result,
            kind,
            state: State::Unsent,
            refusals: 0,
        };
        self.entries.insert(id, entry);
    }

    /// The next frame to send at `now`, oldest entry first; marks it in flight.
    pub(crate) fn next_send(&mut self, now: Instant) -> Option<Send> {
        let (&id, entry) = self.entries.iter_mut().find(|(_, e)| match e.state {
            State::Unsent => true,
            State::RetryAt(at) => at <= now,
            State::Sent { .. } => false,
        })?;
        self.next_seq += 1;
        let seq = self.next_seq;
        entry.state = State::Sent { seq };
        self.sent.insert(seq, id);
        let freed = match &mut entry.kind {
            Kind::Final { slot } => std::mem::take(slot).then(|| entry.lease.task_type.clone()),
            Kind::Heartbeat { .. } => None,
        };
        let frame = WorkerFrame::Result {
            seq,
            lease: entry.lease.clone(),
            result: entry.result.clone(),
        };
        Some(Send { frame, freed })
    }

    /// The node committed `seq`.
    pub(crate) fn ack(&mut self, seq: u64) -> Answer {
        let Some(entry) = self.take_sent(seq) else {
            return Answer::Unknown;
        };
        let heartbeat = matches!(entry.kind, Kind::Heartbeat { .. });
        let task_id = entry.lease.task_id.clone();
        answer(entry, Ok(()));
        Answer::Acked { task_id, heartbeat }
    }

    /// The node refused `seq` with `code`.
    pub(crate) fn refuse(
        &mut self,
        seq: u64,
        code: ErrorCode,
        message: &str,
        now: Instant,
        rng: &mut impl Rng,
    ) -> Answer {
        let Some(id) = self.sent.remove(&seq) else {
            return Answer::Unknown;
        };
        let Some(entry) = self.entries.get_mut(&id) else {
            return Answer::Unknown;
        };
        let task_id = entry.lease.task_id.clone();
        if code == ErrorCode::Unavailable && entry.refusals < REFUSALS_MAX {
            let delay = backoff::RESULT_RETRY.delay(entry.refusals, rng);
            entry.refusals += 1;
            entry.state = State::RetryAt(now + delay);
            return Answer::Retry { task_id, delay };
        }
        let entry = self.remove(id).expect("the entry was just found");
        let error = match code {
            ErrorCode::Stale => Error::Stale,
            code => Error::Rejected {
                code,
                message: message.to_owned(),
            },
        };
        answer(entry, Err(error));
        Answer::Dropped {
            task_id,
            code,
            message: message.to_owned(),
        }
    }

    /// The connection is gone: what was in flight is sent again on the next one.
    pub(crate) fn connection_lost(&mut self) {
        for id in std::mem::take(&mut self.sent).into_values() {
            if let Some(e) = self.entries.get_mut(&id) {
                e.state = State::Unsent;
            }
        }
    }

    /// When the earliest delayed entry is due.
    pub(crate) fn next_retry_at(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|e| match e.state {
                State::RetryAt(at) => Some(at),
                _ => None,
            })
            .min()
    }

    /// Entries sent on the current connection and not answered yet.
    pub(crate) fn in_flight(&self) -> usize {
        self.sent.len()
    }

    /// Final results not acknowledged yet.
    pub(crate) fn finals(&self) -> usize {
        self.finals
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Gives up on everything (the shutdown's wait ran out); heartbeat callers learn the worker
    /// stopped. Returns how many final results were abandoned.
    pub(crate) fn abandon(&mut self) -> usize {
        let finals = self.finals;
        for (_, e) in std::mem::take(&mut self.entries) {
            answer(e, Err(Error::Closed));
        }
        self.sent.clear();
        self.finals = 0;
        finals
    }

    fn take_sent(&mut self, seq: u64) -> Option<Entry> {
        let id = self.sent.remove(&seq)?;
        self.remove(id)
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        if matches!(entry.kind, Kind::Final { .. }) {
            self.finals -= 1;
        }
        Some(entry)
    }
}

fn answer(entry: Entry, outcome: Result<(), Error>) {
    if let Kind::Heartbeat { waiters } = entry.kind {
        for w in waiters {
            // A caller that stopped waiting is no error.
            let _ = w.send(outcome.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::model::TaskResultStatus;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn lease(task: &str, poll_count: u32) -> Lease {
        Lease {
            task_id: task.into(),
            task_type: "t".into(),
            poll_count,
        }
    }

    fn result(task: &str, status: TaskResultStatus) -> TaskResult {
        TaskResult {
            task_id: task.into(),
            status,
            ..TaskResult::default()
        }
    }

    /// (seq, task id, freed type) of a send.
    fn sent(s: Option<Send>) -> (u64, String, Option<String>) {
        let s = s.expect("a frame to send");
        match s.frame {
            WorkerFrame::Result { seq, lease, .. } => (seq, lease.task_id, s.freed),
            other => panic!("unexpected frame {other:?}"),
        }
    }

    #[test]
    fn results_are_sent_in_order_and_free_their_slot_once() {
        let now = Instant::now();
        let mut o = Outbox::default();
        o.push_final(lease("a", 1), result("a", TaskResultStatus::Completed));
        o.push_final(lease("b", 1), result("b", TaskResultStatus::Failed));
        assert_eq!(sent(o.next_send(now)), (1, "a".into(), Some("t".into())));
        assert_eq!(sent(o.next_send(now)), (2, "b".into(), Some("t".into())));
        assert!(o.next_send(now).is_none());
        assert_eq!((o.in_flight(), o.finals()), (2, 2));
        assert_eq!(
            o.ack(1),
            Answer::Acked {
                task_id: "a".into(),
                heartbeat: false
            }
        );
        assert_eq!(o.ack(1), Answer::Unknown, "answered once");
        // The connection drops before b's ack: b goes again, same lease, new seq, slot not freed
        // twice.
        o.connection_lost();
        assert_eq!(o.in_flight(), 0);
        assert_eq!(sent(o.next_send(now)), (3, "b".into(), None));
        assert_eq!(o.ack(2), Answer::Unknown, "a late answer to the old send");
        assert!(matches!(o.ack(3), Answer::Acked { .. }));
        assert!(o.is_empty() && o.finals() == 0);
    }

    #[test]
    fn refusals_drop_or_delay() {
        let mut rng = StdRng::seed_from_u64(1);
        let now = Instant::now();
        let mut o = Outbox::default();
        for t in ["stale", "busy", "bad"] {
            o.push_final(lease(t, 1), result(t, TaskResultStatus::Completed));
        }
        let seqs: Vec<u64> = (0..3).map(|_| sent(o.next_send(now)).0).collect();
        assert!(matches!(
            o.refuse(seqs[0], ErrorCode::Stale, "lease ended", now, &mut rng),
            Answer::Dropped {
                code: ErrorCode::Stale,
                ..
            }
        ));
        assert!(matches!(
            o.refuse(seqs[2], ErrorCode::Invalid, "bad", now, &mut rng),
            Answer::Dropped {
                code: ErrorCode::Invalid,
                ..
            }
        ));
        let Answer::Retry { delay, .. } =
            o.refuse(seqs[1], ErrorCode::Unavailable, "no leader", now, &mut rng)
        else {
            panic!("unavailable is retried");
        };
        assert_eq!(o.next_retry_at(), Some(now + delay));
        assert!(o.next_send(now).is_none(), "not before its time");
        assert_eq!(sent(o.next_send(now + delay)), (4, "busy".into(), None));
        // A delayed entry survives a lost connection as unsent.
        o.connection_lost();
        assert_eq!(sent(o.next_send(now)).1, "busy");
        assert_eq!(o.len(), 1);
    }

    #[test]
    fn endless_unavailability_gives_up_after_the_limit() {
        let mut rng = StdRng::seed_from_u64(2);
        let mut now = Instant::now();
        let mut o = Outbox::default();
        o.push_final(lease("a", 1), result("a", TaskResultStatus::Completed));
        for _ in 0..REFUSALS_MAX {
            let seq = sent(o.next_send(now)).0;
            let a = o.refuse(seq, ErrorCode::Unavailable, "", now, &mut rng);
            let Answer::Retry { delay, .. } = a else {
                panic!("retried within the limit: {a:?}");
            };
            assert!(delay <= Duration::from_secs(3));
            now += delay;
        }
        let seq = sent(o.next_send(now)).0;
        assert!(matches!(
            o.refuse(seq, ErrorCode::Unavailable, "", now, &mut rng),
            Answer::Dropped { .. }
        ));
        assert!(o.is_empty());
    }

    #[tokio::test]
    async fn heartbeats_coalesce_per_lease_and_answer_their_callers() {
        let mut rng = StdRng::seed_from_u64(3);
        let now = Instant::now();
        let mut o = Outbox::default();
        let beat = || result("a", TaskResultStatus::InProgress);
        let (tx1, rx1) = oneshot::channel();
        let (tx2, rx2) = oneshot::channel();
        let (tx3, rx3) = oneshot::channel();
        o.push_heartbeat(lease("a", 1), beat(), tx1);
        o.push_heartbeat(lease("a", 1), beat(), tx2);
        o.push_heartbeat(lease("a", 2), beat(), tx3);
        assert_eq!(o.len(), 2, "one heartbeat per lease");
        let (s1, _, freed) = sent(o.next_send(now));
        assert_eq!(freed, None, "a heartbeat frees no slot");
        let (s2, _, _) = sent(o.next_send(now));
        assert!(matches!(
            o.ack(s1),
            Answer::Acked {
                heartbeat: true,
                ..
            }
        ));
        o.refuse(s2, ErrorCode::Stale, "ended", now, &mut rng);
        assert_eq!(rx1.await.expect("answered"), Ok(()));
        assert_eq!(rx2.await.expect("answered"), Ok(()));
        assert_eq!(rx3.await.expect("answered"), Err(Error::Stale));

        let (tx, rx) = oneshot::channel();
        o.push_heartbeat(lease("b", 1), beat(), tx);
        o.push_final(lease("b", 1), result("b", TaskResultStatus::Completed));
        assert_eq!(o.abandon(), 1);
        assert_eq!(rx.await.expect("answered"), Err(Error::Closed));
        assert!(o.is_empty() && o.finals() == 0);
    }
}
