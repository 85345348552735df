//! Seeds that found bugs, kept so that the bugs stay fixed.

mod common;

/// Seed 2 found that a client retrying a start after a lost answer created a second run: the
/// `idempotencyKey` of the start request was ignored (invariant "one run per idempotency key").
/// Starts with a key now derive the workflow id from (workflow name, key), so every retry names the
/// same run. (The end-to-end test is t60_operations::a_start_retried_with_its_idempotency_key_creates_one_run.)
#[test]
fn seed_2_retried_keyed_starts_create_one_run() {
    let (ok, out) = common::sim(&["--seed", "2"]);
    assert!(ok, "{out}");
    assert!(out.contains("violations 0"), "{out}");
    assert!(out.contains("client request timed out"), "{out}");
}

/// Seed 5069 (3 partitions, 120 workflows, 60 s of faults) found that a partition could stay at two
/// voters after the faults healed: the controller added a replica in one step that waited up to
/// 68 s for the learner to catch up, and when that request was lost to a fault, every other
/// membership step waited behind it. Now a replica is added as a learner and promoted in a later
/// round once its leader reports it caught up, and no step waits for long. The end of the run
/// requires every partition back at full replication.
#[test]
fn seed_5069_a_lost_add_replica_does_not_hold_up_the_controller() {
    let (ok, out) = common::sim(&[
        "--seed",
        "5069",
        "--partitions",
        "3",
        "--workflows",
        "120",
        "--safety-secs",
        "60",
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("violations 0"), "{out}");
}

/// Seed 25 found a partition's leader that had just removed itself from the membership (a
/// leadership transfer) asked to remove itself again: the controller, now on that node, still saw
/// it leading, and openraft 0.9 keeps such a leader leading until its next tick and accepts a
/// membership change meanwhile, which panicked its core ("Only leader is allowed to call
/// update_effective_membership()"). Every membership change of a `Group` now first checks, inside
/// openraft's core and in turn with the replica's other changes, that this node leads and is
/// still in the membership, and answers `NotLeader` otherwise; a core that panics anyway is
/// reported by `Group::failure()` and stops the node (fail-stop), so it is restarted.
#[test]
fn seed_25_a_leader_that_left_the_membership_changes_it_no_more() {
    let (ok, out) = common::sim(&["--seed", "25"]);
    assert!(ok, "{out}");
    assert!(out.contains("violations 0"), "{out}");
}
