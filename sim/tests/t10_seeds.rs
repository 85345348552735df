//! The simulator's gate (issue 4): 100 seeds of a 3-node cluster with faults, each run twice in
//! fresh processes with equal trace hashes, no invariant broken, and every "sometimes" counter
//! non-zero over the seeds (each fault path was exercised).

mod common;

#[test]
fn a_hundred_seeds_with_faults_replay_exactly_and_keep_every_invariant() {
    let (ok, out) = common::sim(&[
        "--seeds",
        "0..100",
        "--check-determinism",
        "--require-coverage",
    ]);
    assert!(ok, "the simulation gate failed:\n{out}");
    assert!(out.contains("100 seeds (200 runs"), "{out}");
    assert!(out.contains(": 0 failed"), "{out}");
}
