//! A two-task workflow end to end (`simple_workflow_1_integration_test.json`): scheduling, parameter
//! passing, output parameters, the retry chain of a failing task, late results, and bad input.

use std::time::Duration;

use harness::{
    attempts, fixture, nonce, status_of, task_by_ref, task_def, task_result, wait_until, Server,
};
use serde_json::{json, Value};

const WF: &str = "integration_test_wf";
const FIXTURE: &str = "simple_workflow_1_integration_test.json";
const WAIT: Duration = Duration::from_secs(20);

fn setup() -> Server {
    let server = Server::start();
    server.api().register_spec_task_defs();
    server.api().register_fixture(FIXTURE);
    server
}

#[test]
fn parameters_flow_from_input_to_tasks_to_output() {
    let server = setup();
    let api = server.api();
    let param1 = format!("p1-{}", nonce());
    let param2 = format!("p2-{}", nonce());
    let id = api.start_workflow(WF, &json!({ "param1": param1, "param2": param2 }));

    // Start: RUNNING with exactly one SCHEDULED task, t1, whose input is resolved from the workflow input.
    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "RUNNING", "{wf:#}");
    assert_eq!(wf["workflowId"], id.as_str());
    let tasks = wf["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 1, "only t1 is scheduled at start: {wf:#}");
    let t1 = &tasks[0];
    assert_eq!(t1["referenceTaskName"], "t1");
    assert_eq!(t1["taskType"], "integration_task_1");
    assert_eq!(t1["status"], "SCHEDULED");
    assert_eq!(t1["inputData"]["p1"], param1.as_str());
    assert_eq!(t1["inputData"]["p2"], param2.as_str());
    // ${CPEWF_TASK_ID} resolves to the task's own id; a null input parameter is kept as null.
    assert_eq!(t1["inputData"]["p3"], t1["taskId"], "CPEWF_TASK_ID: {t1:#}");
    assert!(
        t1["inputData"]
            .as_object()
            .expect("inputData")
            .contains_key("someNullKey"),
        "a null input parameter is kept: {t1:#}"
    );
    assert!(t1["inputData"]["someNullKey"].is_null());

    // Nothing else is pollable: t2 is not scheduled yet.
    assert!(
        api.poll("integration_task_2", "w").is_none(),
        "t2 must not be scheduled before t1 completes"
    );

    let polled = api
        .poll("integration_task_1", "w1")
        .expect("t1 is pollable");
    assert_eq!(polled["taskId"], t1["taskId"]);
    assert_eq!(polled["workflowInstanceId"], id.as_str());
    assert_eq!(polled["status"], "IN_PROGRESS");
    assert_eq!(polled["inputData"]["p1"], param1.as_str());
    assert!(
        api.poll("integration_task_1", "w1").is_none(),
        "a task is handed out once"
    );
    assert_eq!(
        status_of(&api.workflow(&id), "t1").as_deref(),
        Some("IN_PROGRESS")
    );

    api.complete(&polled, json!({ "op": "task1.done" }));

    // t1 COMPLETED; t2 scheduled with tp1 from the workflow input and tp2 from t1's output.
    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "RUNNING");
    assert_eq!(status_of(&wf, "t1").as_deref(), Some("COMPLETED"));
    let t2 = task_by_ref(&wf, "t2").expect("t2 scheduled after t1 completed");
    assert_eq!(t2["status"], "SCHEDULED");
    assert_eq!(t2["inputData"]["tp1"], param1.as_str());
    assert_eq!(t2["inputData"]["tp2"], "task1.done");
    assert_eq!(t2["inputData"]["tp3"], t2["taskId"]);

    let polled2 = api
        .poll("integration_task_2", "w2")
        .expect("t2 is pollable");
    assert_eq!(polled2["taskId"], t2["taskId"]);
    let uuid = format!("uuid-{}", nonce());
    api.complete(&polled2, json!({ "uuid": uuid }));

    // Completed with the outputParameters resolved.
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(wf["output"]["o1"], param1.as_str());
    assert_eq!(wf["output"]["o2"], uuid.as_str());
    assert_eq!(wf["output"]["o3"], "task1.done");
    assert_eq!(status_of(&wf, "t2").as_deref(), Some("COMPLETED"));
    assert_eq!(
        harness::tasks(&wf).len(),
        2,
        "no task beyond t1 and t2: {wf:#}"
    );
    assert_eq!(
        task_by_ref(&wf, "t2").expect("t2")["outputData"]["uuid"],
        uuid.as_str()
    );
}

#[test]
fn late_results_on_completed_tasks_are_ignored() {
    let server = setup();
    let api = server.api();
    let id = api.start_workflow(WF, &json!({ "param1": "a", "param2": "b" }));

    let t1 = api.poll_until("integration_task_1", "w", WAIT);
    api.complete(&t1, json!({ "op": "first" }));

    // A second result for t1 (FAILED, other output) while the workflow is still running: ignored.
    let late = api.update_task(&task_result(
        &t1,
        "FAILED",
        json!({ "op": "late" }),
        Some("late"),
        None,
    ));
    assert!(
        late.status < 500,
        "a late result is not a server error: {late:?}"
    );
    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "RUNNING");
    assert_eq!(
        attempts(&wf, "t1").len(),
        1,
        "a late FAILED must not start a retry: {wf:#}"
    );
    let t1_row = task_by_ref(&wf, "t1").expect("t1");
    assert_eq!(t1_row["status"], "COMPLETED");
    assert_eq!(t1_row["outputData"]["op"], "first");
    assert_eq!(status_of(&wf, "t2").as_deref(), Some("SCHEDULED"));
    assert_eq!(
        task_by_ref(&wf, "t2").expect("t2")["inputData"]["tp2"],
        "first"
    );

    let t2 = api.poll_until("integration_task_2", "w", WAIT);
    api.complete(&t2, json!({ "uuid": "u1" }));
    let done = api.wait_workflow_status(&id, "COMPLETED", WAIT);

    // Late results after the workflow completed: ignored too, output unchanged.
    for task in [&t1, &t2] {
        let late = api.update_task(&task_result(
            task,
            "FAILED",
            json!({ "uuid": "late" }),
            Some("late"),
            None,
        ));
        assert!(
            late.status < 500,
            "a late result is not a server error: {late:?}"
        );
    }
    let after = api.workflow(&id);
    assert_eq!(after["status"], "COMPLETED");
    assert_eq!(after["output"], done["output"]);
    assert_eq!(
        after["tasks"], done["tasks"],
        "terminal tasks absorb late results"
    );
}

#[test]
fn failing_task_is_retried_as_a_chain_of_attempts() {
    let server = setup();
    let api = server.api();
    // The README's variant of the spec: t2's definition with retryCount 3 / retryDelaySeconds 2.
    api.register_task_defs(&[task_def(
        "integration_task_2",
        json!({ "retryCount": 3, "retryDelaySeconds": 2, "timeoutSeconds": 120, "responseTimeoutSeconds": 120 }),
    )]);
    let id = api.start_workflow(WF, &json!({ "param1": "x", "param2": "y" }));
    let t1 = api.poll_until("integration_task_1", "w", WAIT);
    api.complete(&t1, json!({ "op": "task1.done" }));

    for n in 1..=2 {
        let t2 = api.poll_until("integration_task_2", "w", WAIT);
        api.fail(&t2, &format!("failure {n}"));
        // The retry is created at once (SCHEDULED, waiting out its delay); the workflow keeps running.
        let wf = api.workflow(&id);
        assert_eq!(
            wf["status"], "RUNNING",
            "a retriable failure keeps the workflow running: {wf:#}"
        );
        let chain = attempts(&wf, "t2");
        assert_eq!(
            chain.len(),
            n + 1,
            "attempt {} scheduled after failure {n}: {wf:#}",
            n + 1
        );
        assert_eq!(chain[n]["status"], "SCHEDULED");
        assert_eq!(chain[n]["retriedTaskId"], t2["taskId"]);
    }
    let last = api.poll_until("integration_task_2", "w", WAIT);
    let uuid = format!("u-{}", nonce());
    api.complete(&last, json!({ "uuid": uuid }));

    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    let chain = attempts(&wf, "t2");
    let statuses: Vec<&str> = chain
        .iter()
        .map(|t| t["status"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(statuses, ["FAILED", "FAILED", "COMPLETED"], "{wf:#}");
    for (i, attempt) in chain.iter().enumerate() {
        assert_eq!(
            attempt["retryCount"].as_u64(),
            Some(i as u64),
            "retryCount of attempt {i}"
        );
    }
    assert_eq!(chain[0]["reasonForIncompletion"], "failure 1");
    assert_eq!(chain[1]["reasonForIncompletion"], "failure 2");
    assert_ne!(chain[0]["taskId"], chain[1]["taskId"]);
    assert_ne!(chain[1]["taskId"], chain[2]["taskId"]);
    assert_eq!(chain[1]["retriedTaskId"], chain[0]["taskId"]);
    assert_eq!(chain[2]["retriedTaskId"], chain[1]["taskId"]);
    assert_eq!(chain[0]["retried"], true);
    assert_eq!(chain[1]["retried"], true);
    // Each retry became pollable only after its 2 s delay.
    for pair in chain.windows(2) {
        let failed_at = harness::millis(pair[0], "endTime");
        let started_at = harness::millis(pair[1], "startTime");
        assert!(
            started_at - failed_at >= 2000,
            "retry polled {} ms after the failure",
            started_at - failed_at
        );
    }
    let failed_refs: Vec<&Value> = wf["failedReferenceTaskNames"]
        .as_array()
        .expect("failedReferenceTaskNames")
        .iter()
        .collect();
    assert_eq!(failed_refs, [&json!("t2")], "{wf:#}");
    assert_eq!(wf["output"]["o2"], uuid.as_str());
}

#[test]
fn bad_input_is_rejected_without_changing_state() {
    let server = setup();
    let api = server.api();

    // Malformed JSON bodies.
    let reply = api.post_raw(
        "/api/metadata/workflow",
        "{\"name\": \"broken\", ",
        "application/json",
    );
    reply.assert_error_response(400, "malformed workflow def JSON");
    let reply = api.post_raw(
        &format!("/api/workflow/{WF}"),
        "{not json",
        "application/json",
    );
    reply.assert_error_response(400, "malformed workflow input JSON");
    let reply = api.post_raw("/api/tasks", "[1, 2", "application/json");
    reply.assert_error_response(400, "malformed task result JSON");

    // Unknown workflow name.
    let reply = api.post_json(
        &format!("/api/workflow/no_such_workflow_{}", nonce()),
        &json!({}),
    );
    reply.assert_error_response(404, "start of an unknown workflow");

    // Invalid definitions: each one is refused and leaves nothing behind.
    let simple = |name: &str, reference: &str| json!({ "name": name, "taskReferenceName": reference, "type": "SIMPLE", "inputParameters": {} });
    let invalid = [
        (
            "unknown task type",
            vec![
                json!({ "name": "integration_task_1", "taskReferenceName": "a", "type": "NO_SUCH_TASK_TYPE" }),
            ],
        ),
        (
            "duplicate taskReferenceName",
            vec![
                simple("integration_task_1", "dup"),
                simple("integration_task_2", "dup"),
            ],
        ),
        (
            "JOIN on an unknown reference",
            vec![
                json!({ "name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN",
                        "forkTasks": [[simple("integration_task_1", "b1")], [simple("integration_task_2", "b2")]] }),
                json!({ "name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["b1", "nowhere"] }),
            ],
        ),
        (
            "empty forkTasks",
            vec![
                json!({ "name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [] }),
                json!({ "name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": [] }),
            ],
        ),
    ];
    for (what, tasks) in &invalid {
        let name = format!("invalid_{}", nonce());
        let def = json!({ "name": name, "version": 1, "schemaVersion": 2, "ownerEmail": "test@harness.com", "tasks": tasks });
        api.post_json("/api/metadata/workflow", &def)
            .assert_error_response(400, &format!("workflow def with {what}"));
        let get = api.get(&format!("/api/metadata/workflow/{name}"));
        assert_eq!(
            get.status, 404,
            "a refused def ({what}) must not be stored: {get:?}"
        );
        api.post_json(&format!("/api/workflow/{name}"), &json!({}))
            .assert_error_response(404, &format!("start of a refused def ({what})"));
    }

    // An invalid update of an existing definition leaves the stored version untouched.
    let stored_before = api
        .get(&format!("/api/metadata/workflow/{WF}"))
        .expect_status(200, "get def")
        .json();
    let mut broken = fixture(FIXTURE);
    broken["tasks"] = json!([
        simple("integration_task_1", "dup"),
        simple("integration_task_2", "dup")
    ]);
    let reply = api.put_json("/api/metadata/workflow", &json!([broken]));
    if reply.status == 200 {
        // Conductor OSS answers the bulk update with a BulkResponse that lists the refused def.
        let bulk = reply.json();
        assert!(
            bulk["bulkErrorResults"].get(WF).is_some(),
            "a refused def must be listed in bulkErrorResults: {bulk}"
        );
        let ok = bulk["bulkSuccessfulResults"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            !ok.contains(&json!(WF)),
            "a refused def must not be listed as a success: {bulk}"
        );
    } else {
        reply.assert_error_response(400, "invalid update of an existing def");
    }
    let stored_after = api
        .get(&format!("/api/metadata/workflow/{WF}"))
        .expect_status(200, "get def")
        .json();
    assert_eq!(
        stored_after["tasks"], stored_before["tasks"],
        "a refused update must not change the def"
    );

    // Ids: malformed -> 400; well-formed but unknown (a removed workflow) -> 404.
    api.get("/api/workflow/not-a-workflow-id?includeTasks=true")
        .assert_error_response(400, "malformed workflow id");
    let id = api.start_workflow(WF, &json!({ "param1": "a", "param2": "b" }));
    api.delete(&format!("/api/workflow/{id}/remove"))
        .expect_ok("remove workflow");
    api.get(&format!("/api/workflow/{id}?includeTasks=true"))
        .assert_error_response(404, "unknown workflow id");

    // None of the refused requests started anything: the only scheduled task was the removed workflow's.
    assert!(
        api.poll("integration_task_1", "w").is_none(),
        "refused requests must not schedule tasks"
    );
}

/// Conductor's HTTP worker loop stays fast: a batch poll waiting on an empty queue gets a task as
/// soon as one is ready (well before its timeout), leased in the very write that made it ready
/// (the start's: one Raft entry, not a second for the lease), and `update-v2` answers the
/// worker's next task of the same type with the result.
#[test]
fn a_waiting_batch_poll_wakes_for_a_new_task_and_update_v2_hands_back_the_next() {
    let server = setup();
    let api = server.api().clone();
    let task_type = "integration_task_1";
    let waiting = {
        let api = api.clone();
        std::thread::spawn(move || {
            let asked = std::time::Instant::now();
            let tasks = api.batch_poll(task_type, "long-poller", 1, 30_000);
            (tasks, asked.elapsed())
        })
    };
    wait_until(WAIT, "the poll parks on the empty queue", || {
        api.get("/api/admin/waits").json()["parkedPolls"] == json!(1)
    });
    let entries = || -> u64 {
        let groups = api.get("/api/admin/status").json();
        let groups = groups.as_array().cloned().unwrap_or_default();
        groups
            .iter()
            .filter(|g| g["name"].as_str().is_some_and(|n| n.starts_with('p')))
            .filter_map(|g| g["last_log_index"].as_u64())
            .sum()
    };
    let before = entries();
    let first = api.start_workflow(WF, &json!({"param1": "a", "param2": "b"}));
    let (tasks, waited) = waiting.join().expect("poller thread");
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert!(
        waited < Duration::from_secs(20),
        "the poll woke for the new task instead of waiting out its 30 s timeout ({waited:?})"
    );
    assert_eq!(tasks[0]["workflowInstanceId"], json!(first));
    assert_eq!(tasks[0]["workerId"], json!("long-poller"));
    assert_eq!(
        entries() - before,
        1,
        "the start and the lease of its first task are one write"
    );
    let stored = api.get(&format!("/api/workflow/{first}")).json();
    let t1 = task_by_ref(&stored, "t1").expect("t1 scheduled");
    assert_eq!(t1["status"], json!("IN_PROGRESS"), "{stored}");
    assert_eq!(t1["pollCount"], json!(1), "{stored}");
    assert_eq!(api.get("/api/admin/waits").json()["parkedPolls"], json!(0));
    let second = api.start_workflow(WF, &json!({"param1": "c", "param2": "d"}));
    let leased = &tasks[0];
    let next = api.post_json(
        "/api/tasks/update-v2",
        &task_result(leased, "COMPLETED", json!({"done": 1}), None, None),
    );
    let next = next
        .expect_status(200, "update-v2 with another task ready")
        .json();
    assert_eq!(next["taskType"], json!(task_type), "{next}");
    assert_eq!(next["status"], json!("IN_PROGRESS"), "{next}");
    assert_ne!(next["taskId"], leased["taskId"]);
    let owners = [first.as_str(), second.as_str()];
    assert!(owners.contains(&next["workflowInstanceId"].as_str().unwrap_or_default()));
    assert_ne!(next["workflowInstanceId"], leased["workflowInstanceId"]);
}
