//! Credit accounting per subscription: how many tasks of each type the worker holds, and how much
//! credit it owes the node it is connected to. Pure state, driven by the session.
//!
//! A task takes a *slot* when it is pushed and frees it when its final result is sent (not when
//! it is acknowledged: concurrency bounds handlers, not reports). A freed slot becomes one credit
//! returned to the node at the next flush. On a new connection the subscription's capacity is
//! the free slots, so the credit a node holds plus the slots taken plus the credit not yet
//! returned always equals the handler's concurrency, across reconnects.

use proto::worker::{Subscription, WorkerFrame};
use std::collections::BTreeMap;

/// One task type's slots.
#[derive(Debug, Clone)]
struct Slots {
    domain: Option<String>,
    /// The handler's concurrency: the most tasks held at once.
    concurrency: u32,
    /// Tasks pushed whose final result is not sent yet (running, or finished and queued).
    /// Never above `concurrency`.
    held: u32,
    /// Slots freed on the current connection whose credit is not sent yet.
    owed: u32,
}

/// Why a pushed task cannot take a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No handler for the type: the worker never subscribed to it.
    Unknown,
    /// Every slot is taken: the node pushed beyond the credit it was given.
    Full,
}

/// Slots of every subscribed task type.
#[derive(Debug, Clone, Default)]
pub(crate) struct Credits {
    types: BTreeMap<String, Slots>,
}

impl Credits {
    /// Slots for each `(task type, domain, concurrency)`.
    pub(crate) fn new(
        subscriptions: impl IntoIterator<Item = (String, Option<String>, u32)>,
    ) -> Self {
        let types = subscriptions
            .into_iter()
            .map(|(task_type, domain, concurrency)| {
                let slots = Slots {
                    domain,
                    concurrency,
                    held: 0,
                    owed: 0,
                };
                (task_type, slots)
            })
            .collect();
        Credits { types }
    }

    /// The subscriptions of a hello on a new connection: capacity is the free slots, or 0 for a
    /// worker that is stopping (it connects only to deliver results). Credit owed to the
    /// previous node is forgotten: the capacity counts those slots already.
    pub(crate) fn hello(&mut self, stopping: bool) -> Vec<Subscription> {
        self.types
            .iter_mut()
            .map(|(task_type, s)| {
                s.owed = 0;
                Subscription {
                    task_type: task_type.clone(),
                    domain: s.domain.clone(),
                    capacity: if stopping { 0 } else { s.concurrency - s.held },
                }
            })
            .collect()
    }

    /// A task of `task_type` was pushed: it takes a slot.
    pub(crate) fn take(&mut self, task_type: &str) -> Result<(), Refusal> {
        let s = self.types.get_mut(task_type).ok_or(Refusal::Unknown)?;
        if s.held >= s.concurrency {
            return Err(Refusal::Full);
        }
        s.held += 1;
        Ok(())
    }

    /// The final result of a `task_type` task was sent: its slot is free and its credit owed.
    pub(crate) fn release(&mut self, task_type: &str) {
        if let Some(s) = self.types.get_mut(task_type) {
            debug_assert!(s.held > 0, "a slot is released once, after it was taken");
            s.held = s.held.saturating_sub(1);
            s.owed += 1;
        }
    }

    /// The credit frames owed now (one per type, batched); clears what they return.
    pub(crate) fn flush(&mut self) -> Vec<WorkerFrame> {
        self.types
            .iter_mut()
            .filter(|(_, s)| s.owed > 0)
            .map(|(task_type, s)| WorkerFrame::Credit {
                task_type: task_type.clone(),
                domain: s.domain.clone(),
                n: std::mem::take(&mut s.owed),
            })
            .collect()
    }

    /// Tasks of all types holding a slot.
    pub(crate) fn held(&self) -> usize {
        self.types.values().map(|s| s.held as usize).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credits() -> Credits {
        Credits::new([
            ("a".to_owned(), None, 3),
            ("b".to_owned(), Some("eu".to_owned()), 1),
        ])
    }

    fn capacities(subs: &[Subscription]) -> Vec<(&str, Option<&str>, u32)> {
        subs.iter()
            .map(|s| (s.task_type.as_str(), s.domain.as_deref(), s.capacity))
            .collect()
    }

    #[test]
    fn slots_bound_pushes_and_return_credit_batched() {
        let mut c = credits();
        assert_eq!(
            capacities(&c.hello(false)),
            [("a", None, 3), ("b", Some("eu"), 1)]
        );
        for _ in 0..3 {
            assert_eq!(c.take("a"), Ok(()));
        }
        assert_eq!(c.take("a"), Err(Refusal::Full));
        assert_eq!(c.take("b"), Ok(()));
        assert_eq!(c.take("b"), Err(Refusal::Full));
        assert_eq!(c.take("zzz"), Err(Refusal::Unknown));
        assert_eq!(c.held(), 4);
        assert!(c.flush().is_empty(), "nothing finished, nothing owed");
        c.release("a");
        c.release("a");
        c.release("b");
        assert_eq!(
            c.flush(),
            [
                WorkerFrame::Credit {
                    task_type: "a".into(),
                    domain: None,
                    n: 2
                },
                WorkerFrame::Credit {
                    task_type: "b".into(),
                    domain: Some("eu".into()),
                    n: 1
                },
            ]
        );
        assert!(c.flush().is_empty(), "credit is returned once");
        assert_eq!(c.held(), 1);
    }

    #[test]
    fn a_new_connection_is_offered_the_free_slots_only() {
        let mut c = credits();
        c.hello(false);
        c.take("a").expect("slot");
        c.take("a").expect("slot");
        // One finished and its result was sent, but the credit frame never left: the connection
        // dropped. The next node gets the free slots as capacity, and nothing stays owed.
        c.release("a");
        assert_eq!(
            capacities(&c.hello(false)),
            [("a", None, 2), ("b", Some("eu"), 1)]
        );
        assert!(c.flush().is_empty());
        // The task still running finishes over the new connection and returns its credit there:
        // node credit 2 + 1 returned = the concurrency.
        c.release("a");
        assert_eq!(
            c.flush(),
            [WorkerFrame::Credit {
                task_type: "a".into(),
                domain: None,
                n: 1
            }]
        );
        assert_eq!(c.held(), 0);
        // A stopping worker subscribes with no capacity.
        assert_eq!(
            capacities(&c.hello(true)),
            [("a", None, 0), ("b", Some("eu"), 0)]
        );
    }

    /// Node credit + slots held + credit owed = concurrency, whatever the interleaving.
    #[test]
    fn credit_is_conserved_across_reconnects() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let concurrency = 5u32;
        let mut c = Credits::new([("t".to_owned(), None, concurrency)]);
        let mut node_credit = c.hello(false)[0].capacity;
        for _ in 0..10_000 {
            match rng.gen_range(0..4) {
                0 if node_credit > 0 => {
                    node_credit -= 1;
                    c.take("t").expect("the node pushes within its credit");
                }
                1 if c.held() > 0 => c.release("t"),
                2 => {
                    for f in c.flush() {
                        if let WorkerFrame::Credit { n, .. } = f {
                            node_credit += n;
                        }
                    }
                }
                3 if rng.gen_bool(0.1) => node_credit = c.hello(false)[0].capacity,
                _ => {}
            }
            let owed = c.types["t"].owed;
            assert_eq!(node_credit + c.held() as u32 + owed, concurrency);
        }
    }
}
