//! FORK_JOIN and JOIN: `fork_join_integration_test.json`, `nested_fork_join_integration_test.json`,
//! `fork_join_permissive_integration_test.json`, `fork_join_sync_mode_integration_test.json`.

use std::time::Duration;

use harness::{attempts, status_of, task_by_ref, task_refs, Api, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

fn setup(fixture: &str) -> Server {
    let server = Server::start();
    server.api().register_spec_task_defs();
    server.api().register_fixture(fixture);
    server
}

/// Polls `task_type`, checks the task handed out is `reference` of workflow `id`, completes it with
/// `output`, and returns the polled task.
fn run(api: &Api, id: &str, task_type: &str, reference: &str, output: Value) -> Value {
    let task = api.poll_until(task_type, "fork-worker", WAIT);
    assert_eq!(task["workflowInstanceId"], id);
    assert_eq!(task["referenceTaskName"], reference, "polled {task_type}");
    api.complete(&task, output);
    task
}

fn status(api: &Api, id: &str, reference: &str) -> Option<String> {
    status_of(&api.workflow(id), reference)
}

fn wait_status(api: &Api, id: &str, reference: &str, expected: &str) -> Value {
    harness::wait_for(WAIT, &format!("{reference} to become {expected}"), || {
        let wf = api.workflow(id);
        (status_of(&wf, reference).as_deref() == Some(expected)).then_some(wf)
    })
}

#[test]
fn join_waits_for_its_join_on_tasks_then_the_workflow_continues() {
    let server = setup("fork_join_integration_test.json");
    let api = server.api();
    let id = api.start_workflow("FanInOutTest", &json!({ "param1": "p1", "param2": "p2" }));

    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "RUNNING");
    assert_eq!(
        status_of(&wf, "fanouttask").as_deref(),
        Some("COMPLETED"),
        "FORK completes at once: {wf:#}"
    );
    assert_eq!(status_of(&wf, "t1").as_deref(), Some("SCHEDULED"));
    assert_eq!(status_of(&wf, "t2").as_deref(), Some("SCHEDULED"));
    assert_eq!(
        status_of(&wf, "fanouttask_join").as_deref(),
        Some("IN_PROGRESS")
    );
    assert_eq!(status_of(&wf, "t3"), None, "t3 follows t1 in its branch");
    assert_eq!(status_of(&wf, "t4"), None, "t4 follows the join");
    assert_eq!(
        harness::tasks(&wf).len(),
        4,
        "fork, t1, t2, join: {:?}",
        task_refs(&wf)
    );

    run(
        api,
        &id,
        "integration_task_1",
        "t1",
        json!({ "op": "t1 out" }),
    );
    let wf = wait_status(api, &id, "t3", "SCHEDULED");
    assert_eq!(
        status_of(&wf, "fanouttask_join").as_deref(),
        Some("IN_PROGRESS")
    );
    let t3_out = json!({ "op": "t3 out", "n": 3 });
    run(api, &id, "integration_task_3", "t3", t3_out.clone());
    // t2 is still open: the join must not complete and t4 must not be scheduled.
    let wf = api.workflow(&id);
    assert_eq!(
        status_of(&wf, "fanouttask_join").as_deref(),
        Some("IN_PROGRESS"),
        "{wf:#}"
    );
    assert_eq!(status_of(&wf, "t4"), None);
    assert!(api.poll("integration_task_4", "w").is_none());

    let t2_out = json!({ "op": "t2 out", "n": 2 });
    run(api, &id, "integration_task_2", "t2", t2_out.clone());
    let wf = wait_status(api, &id, "t4", "SCHEDULED");
    let join = task_by_ref(&wf, "fanouttask_join").expect("join");
    assert_eq!(join["status"], "COMPLETED");
    let output = join["outputData"].as_object().expect("join output");
    let mut keys: Vec<&String> = output.keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["t2", "t3"],
        "JOIN output holds exactly its joinOn tasks (not t1): {join:#}"
    );
    assert_eq!(output["t3"], t3_out);
    assert_eq!(output["t2"], t2_out);
    for reference in ["t2", "t3"] {
        let branch_end =
            harness::millis(task_by_ref(&wf, reference).expect("branch task"), "endTime");
        assert!(
            harness::millis(join, "endTime") >= branch_end,
            "the join ended before {reference}"
        );
    }

    run(api, &id, "integration_task_4", "t4", json!({}));
    api.wait_workflow_status(&id, "COMPLETED", WAIT);
}

#[test]
fn nested_forks_each_join_waits_for_its_own_join_on() {
    let server = setup("nested_fork_join_integration_test.json");
    let api = server.api();
    let id = api.start_workflow(
        "FanInOutNestedTest",
        &json!({ "param1": "p1", "param2": "p2", "case": "a" }),
    );

    let wf = api.workflow(&id);
    for (reference, expected) in [
        ("fork1", "COMPLETED"),
        ("fork2", "COMPLETED"),
        ("t11", "SCHEDULED"),
        ("t12", "SCHEDULED"),
        ("t13", "SCHEDULED"),
        ("join1", "IN_PROGRESS"),
        ("join2", "IN_PROGRESS"),
    ] {
        assert_eq!(
            status_of(&wf, reference).as_deref(),
            Some(expected),
            "{reference} at start: {:?}",
            task_refs(&wf)
        );
    }

    // Outer branch 1 done: join1 still waits for join2.
    run(
        api,
        &id,
        "integration_task_11",
        "t11",
        json!({ "from": "t11" }),
    );
    assert_eq!(status(api, &id, "join1").as_deref(), Some("IN_PROGRESS"));

    // Inner branch 1 (t12 -> t14) done: join2 still waits for t20 at the end of the decision branch.
    run(api, &id, "integration_task_12", "t12", json!({}));
    run(
        api,
        &id,
        "integration_task_14",
        "t14",
        json!({ "from": "t14" }),
    );
    let wf = api.workflow(&id);
    assert_eq!(
        status_of(&wf, "join2").as_deref(),
        Some("IN_PROGRESS"),
        "{wf:#}"
    );
    assert_eq!(status_of(&wf, "join1").as_deref(), Some("IN_PROGRESS"));

    // Inner branch 2: t13 -> DECISION(case a) -> t16 -> t19 -> t20.
    run(api, &id, "integration_task_13", "t13", json!({}));
    let wf = wait_status(api, &id, "t16", "SCHEDULED");
    assert_eq!(status_of(&wf, "d1").as_deref(), Some("COMPLETED"));
    run(api, &id, "integration_task_16", "t16", json!({}));
    run(api, &id, "integration_task_19", "t19", json!({}));
    assert_eq!(status(api, &id, "join2").as_deref(), Some("IN_PROGRESS"));
    run(
        api,
        &id,
        "integration_task_20",
        "t20",
        json!({ "from": "t20" }),
    );

    let wf = wait_status(api, &id, "t15", "SCHEDULED");
    let join2 = task_by_ref(&wf, "join2").expect("join2");
    assert_eq!(join2["status"], "COMPLETED");
    assert_eq!(join2["outputData"]["t14"], json!({ "from": "t14" }));
    assert_eq!(join2["outputData"]["t20"], json!({ "from": "t20" }));
    let join1 = task_by_ref(&wf, "join1").expect("join1");
    assert_eq!(join1["status"], "COMPLETED");
    assert_eq!(join1["outputData"]["t11"], json!({ "from": "t11" }));
    assert!(
        join1["outputData"].get("join2").is_some(),
        "join1 output holds join2: {join1:#}"
    );
    for other_case in ["t17", "t18", "t20b", "t20def"] {
        assert_eq!(
            status_of(&wf, other_case),
            None,
            "{other_case} belongs to a case not taken"
        );
    }

    run(api, &id, "integration_task_15", "t15", json!({}));
    api.wait_workflow_status(&id, "COMPLETED", WAIT);
}

#[test]
fn permissive_branch_failure_fails_the_join_after_every_branch_ends() {
    let server = setup("fork_join_permissive_integration_test.json");
    let api = server.api();
    let id = api.start_workflow(
        "FanInOutPermissiveTest",
        &json!({ "param1": "p1", "param2": "p2" }),
    );

    // t1 (retryCount 1 in the spec defs) fails twice: for good.
    for attempt in 0..2 {
        let t1 = api.poll_until("integration_task_1", "w", WAIT);
        assert_eq!(t1["referenceTaskName"], "t1");
        api.fail(&t1, &format!("t1 failure {attempt}"));
    }
    let wf = harness::wait_for(WAIT, "both t1 attempts to be FAILED", || {
        let wf = api.workflow(&id);
        let chain = attempts(&wf, "t1");
        (chain.len() == 2 && chain.iter().all(|t| t["status"] == "FAILED")).then_some(wf)
    });
    // The join waits for the other branch; the workflow is still running.
    assert_eq!(
        wf["status"], "RUNNING",
        "a permissive failure does not end the workflow yet: {wf:#}"
    );
    assert_eq!(
        status_of(&wf, "fanouttask_join").as_deref(),
        Some("IN_PROGRESS")
    );
    assert_eq!(status_of(&wf, "t2").as_deref(), Some("SCHEDULED"));

    run(
        api,
        &id,
        "integration_task_2",
        "t2",
        json!({ "op": "t2 done" }),
    );
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    assert_eq!(status_of(&wf, "t2").as_deref(), Some("COMPLETED"));
    assert_eq!(
        status_of(&wf, "fanouttask_join").as_deref(),
        Some("FAILED"),
        "{wf:#}"
    );
    assert_eq!(
        status_of(&wf, "t3"),
        None,
        "nothing after a failed join runs"
    );
    let failed_refs = wf["failedReferenceTaskNames"]
        .as_array()
        .expect("failedReferenceTaskNames");
    assert!(failed_refs.contains(&json!("t1")), "{wf:#}");
}

#[test]
fn sync_join_evaluates_in_the_same_step_as_the_last_branch() {
    let server = setup("fork_join_sync_mode_integration_test.json");
    let api = server.api();
    let id = api.start_workflow("ForkJoinSyncModeTest", &json!({ "param1": "v1" }));
    let wf = api.workflow(&id);
    assert_eq!(status_of(&wf, "forkTask").as_deref(), Some("COMPLETED"));
    assert_eq!(status_of(&wf, "joinTask").as_deref(), Some("IN_PROGRESS"));
    for branch in ["branch_a", "branch_b", "branch_c"] {
        let task = task_by_ref(&wf, branch).expect("branch scheduled at start");
        assert_eq!(task["status"], "SCHEDULED");
        assert_eq!(task["inputData"]["p1"], "v1");
    }

    let out_a = json!({ "branch": "a", "n": 1 });
    let out_b = json!({ "branch": "b", "n": 2 });
    let out_c = json!({ "branch": "c", "n": 3 });
    run(api, &id, "integration_task_1", "branch_a", out_a.clone());
    run(api, &id, "integration_task_2", "branch_b", out_b.clone());
    assert_eq!(status(api, &id, "joinTask").as_deref(), Some("IN_PROGRESS"));
    run(api, &id, "integration_task_3", "branch_c", out_c.clone());

    // No waiting: a SYNC join is decided with the update that ends its last branch.
    let wf = api.workflow(&id);
    let join = task_by_ref(&wf, "joinTask").expect("join");
    assert_eq!(
        join["status"], "COMPLETED",
        "SYNC join completes in the same step: {wf:#}"
    );
    assert_eq!(join["outputData"]["branch_a"], out_a);
    assert_eq!(join["outputData"]["branch_b"], out_b);
    assert_eq!(join["outputData"]["branch_c"], out_c);
    let post = task_by_ref(&wf, "postJoinTask").expect("postJoinTask scheduled with the join");
    assert_eq!(post["status"], "SCHEDULED");
    assert_eq!(post["inputData"]["branchAResult"], out_a);
    assert_eq!(post["inputData"]["branchBResult"], out_b);
    assert_eq!(post["inputData"]["branchCResult"], out_c);

    run(api, &id, "integration_task_4", "postJoinTask", json!({}));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(wf["output"]["branchAOutput"], out_a);
    assert_eq!(wf["output"]["branchBOutput"], out_b);
    assert_eq!(wf["output"]["branchCOutput"], out_c);
}
