//! The mutation check: each deliberate bug, switched on in the simulator's build only
//! (`cluster::mutation`, `engine::mutation`), is caught by an invariant within the CI seeds. A simulator that misses a
//! known bug would pass anything.

mod common;

fn caught(mutation: &str) {
    caught_with(mutation, &[]);
}

/// [`caught`], with the workload's options `extra`.
fn caught_with(mutation: &str, extra: &[&str]) {
    let mut args = vec![
        "--mutation",
        mutation,
        "--seeds",
        "0..100",
        "--until-caught",
    ];
    args.extend_from_slice(extra);
    let (ok, out) = common::sim(&args);
    assert!(ok, "{mutation} was not caught within seeds 0..100:\n{out}");
    assert!(out.contains("caught by seed"), "{out}");
}

#[test]
fn acknowledging_before_the_flush_is_caught() {
    caught("ack-before-flush");
}

#[test]
fn accepting_a_result_without_the_fence_is_caught() {
    caught("accept-without-fence");
}

#[test]
fn a_join_completing_on_its_first_branch_is_caught() {
    caught("join-on-first-branch");
}

#[test]
fn timers_firing_late_in_a_healed_cluster_are_caught() {
    caught("late-timers");
}

#[test]
fn a_sub_workflow_started_twice_is_caught() {
    caught("sub-workflow-twice");
}

#[test]
fn tasks_leased_without_their_permits_are_caught() {
    caught_with("lease-without-permit", &["--concurrency-limit", "2"]);
}

#[test]
fn an_unknown_mutation_is_refused() {
    let (ok, out) = common::sim(&["--seed", "0", "--mutation", "no-such-bug"]);
    assert!(!ok, "{out}");
    assert!(out.contains("--mutation must be one of"), "{out}");
}

#[test]
fn activating_a_cluster_version_before_every_member_serves_it_is_caught() {
    caught("activate-unserved");
}
