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
