//! Workflow operations over the REST API: pause/resume, terminate, retry, restart, rerun, skip task,
//! remove, search, running list, queue sizes, task log.

use std::time::Duration;

use harness::{attempts, nonce, status_of, task_by_ref, task_def, task_result, Api, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);
const WF: &str = "ops_wf";

/// `ops_wf`: ops_a -> ops_b, both with retryCount 0 so that one failure fails the workflow.
fn setup() -> Server {
    let server = Server::start();
    let api = server.api();
    api.register_task_defs(&[
        task_def("ops_a", json!({ "retryCount": 0 })),
        task_def("ops_b", json!({ "retryCount": 0 })),
    ]);
    api.register_workflow_def(&json!({
        "name": WF,
        "version": 1,
        "schemaVersion": 2,
        "restartable": true,
        "ownerEmail": "test@harness.com",
        "tasks": [
            { "name": "ops_a", "taskReferenceName": "a", "type": "SIMPLE", "inputParameters": { "x": "${workflow.input.x}" } },
            { "name": "ops_b", "taskReferenceName": "b", "type": "SIMPLE", "inputParameters": { "fromA": "${a.output.v}" } },
        ],
        "outputParameters": { "a": "${a.output.v}", "b": "${b.output.v}" },
    }));
    server
}

fn run_task(api: &Api, id: &str, task_type: &str, output: Value) -> Value {
    let task = api.poll_until(task_type, "ops-worker", WAIT);
    assert_eq!(task["workflowInstanceId"], id);
    api.complete(&task, output);
    task
}

fn run_to_completion(api: &Api, x: &str) -> String {
    let id = api.start_workflow(WF, &json!({ "x": x }));
    run_task(api, &id, "ops_a", json!({ "v": "a1" }));
    run_task(api, &id, "ops_b", json!({ "v": "b1" }));
    api.wait_workflow_status(&id, "COMPLETED", WAIT);
    id
}

#[test]
fn pause_holds_the_next_task_until_resume() {
    let server = setup();
    let api = server.api();
    let id = api.start_workflow(WF, &json!({ "x": "1" }));
    let a = api.poll_until("ops_a", "w", WAIT);

    api.put_empty(&format!("/api/workflow/{id}/pause"))
        .expect_ok("pause");
    assert_eq!(api.workflow_status(&id), "PAUSED");
    // A worker may still finish what it holds; the paused workflow does not schedule what follows.
    api.complete(&a, json!({ "v": "a" }));
    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "PAUSED");
    assert_eq!(status_of(&wf, "a").as_deref(), Some("COMPLETED"));
    assert!(
        task_by_ref(&wf, "b").is_none(),
        "a paused workflow schedules nothing: {wf:#}"
    );
    assert!(api.poll("ops_b", "w").is_none());

    api.put_empty(&format!("/api/workflow/{id}/resume"))
        .expect_ok("resume");
    let b = api.poll_until("ops_b", "w", WAIT);
    assert_eq!(b["inputData"]["fromA"], "a");
    assert_eq!(api.workflow_status(&id), "RUNNING");
    api.complete(&b, json!({ "v": "b" }));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(wf["output"], json!({ "a": "a", "b": "b" }));
}

#[test]
fn terminate_cancels_open_tasks_with_the_reason() {
    let server = setup();
    let api = server.api();
    let id = api.start_workflow(WF, &json!({ "x": "1" }));
    let a = api.poll_until("ops_a", "w", WAIT);
    let reason = format!("stopped by test {}", nonce());

    api.delete(&format!(
        "/api/workflow/{id}?reason={}",
        reason.replace(' ', "%20")
    ))
    .expect_ok("terminate");
    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "TERMINATED");
    assert_eq!(wf["reasonForIncompletion"], reason.as_str());
    assert_eq!(status_of(&wf, "a").as_deref(), Some("CANCELED"), "{wf:#}");

    // The worker's late completion is ignored and nothing follows.
    let late = api.update_task(&task_result(
        &a,
        "COMPLETED",
        json!({ "v": "late" }),
        None,
        None,
    ));
    assert!(late.status < 500, "{late:?}");
    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "TERMINATED");
    assert_eq!(status_of(&wf, "a").as_deref(), Some("CANCELED"));
    assert!(task_by_ref(&wf, "b").is_none());
    assert!(api.poll("ops_b", "w").is_none());
}

#[test]
fn retry_resumes_a_failed_workflow_from_the_failed_task() {
    let server = setup();
    let api = server.api();
    let id = api.start_workflow(WF, &json!({ "x": "1" }));
    run_task(api, &id, "ops_a", json!({ "v": "a" }));
    let b = api.poll_until("ops_b", "w", WAIT);
    api.fail(&b, "b broke");
    let failed = api.wait_workflow_status(&id, "FAILED", WAIT);
    let a_id = task_by_ref(&failed, "a").expect("a")["taskId"].clone();

    api.post_empty(&format!("/api/workflow/{id}/retry"))
        .expect_ok("retry");
    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "RUNNING", "{wf:#}");
    let chain = attempts(&wf, "b");
    assert_eq!(chain.len(), 2, "{wf:#}");
    assert_eq!(chain[0]["status"], "FAILED");
    assert_eq!(chain[1]["status"], "SCHEDULED");
    assert_eq!(chain[1]["retriedTaskId"], b["taskId"]);
    assert_eq!(
        task_by_ref(&wf, "a").expect("a")["taskId"],
        a_id,
        "completed tasks are kept"
    );

    let b2 = api.poll_until("ops_b", "w", WAIT);
    assert_eq!(b2["taskId"], chain[1]["taskId"]);
    api.complete(&b2, json!({ "v": "b" }));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(wf["output"]["b"], "b");
}

#[test]
fn restart_runs_a_completed_workflow_again_from_the_start() {
    let server = setup();
    let api = server.api();
    let id = run_to_completion(api, "1");
    let before = api.workflow(&id);

    api.post_empty(&format!("/api/workflow/{id}/restart"))
        .expect_ok("restart");
    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "RUNNING");
    assert_eq!(
        harness::tasks(&wf).len(),
        1,
        "a restarted workflow begins again: {wf:#}"
    );
    let a = task_by_ref(&wf, "a").expect("a");
    assert_eq!(a["status"], "SCHEDULED");
    assert_ne!(
        a["taskId"],
        task_by_ref(&before, "a").expect("old a")["taskId"]
    );
    assert_eq!(a["inputData"]["x"], "1");

    run_task(api, &id, "ops_a", json!({ "v": "a2" }));
    run_task(api, &id, "ops_b", json!({ "v": "b2" }));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(wf["output"], json!({ "a": "a2", "b": "b2" }));
}

#[test]
fn rerun_from_a_task_keeps_what_came_before() {
    let server = setup();
    let api = server.api();
    let id = run_to_completion(api, "1");
    let before = api.workflow(&id);
    let a_before = task_by_ref(&before, "a").expect("a").clone();
    let b_before = task_by_ref(&before, "b").expect("b").clone();

    let rerun = json!({
        "reRunFromWorkflowId": id,
        "reRunFromTaskId": b_before["taskId"],
        "taskInput": { "fromA": "overridden" },
    });
    let reply = api
        .post_json(&format!("/api/workflow/{id}/rerun"), &rerun)
        .expect_ok("rerun");
    assert_eq!(reply.id(), id, "rerun answers the workflow id");
    let wf = api.workflow(&id);
    assert_eq!(wf["status"], "RUNNING");
    let a = task_by_ref(&wf, "a").expect("a");
    assert_eq!(
        a["taskId"], a_before["taskId"],
        "tasks before the rerun point are kept"
    );
    assert_eq!(a["status"], "COMPLETED");
    assert_eq!(status_of(&wf, "b").as_deref(), Some("SCHEDULED"));

    let b = api.poll_until("ops_b", "w", WAIT);
    assert_eq!(
        b["inputData"]["fromA"], "overridden",
        "taskInput replaces the task's input"
    );
    api.complete(&b, json!({ "v": "b-rerun" }));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(wf["output"], json!({ "a": "a1", "b": "b-rerun" }));
}

#[test]
fn skip_task_marks_a_future_task_skipped() {
    let server = setup();
    let api = server.api();
    let id = api.start_workflow(WF, &json!({ "x": "1" }));

    // Only `b`, which is not scheduled yet, is skipped. Skipping an already scheduled task is left out:
    // Conductor OSS refuses it, Orkes allows it, and the API docs do not settle it.
    api.put_json(
        &format!("/api/workflow/{id}/skiptask/b"),
        &json!({ "taskOutput": { "v": "skipped" } }),
    )
    .expect_ok("skip b");
    run_task(api, &id, "ops_a", json!({ "v": "a" }));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(status_of(&wf, "b").as_deref(), Some("SKIPPED"), "{wf:#}");
    let b = task_by_ref(&wf, "b").expect("b");
    assert_eq!(
        b["outputData"]["v"], "skipped",
        "the skip request's taskOutput: {b:#}"
    );
    assert_eq!(wf["output"]["b"], "skipped");
    assert!(
        api.poll("ops_b", "w").is_none(),
        "a skipped task is never handed out"
    );
}

#[test]
fn remove_deletes_the_workflow() {
    let server = setup();
    let api = server.api();
    let id = run_to_completion(api, "1");
    let keep = run_to_completion(api, "2");
    api.delete(&format!("/api/workflow/{id}/remove"))
        .expect_ok("remove");
    api.get(&format!("/api/workflow/{id}?includeTasks=true"))
        .assert_error_response(404, "removed workflow");
    assert_eq!(
        api.workflow_status(&keep),
        "COMPLETED",
        "removing one workflow leaves the others"
    );
}

/// `GET /api/workflow/search` with `query`; returns (totalHits, workflow ids).
fn search(api: &Api, query: &str) -> (u64, Vec<String>) {
    let encoded: String = query
        .chars()
        .map(|c| match c {
            ' ' => "%20".to_string(),
            '(' => "%28".to_string(),
            ')' => "%29".to_string(),
            '=' => "%3D".to_string(),
            '\'' => "%27".to_string(),
            c => c.to_string(),
        })
        .collect();
    let result = api
        .get(&format!(
            "/api/workflow/search?start=0&size=100&freeText=*&query={encoded}"
        ))
        .expect_status(200, "search")
        .json();
    let total = result["totalHits"]
        .as_u64()
        .unwrap_or_else(|| panic!("totalHits missing: {result}"));
    let ids = result["results"]
        .as_array()
        .unwrap_or_else(|| panic!("results missing: {result}"))
        .iter()
        .map(|s| s["workflowId"].as_str().unwrap_or_default().to_string())
        .collect();
    (total, ids)
}

#[test]
fn search_running_list_and_queue_sizes() {
    let server = setup();
    let api = server.api();
    let corr_x = format!("corrx{}", nonce());
    let corr_y = format!("corry{}", nonce());
    let start = |corr: &str| {
        api.post_json(
            &format!("/api/workflow/{WF}?correlationId={corr}"),
            &json!({ "x": corr }),
        )
        .expect_ok("start with correlationId")
        .id()
    };
    // One X workflow runs to completion before the others start, so it is the one polled.
    let done = start(&corr_x);
    run_task(api, &done, "ops_a", json!({ "v": "a" }));
    run_task(api, &done, "ops_b", json!({ "v": "b" }));
    api.wait_workflow_status(&done, "COMPLETED", WAIT);
    let mut xs: Vec<String> = (0..2).map(|_| start(&corr_x)).collect();
    let ys: Vec<String> = (0..2).map(|_| start(&corr_y)).collect();
    assert_eq!(api.workflow(&xs[0])["correlationId"], corr_x.as_str());
    let running: Vec<String> = xs.iter().chain(ys.iter()).cloned().collect();
    xs.push(done.clone());

    // Search by correlation id, and by correlation id and status (the index may lag the commit).
    let all_x = format!("correlationId IN ({corr_x})");
    harness::wait_until(WAIT, "search by correlationId", || {
        search(api, &all_x).0 == 3
    });
    let (total, mut ids) = search(api, &all_x);
    assert_eq!(total, 3);
    ids.sort();
    let mut expected = xs.clone();
    expected.sort();
    assert_eq!(ids, expected);
    let running_x = format!("correlationId IN ({corr_x}) AND status IN (RUNNING)");
    let completed_x = format!("correlationId IN ({corr_x}) AND status IN (COMPLETED)");
    harness::wait_until(WAIT, "search by correlationId and status", || {
        search(api, &running_x).0 == 2
    });
    let (_, mut running_ids) = search(api, &running_x);
    running_ids.sort();
    let mut expected_running = running[..2].to_vec();
    expected_running.sort();
    assert_eq!(running_ids, expected_running);
    let (completed_total, completed_ids) = search(api, &completed_x);
    assert_eq!((completed_total, completed_ids), (1, vec![done.clone()]));
    let (total_y, _) = search(api, &format!("correlationId IN ({corr_y})"));
    assert_eq!(total_y, 2);

    // Running list: the four running ones, not the completed one.
    let listed = api
        .get(&format!("/api/workflow/running/{WF}?version=1"))
        .expect_status(200, "running")
        .json();
    let listed: Vec<&str> = listed
        .as_array()
        .expect("running list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(listed.len(), 4, "{listed:?}");
    for id in &running {
        assert!(
            listed.contains(&id.as_str()),
            "{id} missing from running list {listed:?}"
        );
    }
    assert!(!listed.contains(&done.as_str()));

    // Queue sizes: four ops_a waiting, then three after one is handed out.
    harness::wait_until(WAIT, "ops_a queue size 4", || {
        api.queue_sizes(&["ops_a", "ops_b"])["ops_a"] == 4
    });
    assert_eq!(api.queue_sizes(&["ops_b"])["ops_b"], 0);
    let polled = api.poll_until("ops_a", "w", WAIT);
    harness::wait_until(WAIT, "ops_a queue size 3", || {
        api.queue_sizes(&["ops_a"])["ops_a"] == 3
    });

    // Task log: appended lines come back for that task.
    let line = format!("log line {}", nonce());
    let task_id = polled["taskId"].as_str().expect("task id");
    api.post_json(&format!("/api/tasks/{task_id}/log"), &json!(line))
        .expect_ok("add task log");
    let logs = api
        .get(&format!("/api/tasks/{task_id}/log"))
        .expect_status(200, "task log")
        .json();
    let logs = logs.as_array().expect("task log is a list");
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(
        logs[0]["log"].as_str().unwrap_or_default().contains(&line),
        "{logs:?}"
    );
    assert_eq!(logs[0]["taskId"], task_id);
}

/// Regression (found by the simulator, `sim/run --seed 2` before the fix): a client that retries a
/// start after losing the answer must not create a second run. With an `idempotencyKey` every start
/// of the same (workflow, key) answers the first run's id; another key, or another workflow with the
/// same key, is another run; an over-long key is refused.
#[test]
fn a_start_retried_with_its_idempotency_key_creates_one_run() {
    let server = setup();
    let api = server.api();
    let key = format!("order-{}", nonce());
    let request = json!({ "name": WF, "version": 1, "input": { "x": 1 }, "idempotencyKey": key });
    let first = api.start_workflow_request(&request);
    let again = api.start_workflow_request(&request);
    assert_eq!(
        first, again,
        "a repeated start with the same key answers the first run"
    );
    let wf = api.workflow(&first);
    assert_eq!(wf["status"], "RUNNING", "{wf:#}");
    assert_eq!(
        wf["tasks"].as_array().map(Vec::len),
        Some(1),
        "the repeat scheduled nothing more: {wf:#}"
    );

    let other = api.start_workflow_request(
        &json!({ "name": WF, "version": 1, "input": { "x": 1 }, "idempotencyKey": format!("{key}-2") }),
    );
    assert_ne!(other, first, "another key is another run");
    let unkeyed =
        api.start_workflow_request(&json!({ "name": WF, "version": 1, "input": { "x": 1 } }));
    assert_ne!(unkeyed, first);

    let long = "k".repeat(300);
    api.post_json(
        "/api/workflow",
        &json!({ "name": WF, "version": 1, "input": {}, "idempotencyKey": long }),
    )
    .assert_error_response(400, "an idempotency key over 256 bytes");
}

#[test]
fn execute_answers_when_the_workflow_finishes_reaches_a_task_or_the_wait_ends() {
    let server = setup();
    let api = server.api();
    let execute = |query: &str, input: Value| {
        api.post_json(
            &format!("/api/workflow/execute/{WF}/1?{query}"),
            &json!({ "input": input, "correlationId": "exec" }),
        )
    };
    let running = || -> Vec<Value> {
        api.get(&format!("/api/workflow/running/{WF}"))
            .expect_ok("running")
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
    };

    // Bad input is refused before anything starts.
    let before = running().len();
    execute("waitForSeconds=301", json!({})).assert_error_response(400, "a wait over the maximum");
    execute("waitForSeconds=soon", json!({}))
        .assert_error_response(400, "a wait that is no number");
    api.post_json("/api/workflow/execute/ops_wf/one", &json!({}))
        .assert_error_response(400, "a version that is no number");
    api.post_json("/api/workflow/execute/no_such_wf/1", &json!({}))
        .expect_status(404, "an unknown workflow");
    assert_eq!(running().len(), before, "refused executes started nothing");

    // The wait ends before the workflow does: the run as it stands, RUNNING at ops_a.
    let t0 = std::time::Instant::now();
    let run = execute("waitForSeconds=1", json!({ "x": 1 }))
        .expect_ok("execute for 1 s")
        .json();
    assert!(
        t0.elapsed() >= Duration::from_secs(1),
        "it waited the second"
    );
    assert_eq!(run["status"], "RUNNING", "{run:#}");
    assert_eq!(run["correlationId"], "exec");
    assert_eq!(run["input"]["x"], 1);
    assert_eq!(
        status_of(&run, "a").as_deref(),
        Some("SCHEDULED"),
        "{run:#}"
    );
    let first = run["workflowId"].as_str().expect("workflowId").to_owned();
    run_task(api, &first, "ops_a", json!({ "v": "a1" }));
    run_task(api, &first, "ops_b", json!({ "v": "b1" }));

    // A worker finishes the workflow while the execute waits: the answer is the finished run.
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            execute("waitForSeconds=20&requestId=req-7", json!({ "x": 2 }))
                .expect_ok("execute")
                .json()
        });
        let a = api.poll_until("ops_a", "exec-worker", WAIT);
        api.complete(&a, json!({ "v": "a2" }));
        let b = api.poll_until("ops_b", "exec-worker", WAIT);
        api.complete(&b, json!({ "v": "b2" }));
        let run = waiter.join().expect("the execute waiter");
        assert_eq!(run["status"], "COMPLETED", "{run:#}");
        assert_eq!(run["requestId"], "req-7");
        assert_eq!(run["output"], json!({ "a": "a2", "b": "b2" }));
        assert_eq!(run["workflowId"], a["workflowInstanceId"]);
    });

    // waitUntilTaskRef: the answer comes once ops_b is scheduled, with ops_a's output in it.
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            execute(
                "waitForSeconds=20&waitUntilTaskRef=nothing,b",
                json!({ "x": 3 }),
            )
            .expect_ok("execute until b")
            .json()
        });
        let a = api.poll_until("ops_a", "exec-worker", WAIT);
        api.complete(&a, json!({ "v": "a3" }));
        let run = waiter.join().expect("the execute waiter");
        assert_eq!(run["status"], "RUNNING", "{run:#}");
        assert_eq!(status_of(&run, "a").as_deref(), Some("COMPLETED"));
        assert_eq!(status_of(&run, "b").as_deref(), Some("SCHEDULED"));
        let id = run["workflowId"].as_str().expect("workflowId");
        run_task(api, id, "ops_b", json!({ "v": "b3" }));
        api.wait_workflow_status(id, "COMPLETED", WAIT);
    });
}
