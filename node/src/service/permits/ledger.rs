//! `Ledger`: a task type's permit count on its keeper, a pure function of the counts it is given,
//! the grants it made and the time. No I/O: the keeper (`super`) feeds it counts of the tasks
//! IN_PROGRESS across the cluster and asks it for grants.

use engine::NowMs;
use proto::model::{Rate, TaskLimits};
use proto::TaskId;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How long a permit holds after the ask: a lease decided later is refused by the engine.
pub const PERMIT_VALID_MS: u64 = 1_000;
/// How long after a permit lapses its lease may still become visible in a count (the lease's
/// Raft commit and the publication after it); a permit stops counting only at a count that
/// started this long after it lapsed. A lease whose commit takes longer than this (a leader cut
/// off mid-write) may pass the concurrency limit.
pub const PERMIT_COMMIT_SLACK_MS: u64 = 4_000;
/// Fewest milliseconds between two counts of a type at its concurrency limit.
pub const RECOUNT_INTERVAL_MS: u64 = 200;

/// What a keeper knows of one task type while it keeps it.
#[derive(Debug, Clone)]
pub struct Ledger {
    /// The keeper's spell of leadership this ledger belongs to; a new spell starts a new ledger.
    pub epoch: u64,
    /// Nothing is granted before: a keeper that follows another waits until the permits the
    /// other may have granted have lapsed and their leases are visible to a count.
    opens_at: NowMs,
    /// Granted permits not yet seen IN_PROGRESS by a count, with the time from which a count
    /// that misses them lets them go.
    pending: BTreeMap<TaskId, NowMs>,
    /// The tasks IN_PROGRESS at the last count.
    running: BTreeSet<TaskId>,
    /// When the last count started; `None` before the first.
    counted_at: Option<NowMs>,
    /// The start times within the rate window, oldest first.
    starts: VecDeque<NowMs>,
}

/// A ledger's answer to an ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub granted: Vec<TaskId>,
    /// When some were refused: how long until asking again may be worth it.
    pub retry_in_ms: u64,
}

impl Ledger {
    /// A ledger for a keeper that starts keeping now; `follows` when another keeper may have
    /// granted permits before it (in a cluster, any leadership change).
    pub fn new(epoch: u64, now: NowMs, follows: bool) -> Self {
        let wait = if follows {
            PERMIT_VALID_MS + PERMIT_COMMIT_SLACK_MS
        } else {
            0
        };
        Self {
            epoch,
            opens_at: now + i64::try_from(wait).unwrap_or(0),
            pending: BTreeMap::new(),
            running: BTreeSet::new(),
            counted_at: None,
            starts: VecDeque::new(),
        }
    }

    /// Whether the keeper must count the tasks IN_PROGRESS before granting: always before the
    /// first grant (a rate counts the starts in its window from them too), and at the
    /// concurrency limit once the last count is [`RECOUNT_INTERVAL_MS`] old.
    pub fn needs_count(&self, limits: &TaskLimits, now: NowMs) -> bool {
        if now < self.opens_at {
            return false;
        }
        // A count from before the opening may miss leases an earlier keeper's permits made.
        let Some(at) = self.counted_at.filter(|at| *at >= self.opens_at) else {
            return true;
        };
        let at_limit = limits
            .concurrent
            .is_some_and(|limit| self.held().len() >= limit as usize);
        at_limit && now - at >= RECOUNT_INTERVAL_MS as i64
    }

    /// The tasks granted a permit that no count showed yet.
    pub fn pending(&self) -> Vec<TaskId> {
        self.pending.keys().cloned().collect()
    }

    /// Takes a count that started at `started`: the tasks IN_PROGRESS with their start times,
    /// and those of [`Ledger::pending`] seen ending. Permits it shows leased or ended, and those
    /// that lapsed long enough before it, stop pending.
    pub fn counted(&mut self, running: Vec<(TaskId, NowMs)>, ended: &[TaskId], started: NowMs) {
        if self.counted_at.is_none() {
            let mut starts: Vec<NowMs> = running.iter().map(|(_, at)| *at).collect();
            starts.sort_unstable();
            self.starts = starts.into();
        }
        self.running = running.into_iter().map(|(id, _)| id).collect();
        let running = &self.running;
        self.pending.retain(|id, gone_at| {
            !running.contains(id) && !ended.contains(id) && *gone_at > started
        });
        self.counted_at = Some(started);
        tracing::debug!(
            running = self.running.len(),
            pending = self.pending.len(),
            "permits counted"
        );
    }

    /// Grants what `limits` allow of `asked`, in order, at `now`.
    pub fn grant(&mut self, limits: &TaskLimits, asked: &[TaskId], now: NowMs) -> Grant {
        if now < self.opens_at {
            return Grant {
                granted: Vec::new(),
                retry_in_ms: u64::try_from(self.opens_at - now).unwrap_or(0),
            };
        }
        if let Some(rate) = &limits.rate {
            self.forget_starts_before(rate, now);
        }
        let mut held = self.held();
        let mut granted = Vec::new();
        let mut retry_in_ms = 0;
        for id in asked {
            if let Some(wait) = self.refusal(limits, &held, id, now) {
                retry_in_ms = wait;
                break;
            }
            // A task counted IN_PROGRESS already is counted until a count shows it ended; a
            // rate alone counts starts, not tasks held.
            if limits.concurrent.is_some() && !self.running.contains(id) {
                let lapses = now + (PERMIT_VALID_MS + PERMIT_COMMIT_SLACK_MS) as i64;
                self.pending.insert(id.clone(), lapses);
            }
            self.starts.push_back(now);
            held.insert(id.clone());
            granted.push(id.clone());
        }
        Grant {
            granted,
            retry_in_ms,
        }
    }

    /// Why `id` may not start now, as the wait before asking again; `None` when it may. A task
    /// already counted IN_PROGRESS (handed out again after its `callbackAfterSeconds`) holds its
    /// place under the concurrency limit.
    fn refusal(
        &self,
        limits: &TaskLimits,
        held: &BTreeSet<TaskId>,
        id: &TaskId,
        now: NowMs,
    ) -> Option<u64> {
        let full = limits
            .concurrent
            .is_some_and(|limit| held.len() >= limit as usize && !held.contains(id));
        if full {
            return Some(RECOUNT_INTERVAL_MS);
        }
        let rate = limits.rate.as_ref()?;
        if self.starts.len() < rate.count as usize {
            return None;
        }
        let oldest = self.starts.front().copied().unwrap_or(now);
        Some(
            u64::try_from(oldest + rate.window_ms as i64 - now)
                .unwrap_or(0)
                .max(1),
        )
    }

    fn forget_starts_before(&mut self, rate: &Rate, now: NowMs) {
        while self
            .starts
            .front()
            .is_some_and(|at| *at + rate.window_ms as i64 <= now)
        {
            self.starts.pop_front();
        }
    }

    /// The tasks counted against the concurrency limit: IN_PROGRESS at the last count, or
    /// granted a permit since.
    fn held(&self) -> BTreeSet<TaskId> {
        self.running
            .iter()
            .chain(self.pending.keys())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::PartitionId;

    fn id(n: u128) -> TaskId {
        TaskId::new(PartitionId(0), n << 16)
    }

    fn concurrent(n: u32) -> TaskLimits {
        TaskLimits {
            concurrent: Some(n),
            rate: None,
        }
    }

    fn rate(count: u32, window_ms: u64) -> TaskLimits {
        TaskLimits {
            concurrent: None,
            rate: Some(Rate { count, window_ms }),
        }
    }

    fn counted(mut l: Ledger, running: &[(u128, NowMs)], at: NowMs) -> Ledger {
        l.counted(running.iter().map(|(n, t)| (id(*n), *t)).collect(), &[], at);
        l
    }

    #[test]
    fn a_concurrency_limit_holds_until_a_count_shows_a_task_ended() {
        let limits = concurrent(1);
        let mut l = counted(Ledger::new(1, 0, false), &[], 0);
        assert!(!l.needs_count(&limits, 0));
        let g = l.grant(&limits, &[id(1), id(2)], 0);
        assert_eq!(g.granted, vec![id(1)]);
        assert_eq!(g.retry_in_ms, RECOUNT_INTERVAL_MS);
        // Task 1 is leased: a count sees it; task 2 still waits.
        assert!(!l.needs_count(&limits, 100), "counted 100 ms ago");
        assert!(l.needs_count(&limits, 200));
        l = counted(l, &[(1, 0)], 200);
        assert!(l.grant(&limits, &[id(2)], 200).granted.is_empty());
        // Task 1 handed out again (after its callback) keeps its own place.
        assert_eq!(l.grant(&limits, &[id(1)], 200).granted, vec![id(1)]);
        // Task 1 ended: the next count frees its place.
        l = counted(l, &[], 400);
        assert_eq!(l.grant(&limits, &[id(2)], 400).granted, vec![id(2)]);
    }

    #[test]
    fn a_permit_whose_lease_is_not_seen_counts_until_it_lapsed_long_enough() {
        let limits = concurrent(1);
        let mut l = counted(Ledger::new(1, 0, false), &[], 0);
        assert_eq!(l.grant(&limits, &[id(1)], 0).granted, vec![id(1)]);
        // A count that does not show task 1 yet (its lease is committing) keeps its permit.
        l = counted(l, &[], 3_000);
        assert!(l.grant(&limits, &[id(2)], 3_000).granted.is_empty());
        // A count started once the permit lapsed and the commit slack passed lets it go.
        let gone = (PERMIT_VALID_MS + PERMIT_COMMIT_SLACK_MS) as i64 + 1;
        l = counted(l, &[], gone);
        assert_eq!(l.grant(&limits, &[id(2)], gone).granted, vec![id(2)]);
    }

    #[test]
    fn a_permit_whose_task_ran_and_ended_between_counts_is_let_go() {
        let limits = concurrent(1);
        let mut l = counted(Ledger::new(1, 0, false), &[], 0);
        assert_eq!(l.grant(&limits, &[id(1)], 0).granted, vec![id(1)]);
        assert_eq!(l.pending(), vec![id(1)]);
        l.counted(Vec::new(), &[id(1)], 300);
        assert_eq!(l.grant(&limits, &[id(2)], 300).granted, vec![id(2)]);
    }

    #[test]
    fn a_rate_counts_starts_in_its_window_and_says_when_the_next_fits() {
        let limits = rate(2, 1_000);
        let mut l = counted(Ledger::new(1, 0, false), &[], 0);
        assert_eq!(l.grant(&limits, &[id(1)], 0).granted, vec![id(1)]);
        let g = l.grant(&limits, &[id(2), id(3)], 300);
        assert_eq!((g.granted, g.retry_in_ms), (vec![id(2)], 700));
        assert!(l.grant(&limits, &[id(3)], 999).granted.is_empty());
        assert_eq!(l.grant(&limits, &[id(3)], 1_000).granted, vec![id(3)]);
    }

    #[test]
    fn a_new_keeper_takes_the_window_from_the_tasks_in_progress() {
        let limits = rate(1, 5_000);
        let mut l = counted(Ledger::new(1, 10_000, false), &[(7, 9_000)], 10_000);
        let g = l.grant(&limits, &[id(1)], 10_000);
        assert_eq!((g.granted.len(), g.retry_in_ms), (0, 4_000));
        assert_eq!(l.grant(&limits, &[id(1)], 14_000).granted, vec![id(1)]);
    }

    #[test]
    fn a_keeper_that_follows_another_waits_for_its_permits_to_lapse_then_counts() {
        let limits = concurrent(1);
        let mut l = Ledger::new(2, 0, true);
        let wait = PERMIT_VALID_MS + PERMIT_COMMIT_SLACK_MS;
        assert!(!l.needs_count(&limits, 0), "nothing to count while closed");
        let g = l.grant(&limits, &[id(1)], 0);
        assert_eq!((g.granted.len(), g.retry_in_ms), (0, wait));
        let open = wait as i64;
        assert!(l.needs_count(&limits, open), "a count from the opening on");
        // The earlier keeper's permit made task 9 IN_PROGRESS: the count shows it.
        l = counted(l, &[(9, 1_000)], open);
        assert!(l.grant(&limits, &[id(1)], open).granted.is_empty());
    }
}
