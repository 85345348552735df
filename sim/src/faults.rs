//! The fault injector: rates drawn once per seed (so some seeds are calm and some are brutal),
//! then faults injected at seeded moments of the safety phase: node crashes with restarts,
//! pauses longer than a lease, symmetric and one-way cuts, clock skew and jumps, storage write
//! errors (the node stops itself and is restarted, fail-stop); the network's own
//! loss, duplication and long delays are set on [`crate::net::Net`].

use crate::net::NetFaults;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Largest clock skew a node gets, milliseconds (the timers' early-firing bound uses it).
pub const MAX_SKEW_MS: i64 = 1_500;

/// The per-seed fault plan.
#[derive(Debug, Clone)]
pub struct Plan {
    pub net: NetFaults,
    /// Mean gap between two node-level faults, milliseconds (0: none).
    pub fault_gap_ms: u64,
    /// Relative weights of crash, pause, cut, one-way cut, clock fault, storage write error.
    pub weights: [u32; 6],
}

impl Plan {
    /// No faults at all.
    pub fn calm() -> Plan {
        Plan {
            net: NetFaults::calm(),
            fault_gap_ms: 0,
            weights: [0; 6],
        }
    }

    /// Draws a plan from the seed's generator; `election_max_ms` bounds the long delays
    /// (up to twice an election timeout).
    pub fn draw(rng: &mut ChaCha8Rng, election_max_ms: u64) -> Plan {
        let net = NetFaults {
            loss: rng.gen_range(0.0..0.05),
            duplicate: rng.gen_range(0.0..0.05),
            delay_ms: (0, rng.gen_range(1..20)),
            long_delay: rng.gen_range(0.0..0.02),
            long_delay_ms: 2 * election_max_ms,
        };
        Plan {
            net,
            fault_gap_ms: rng.gen_range(1_000..5_000),
            weights: [
                rng.gen_range(1..5),
                rng.gen_range(0..3),
                rng.gen_range(0..3),
                rng.gen_range(0..3),
                rng.gen_range(0..3),
                rng.gen_range(0..2),
            ],
        }
    }
}

/// One node-level fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Crash,
    Pause,
    Cut,
    OneWayCut,
    Clock,
    StorageError,
}

impl Plan {
    /// Picks the next fault by weight.
    pub fn pick(&self, rng: &mut ChaCha8Rng) -> Option<Fault> {
        let total: u32 = self.weights.iter().sum();
        if total == 0 {
            return None;
        }
        let mut roll = rng.gen_range(0..total);
        for (i, w) in self.weights.iter().enumerate() {
            if roll < *w {
                return Some(
                    [
                        Fault::Crash,
                        Fault::Pause,
                        Fault::Cut,
                        Fault::OneWayCut,
                        Fault::Clock,
                        Fault::StorageError,
                    ][i],
                );
            }
            roll -= w;
        }
        None
    }
}
