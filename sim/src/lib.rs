//! Deterministic simulation of a whole Baton cluster.
//!
//! One seed drives one run: several real Baton nodes (`node::service::open_with`, the same code the
//! `baton` binary runs) on turmoil hosts in one thread, each over a simulated disk ([`disk`]) that
//! loses unflushed writes in a crash, a simulated network ([`net`]) that loses, duplicates,
//! delays, reorders and cuts messages, and a simulated clock ([`host::SimClock`]) that skews and
//! jumps; openraft's randomness and tokio's scheduler are seeded too. A seeded workload
//! ([`workload`]) starts workflows and runs workers that misbehave; a fault injector ([`faults`])
//! crashes, restarts, pauses and cuts nodes during the safety phase; then everything heals and the
//! liveness phase requires every workflow to finish and every replica to converge. Invariants
//! ([`invariants`], one per file) are checked on samples during the run and on the final state.
//! The run's trace hash folds everything observable, so the same seed on the same commit must give
//! the same hash.

pub mod client;
pub mod counters;
pub mod disk;
pub mod dsl_doc;
pub mod faults;
pub mod host;
pub mod invariants;
pub mod mutation;
pub mod net;
pub mod node_metrics;
mod run;
pub mod upgrade;
pub mod workload;

pub use run::{run, Config, Report};

/// The simulated wall clock starts at 2026-01-01T00:00:00Z.
pub const EPOCH_MS: u64 = 1_767_225_600_000;

/// Milliseconds as the model's signed epoch type.
pub(crate) fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
