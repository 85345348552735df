//! Exponential backoff with jitter, for reconnecting and for retrying refused results.
//!
//! The delay before attempt `n` (from 0) is drawn uniformly from `[c/2, c]` where
//! `c = min(cap, base·2^n)`: it grows quickly to the cap, and the jitter keeps many workers that
//! lost the same node from reconnecting in lockstep. Pure: the caller passes the rng.

use rand::Rng;
use std::time::Duration;

/// Reconnecting after a lost connection or an unreachable node.
pub(crate) const CONNECT: Backoff = Backoff::new(100, 3_000);
/// Reconnecting after a node refused the worker with `Forbidden` or `Version`: trying again soon
/// cannot help (another node gives the same answer), so wait long and stay quiet.
pub(crate) const REFUSED: Backoff = Backoff::new(10_000, 60_000);
/// Retrying a result a node answered `Unavailable` (no leader for the moment).
pub(crate) const RESULT_RETRY: Backoff = Backoff::new(100, 3_000);

/// An attempt counter with its delay rule.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    base_ms: u64,
    cap_ms: u64,
    /// Attempts made since the last reset.
    attempt: u32,
}

impl Backoff {
    pub(crate) const fn new(base_ms: u64, cap_ms: u64) -> Backoff {
        Backoff {
            base_ms,
            cap_ms,
            attempt: 0,
        }
    }

    /// The delay before the next attempt; counts the attempt.
    pub(crate) fn next_delay(&mut self, rng: &mut impl Rng) -> Duration {
        let delay = self.delay(self.attempt, rng);
        self.attempt = self.attempt.saturating_add(1);
        delay
    }

    /// The delay before attempt `attempt` under this rule, without counting it.
    pub(crate) fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let ceiling = self.ceiling_ms(attempt);
        Duration::from_millis(rng.gen_range(ceiling / 2..=ceiling))
    }

    /// Back to the base delay (after a success).
    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }

    fn ceiling_ms(&self, attempt: u32) -> u64 {
        let factor = 1u64.checked_shl(attempt.min(63)).unwrap_or(u64::MAX);
        self.base_ms.saturating_mul(factor).min(self.cap_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn delays_grow_to_the_cap_and_stay_within_jitter_bounds() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut b = Backoff::new(100, 3_000);
        let ceilings = [100, 200, 400, 800, 1_600, 3_000, 3_000];
        for _ in 0..50 {
            b.reset();
            for c in ceilings {
                let d = b.next_delay(&mut rng).as_millis() as u64;
                assert!((c / 2..=c).contains(&d), "{d} ms outside [{}, {c}]", c / 2);
            }
        }
        // Far attempts neither overflow nor pass the cap.
        for attempt in [31, 32, 63, 64, u32::MAX] {
            let d = b.delay(attempt, &mut rng).as_millis() as u64;
            assert!((1_500..=3_000).contains(&d));
        }
    }

    // The named rules are sane, and a refusal waits longer than any connection failure.
    const _: () = {
        assert!(CONNECT.base_ms > 0 && CONNECT.base_ms <= CONNECT.cap_ms);
        assert!(REFUSED.base_ms > 0 && REFUSED.base_ms <= REFUSED.cap_ms);
        assert!(RESULT_RETRY.base_ms > 0 && RESULT_RETRY.base_ms <= RESULT_RETRY.cap_ms);
        assert!(REFUSED.base_ms / 2 > CONNECT.cap_ms);
    };
}
