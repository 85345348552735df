//! The simulator's gate: 100 seeds of a 3-node cluster with faults, each run twice in
//! fresh processes with equal trace hashes, no invariant broken, and every "sometimes" counter
//! non-zero over the seeds (each fault path was exercised); and a few seeds of a 5-node shape
//! with more partitions and workflows, where other interleavings happen (more replicas per
//! leader, more workflows per partition); and 40 seeds whose busiest task type has a
//! concurrency limit. The nightly-sized sweep over more shapes is `sim/sweep`.

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

/// This shape found EVENT tasks stuck SCHEDULED before any seed of the default
/// shape did (sim/tests/t30_regressions.rs); these 25 seeds take one to three minutes on 2 cores.
#[test]
fn five_nodes_six_partitions_keep_every_invariant() {
    let (ok, out) = common::sim(&[
        "--seeds",
        "0..25",
        "--nodes",
        "5",
        "--partitions",
        "6",
        "--workflows",
        "150",
    ]);
    assert!(ok, "the 5-node simulation gate failed:\n{out}");
    assert!(out.contains("25 seeds (25 runs"), "{out}");
    assert!(out.contains(": 0 failed"), "{out}");
}

/// A task type with `concurrentExecLimit` 2 (the workload's `sim_work`, run by three workers):
/// no sample of the leaders' records shows more than two IN_PROGRESS, and every workflow still
/// finishes once the faults heal.
#[test]
fn a_concurrency_limit_holds_through_the_faults() {
    let (ok, out) = common::sim(&["--seeds", "0..40", "--concurrency-limit", "2"]);
    assert!(ok, "the limited simulation failed:\n{out}");
    assert!(out.contains("40 seeds (40 runs"), "{out}");
    assert!(out.contains(": 0 failed"), "{out}");
}
