//! The proposals of one spell of leadership. A node can lose a partition and lead it again while
//! an actor of the first spell is still running; a write it proposes then would commit in the new
//! term after the new spell recovered its workflows from state, and nothing would publish it (its
//! tasks unqueued, its timers unarmed). The fence closes when a spell ends, refusing later
//! proposals, and the next spell drains it before recovering, so that whatever the old spell had in
//! flight is in the state it recovers from.

use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{RwLock, RwLockReadGuard};

pub struct Fence {
    /// Each proposal in flight holds a read guard.
    in_flight: RwLock<()>,
    open: AtomicBool,
}

impl Default for Fence {
    fn default() -> Self {
        Self {
            in_flight: RwLock::new(()),
            open: AtomicBool::new(true),
        }
    }
}

impl Fence {
    /// A pass for one proposal, held until it returns; `None` once the spell has ended.
    pub async fn enter(&self) -> Option<RwLockReadGuard<'_, ()>> {
        let pass = self.in_flight.read().await;
        self.open.load(Ordering::Acquire).then_some(pass)
    }

    /// Whether the spell goes on (no proposal was refused yet).
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Ends the spell: no proposal enters any more.
    pub fn close(&self) {
        self.open.store(false, Ordering::Release);
    }

    /// Waits until every proposal that entered has returned; answers whether any was still in
    /// flight. Proposals of a deposed leader fail promptly; one made after the node led again
    /// commits and returns.
    pub async fn drain(&self) -> bool {
        if self.in_flight.try_write().is_ok() {
            return false;
        }
        let _all = self.in_flight.write().await;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[tokio::test]
    async fn a_closed_fence_lets_no_proposal_in() {
        let fence = Fence::default();
        assert!(fence.enter().await.is_some());
        fence.close();
        assert!(fence.enter().await.is_none());
    }

    #[tokio::test]
    async fn drain_waits_for_the_proposals_in_flight() {
        let fence = Fence::default();
        let pass = fence.enter().await.expect("open");
        fence.close();
        let mut drained = Box::pin(fence.drain());
        assert!(
            (&mut drained).now_or_never().is_none(),
            "a proposal is in flight"
        );
        drop(pass);
        drained.await;
        assert!(fence.enter().await.is_none());
    }
}
