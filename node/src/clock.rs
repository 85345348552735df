//! Time at the edge. The engine never reads a clock: the runtime reads this one and passes `now` in,
//! so the simulator can substitute its own.

use crate::engine::NowMs;

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> NowMs;
}

/// The operating system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> NowMs {
        #[allow(clippy::disallowed_methods)] // the one place that reads the wall clock
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        NowMs::try_from(d.as_millis()).unwrap_or(NowMs::MAX)
    }
}

/// FNV-1a: a stable 64-bit hash for seeding per-workflow randomness (std's hashers are not
/// guaranteed stable across Rust versions).
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
