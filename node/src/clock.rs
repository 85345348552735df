//! Time at the edge. The engine never reads a clock: the runtime reads this one and passes `now` in,
//! so the simulator can substitute its own.

use engine::NowMs;

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

pub use proto::hash::stable_hash;
