//! The bench's workers, of either kind: HTTP polling threads or QUIC workers.

use super::quic_workers::QuicWorkers;
use super::workers::Workers;
use std::sync::atomic::Ordering;

/// The bench's workers, of either kind.
pub enum Pool {
    Http(Workers),
    Quic(QuicWorkers),
}

impl Pool {
    /// Stops the workers; answers (tasks completed, failed requests or refused results).
    pub fn stop(self) -> (u64, u64) {
        let counters = match &self {
            Pool::Http(w) => w.counters.clone(),
            Pool::Quic(w) => w.counters.clone(),
        };
        match self {
            Pool::Http(w) => w.stop(),
            Pool::Quic(w) => w.stop(),
        }
        (
            counters.completed.load(Ordering::Relaxed),
            counters.errors.load(Ordering::Relaxed),
        )
    }
}
