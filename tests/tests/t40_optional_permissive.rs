//! Optional and permissive tasks: `simple_workflow_with_optional_task_integration_test.json` and
//! `simple_workflow_with_permissive_task_integration_test.json`.

use std::time::Duration;

use harness::{attempts, status_of, task_by_ref, Server};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn optional_task_failing_for_good_completes_with_errors_and_the_workflow_continues() {
    let server = Server::start();
    let api = server.api();
    // task_optional: retryCount 1, retryDelaySeconds 0, timeoutSeconds 5, responseTimeoutSeconds 5, RETRY.
    api.register_spec_task_defs();
    api.register_fixture("simple_workflow_with_optional_task_integration_test.json");
    let id = api.start_workflow(
        "optional_task_wf",
        &json!({ "param1": "p1", "param2": "p2" }),
    );

    // First attempt fails: retried.
    let first = api.poll_until("task_optional", "w", WAIT);
    api.fail(&first, "optional failure");
    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "RUNNING");
    let chain = attempts(&wf, "t1");
    assert_eq!(chain.len(), 2, "the first failure is retried: {wf:#}");
    assert_eq!(chain[0]["status"], "FAILED");
    assert_eq!(chain[1]["retriedTaskId"], first["taskId"]);
    assert!(
        task_by_ref(&wf, "t2").is_none(),
        "t2 waits while the optional task can still succeed"
    );

    // The retry is polled and left alone: it times out, retries are used up, and being optional it
    // ends COMPLETED_WITH_ERRORS; t2 is scheduled.
    let second = api.poll_until("task_optional", "w", WAIT);
    assert_eq!(second["taskId"], chain[1]["taskId"]);
    let wf = harness::wait_for(
        WAIT,
        "t2 to be scheduled after the optional task gives up",
        || {
            let wf = api.workflow(&id);
            task_by_ref(&wf, "t2").is_some().then_some(wf)
        },
    );
    let chain = attempts(&wf, "t1");
    assert_eq!(chain.len(), 2, "retryCount 1 allows one retry only: {wf:#}");
    assert_eq!(chain[1]["status"], "COMPLETED_WITH_ERRORS", "{wf:#}");
    assert_eq!(wf["status"], "RUNNING");
    let t2 = task_by_ref(&wf, "t2").expect("t2");
    assert_eq!(t2["status"], "SCHEDULED");
    assert_eq!(t2["inputData"]["tp1"], "p1");

    let t2 = api.poll_until("integration_task_2", "w", WAIT);
    api.complete(&t2, json!({ "uuid": "after-optional" }));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(wf["output"]["o2"], "after-optional");
    assert_eq!(
        status_of(&wf, "t1").as_deref(),
        Some("COMPLETED_WITH_ERRORS")
    );
}

#[test]
fn permissive_task_failing_for_good_lets_later_tasks_run_then_fails_the_workflow() {
    let server = Server::start();
    let api = server.api();
    // task_permissive is not a registered definition: the fixture carries it inline (`taskDefinition`,
    // retryCount 1, retryDelaySeconds 0), as Conductor's spec relies on.
    api.register_spec_task_defs();
    api.register_fixture("simple_workflow_with_permissive_task_integration_test.json");
    let id = api.start_workflow(
        "permissive_task_wf",
        &json!({ "param1": "p1", "param2": "p2" }),
    );

    for n in 0..2 {
        let t1 = api.poll_until("task_permissive", "w", WAIT);
        assert_eq!(t1["referenceTaskName"], "t1");
        api.fail(&t1, &format!("permissive failure {n}"));
    }
    // Failed for good, but permissive: t2 runs and the workflow keeps going for now.
    let wf = harness::wait_for(
        WAIT,
        "t2 to be scheduled after the permissive failure",
        || {
            let wf = api.workflow(&id);
            task_by_ref(&wf, "t2").is_some().then_some(wf)
        },
    );
    assert_eq!(wf["status"], "RUNNING", "{wf:#}");
    let chain = attempts(&wf, "t1");
    assert_eq!(chain.len(), 2, "retryCount 1: two attempts: {wf:#}");
    assert!(chain.iter().all(|t| t["status"] == "FAILED"), "{wf:#}");
    assert_eq!(chain[1]["retriedTaskId"], chain[0]["taskId"]);

    let t2 = api.poll_until("integration_task_2", "w", WAIT);
    assert_eq!(t2["inputData"]["tp1"], "p1");
    api.complete(&t2, json!({ "uuid": "t2-ran" }));

    // Every task is done: the workflow ends FAILED because of the permissive failure.
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    assert_eq!(status_of(&wf, "t2").as_deref(), Some("COMPLETED"));
    assert_eq!(
        task_by_ref(&wf, "t2").expect("t2")["outputData"]["uuid"],
        "t2-ran"
    );
    let failed_refs = wf["failedReferenceTaskNames"]
        .as_array()
        .expect("failedReferenceTaskNames");
    assert!(failed_refs.contains(&json!("t1")), "{wf:#}");
    assert!(!failed_refs.contains(&json!("t2")), "{wf:#}");
}
