//! What this node knows about ready tasks on its peers, so that a poll asks a peer for tasks only
//! when that peer has some its own workers leave waiting.
//!
//! A node's [`TaskQueues`](crate::queue::TaskQueues) hold only the tasks of the partitions it
//! leads; a poll on another node must ask the leader for them. Asking every peer on every wake-up
//! of every waiting poll costs a round trip each, and nearly all of them come back empty (the
//! leader's own workers took the tasks first). Instead, one watcher per peer keeps a single long
//! poll open there ([`Request::Backlog`]) naming the task types this node's polls want; the peer
//! answers when tasks of one of them stayed unclaimed for [`BACKLOG_GRACE_MS`], and the watcher
//! wakes the local polls of those types, which then ask that peer.
//!
//! Per peer and wanted (type, domain) the state is:
//! - unknown (first wanted, or drained since the watcher last asked): polls ask the peer directly,
//!   as they would without hints, so a first poll never misses a task;
//! - watched (the watcher's long poll names it): polls do not ask;
//! - ready (the peer said it has tasks left waiting): polls ask, and an answer short of what
//!   they asked for means drained, which is unknown again and makes the watcher ask anew.

use super::Tasks;
use engine::NowMs;
use proto::peer::{self, Reply, Request, Wanted};
use proto::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How long a peer holds a backlog poll open before answering that nothing is waiting.
pub const BACKLOG_WAIT_MS: u64 = 5_000;
/// Longest wait a peer accepts in a backlog poll.
pub const BACKLOG_WAIT_MS_MAX: u64 = 30_000;
/// How long a ready task must stay unclaimed on the leader before its peers hear of it: the
/// leader's own waiting polls claim it within this when they have credit.
pub const BACKLOG_GRACE_MS: u64 = 3;
/// Most (type, domain) pairs one backlog poll names; polls for more ask peers directly.
pub const WANTED_MAX: usize = 1_024;
/// A want no poll renewed for this long is forgotten.
const WANT_TTL_MS: NowMs = 30_000;
/// How often an idle watcher looks for wants to forget.
const IDLE_RECHECK_MS: u64 = 30_000;
/// How often the set of watchers is matched to the members.
const RECONCILE_MS: u64 = 500;
/// Pause after a failed backlog poll (peer unreachable) before the next.
const RETRY_MS: u64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    Unknown,
    Watched,
    Ready,
}

#[derive(Default)]
struct Peer {
    /// Each wanted (type, domain), when a poll last wanted it, and what is known of it.
    wanted: BTreeMap<Wanted, (NowMs, Hint)>,
    /// Woken when the watcher should ask anew (a new want, or one drained).
    changed: Arc<Notify>,
}

/// The per-peer hint state behind every poll of this node.
#[derive(Default)]
pub(crate) struct Backlogs {
    peers: Mutex<BTreeMap<NodeId, Peer>>,
}

impl Backlogs {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<NodeId, Peer>> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a poll for `want` should ask `peer` now; records that this node polls for it.
    pub(crate) fn worth_asking(&self, peer: NodeId, want: &Wanted, now: NowMs) -> bool {
        let mut peers = self.lock();
        let p = peers.entry(peer).or_default();
        if p.wanted.len() >= WANTED_MAX && !p.wanted.contains_key(want) {
            // Beyond what one backlog poll names: ask as if there were no hints.
            return true;
        }
        let hint = match p.wanted.get_mut(want) {
            Some(entry) => {
                entry.0 = now;
                entry.1
            }
            None => {
                p.wanted.insert(want.clone(), (now, Hint::Unknown));
                p.changed.notify_one();
                Hint::Unknown
            }
        };
        hint != Hint::Watched
    }

    /// A poll asked `peer` for `want` and got less than it asked for: nothing is left waiting there.
    pub(crate) fn drained(&self, peer: NodeId, want: &Wanted) {
        let mut peers = self.lock();
        if let Some(p) = peers.get_mut(&peer) {
            if let Some(entry) = p.wanted.get_mut(want) {
                if entry.1 != Hint::Unknown {
                    entry.1 = Hint::Unknown;
                    p.changed.notify_one();
                }
            }
        }
    }

    /// What `peer`'s watcher asks about now (at most [`WANTED_MAX`]): every want renewed within
    /// the TTL that is not already known ready, each then counted as watched. Forgets stale
    /// wants. Also answers the notifier that says when to ask anew.
    fn to_ask(&self, peer: NodeId, now: NowMs) -> (Vec<Wanted>, Arc<Notify>) {
        let mut peers = self.lock();
        let p = peers.entry(peer).or_default();
        p.wanted
            .retain(|_, (at, _)| now.saturating_sub(*at) <= WANT_TTL_MS);
        let mut ask = Vec::new();
        for (want, (_, hint)) in p.wanted.iter_mut().take(WANTED_MAX) {
            if *hint != Hint::Ready {
                *hint = Hint::Watched;
                ask.push(want.clone());
            }
        }
        (ask, p.changed.clone())
    }

    /// `peer` answered that tasks of `ready` are waiting there.
    fn hinted(&self, peer: NodeId, ready: &[Wanted]) {
        let mut peers = self.lock();
        let p = peers.entry(peer).or_default();
        for want in ready {
            if let Some(entry) = p.wanted.get_mut(want) {
                entry.1 = Hint::Ready;
            }
        }
    }

    /// The watcher's question is no longer open (it failed or is re-asked): what it named is
    /// unknown again, so polls ask directly meanwhile.
    fn unwatch(&self, peer: NodeId) {
        let mut peers = self.lock();
        let p = peers.entry(peer).or_default();
        for (_, hint) in p.wanted.values_mut() {
            if *hint == Hint::Watched {
                *hint = Hint::Unknown;
            }
        }
    }

    fn forget(&self, peer: NodeId) {
        self.lock().remove(&peer);
    }
}

/// Runs until the node shuts down: one watcher per peer.
pub(super) async fn run(inner: Weak<Tasks>) {
    let mut running: BTreeMap<NodeId, JoinHandle<()>> = BTreeMap::new();
    loop {
        tokio::time::sleep(Duration::from_millis(RECONCILE_MS)).await;
        let Some(node) = inner.upgrade() else { break };
        let peers: BTreeSet<NodeId> = node.host.peers().into_iter().collect();
        running.retain(|peer, task| {
            let keep = peers.contains(peer) && !task.is_finished();
            if !keep {
                task.abort();
                node.backlogs.forget(*peer);
            }
            keep
        });
        drop(node);
        for peer in peers {
            running
                .entry(peer)
                .or_insert_with(|| tokio::spawn(watch(inner.clone(), peer)));
        }
    }
    for task in running.values() {
        task.abort();
    }
}

/// Keeps one backlog poll open at `peer` for whatever this node's polls want, and turns its
/// answers into hints.
async fn watch(inner: Weak<Tasks>, peer: NodeId) {
    loop {
        let Some(node) = inner.upgrade() else { return };
        let Some(transport) = node.host.transport.clone() else {
            return;
        };
        let (ask, changed) = node.backlogs.to_ask(peer, node.host.clock.now_ms());
        drop(node);
        let renewed = changed.notified();
        tokio::pin!(renewed);
        renewed.as_mut().enable();
        if ask.is_empty() {
            // Nothing to ask about; look again when a poll wants something (or wants expire).
            tokio::select! {
                _ = &mut renewed => {}
                _ = tokio::time::sleep(Duration::from_millis(IDLE_RECHECK_MS)) => {}
            }
            continue;
        }
        let request = crate::host::encode_request(
            1,
            Request::Backlog {
                wanted: ask,
                wait_ms: BACKLOG_WAIT_MS,
            },
        );
        let within = Duration::from_millis(BACKLOG_WAIT_MS + peer::POLL_PEER_TIMEOUT_MS);
        let answer = tokio::select! {
            answer = transport.call(peer, cluster::Service::Forward, request, within) => answer,
            _ = &mut renewed => {
                if let Some(node) = inner.upgrade() {
                    node.backlogs.unwatch(peer);
                }
                continue;
            }
        };
        let Some(node) = inner.upgrade() else { return };
        node.backlogs.unwatch(peer);
        match answer.map(|bytes| crate::host::decode_reply(&bytes)) {
            Ok(Ok(Reply::Backlog(ready))) => {
                node.backlogs.hinted(peer, &ready);
                for want in &ready {
                    node.queues.notifier(&want.task_type).notify_waiters();
                }
            }
            failed => {
                tracing::debug!(%peer, answer = ?failed, "backlog poll failed");
                drop(node);
                tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
            }
        }
    }
}

impl Tasks {
    /// Answers a peer's backlog poll: which of `wanted` have tasks ready here that stayed
    /// unclaimed for the grace, waiting up to `wait_ms` for one to appear.
    pub(super) async fn backlog(&self, wanted: Vec<Wanted>, wait_ms: u64) -> Vec<Wanted> {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(wait_ms.min(BACKLOG_WAIT_MS_MAX));
        let notifiers: Vec<Arc<Notify>> = wanted
            .iter()
            .map(|w| self.queues.notifier(&w.task_type))
            .collect();
        loop {
            let mut published: Vec<_> = notifiers.iter().map(|n| Box::pin(n.notified())).collect();
            for p in &mut published {
                p.as_mut().enable();
            }
            let now = self.host.clock.now_ms();
            let ready = |now: NowMs| -> Vec<Wanted> {
                wanted
                    .iter()
                    .filter(|w| {
                        self.queues
                            .next_visible(&w.task_type, w.domain.as_deref())
                            .is_some_and(|at| at <= now)
                    })
                    .cloned()
                    .collect()
            };
            if !ready(now).is_empty() {
                // Give this node's own polls the first claim.
                tokio::time::sleep(Duration::from_millis(BACKLOG_GRACE_MS)).await;
                let left = ready(self.host.clock.now_ms());
                if !left.is_empty() {
                    return left;
                }
                continue;
            }
            let now_i = tokio::time::Instant::now();
            if now_i >= deadline {
                return Vec::new();
            }
            let mut until = deadline;
            let next = wanted
                .iter()
                .filter_map(|w| self.queues.next_visible(&w.task_type, w.domain.as_deref()))
                .min();
            if let Some(at) = next {
                let in_ms = u64::try_from(at.saturating_sub(now)).unwrap_or(0);
                until = until.min(now_i + Duration::from_millis(in_ms.max(1)));
            }
            tokio::select! {
                _ = futures::future::select_all(published) => {}
                _ = tokio::time::sleep_until(until) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(t: &str) -> Wanted {
        Wanted {
            task_type: t.into(),
            domain: None,
        }
    }

    const PEER: NodeId = NodeId(2);

    #[test]
    fn a_first_poll_asks_then_the_watcher_takes_over_until_a_hint() {
        let b = Backlogs::default();
        assert!(b.worth_asking(PEER, &want("a"), 10), "unknown: ask");
        let (ask, _) = b.to_ask(PEER, 11);
        assert_eq!(ask, vec![want("a")]);
        assert!(!b.worth_asking(PEER, &want("a"), 12), "watched: do not ask");
        b.unwatch(PEER);
        b.hinted(PEER, &[want("a")]);
        assert!(b.worth_asking(PEER, &want("a"), 13), "ready: ask");
        let (ask, _) = b.to_ask(PEER, 14);
        assert!(ask.is_empty(), "a ready want is not asked about again");
        b.drained(PEER, &want("a"));
        assert!(
            b.worth_asking(PEER, &want("a"), 15),
            "drained: unknown, ask"
        );
        let (ask, _) = b.to_ask(PEER, 16);
        assert_eq!(ask, vec![want("a")], "drained wants are watched again");
    }

    #[tokio::test]
    async fn new_and_drained_wants_wake_the_watcher() {
        let b = Backlogs::default();
        let (_, changed) = b.to_ask(PEER, 0);
        let woken = changed.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        b.worth_asking(PEER, &want("a"), 1);
        tokio::time::timeout(Duration::from_secs(5), &mut woken)
            .await
            .expect("a new want wakes the watcher");
        b.to_ask(PEER, 2);
        b.unwatch(PEER);
        b.hinted(PEER, &[want("a")]);
        let woken = changed.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        b.drained(PEER, &want("a"));
        tokio::time::timeout(Duration::from_secs(5), &mut woken)
            .await
            .expect("a drained want wakes the watcher");
    }

    #[test]
    fn stale_wants_are_forgotten() {
        let b = Backlogs::default();
        b.worth_asking(PEER, &want("a"), 0);
        b.to_ask(PEER, 0);
        let (ask, _) = b.to_ask(PEER, 2 + WANT_TTL_MS + 1);
        assert!(ask.is_empty(), "a want no poll renewed is forgotten");
    }
}
