//! Response timeouts (`simple_workflow_with_resp_time_out_integration_test.json`), a worker's
//! `IN_PROGRESS` with `callbackAfterSeconds`, and WAIT timers (`duration`) across a `kill -9`.

use std::time::{Duration, Instant};

use harness::{attempts, millis, status_of, task_by_ref, task_def, task_result, Server};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn polled_task_never_updated_times_out_and_is_retried() {
    let server = Server::start();
    let api = server.api();
    api.register_spec_task_defs();
    // The spec's task_rt has responseTimeoutSeconds 10; 2 s shows the same behaviour five times faster.
    // The fixture takes task_rt's definition from the registry, so overriding it here is enough.
    api.register_task_defs(&[task_def(
        "task_rt",
        json!({ "responseTimeoutSeconds": 2, "retryDelaySeconds": 0 }),
    )]);
    api.register_fixture("simple_workflow_with_resp_time_out_integration_test.json");

    let id = api.start_workflow("RTOWF", &json!({ "param1": "p1", "param2": "p2" }));
    let first = api.poll_until("task_rt", "silent-worker", WAIT);
    assert_eq!(first["workflowInstanceId"], id.as_str());

    // Never updated: TIMED_OUT after the response timeout, and a retry is SCHEDULED.
    let wf = harness::wait_for(
        WAIT,
        "the first task_rt attempt to time out and be retried",
        || {
            let wf = api.workflow(&id);
            (attempts(&wf, "t1").len() >= 2).then_some(wf)
        },
    );
    assert_eq!(
        wf["status"], "RUNNING",
        "a response timeout retries, it does not end the workflow: {wf:#}"
    );
    let chain = attempts(&wf, "t1");
    assert_eq!(chain.len(), 2, "{wf:#}");
    assert_eq!(chain[0]["taskId"], first["taskId"]);
    assert_eq!(chain[0]["status"], "TIMED_OUT");
    assert_eq!(chain[1]["status"], "SCHEDULED");
    assert_eq!(chain[1]["retriedTaskId"], first["taskId"]);
    assert_eq!(chain[1]["retryCount"].as_u64(), Some(1));
    let waited = millis(chain[0], "endTime") - millis(chain[0], "startTime");
    assert!(
        waited >= 2000,
        "timed out {waited} ms after the poll, before the 2 s response timeout"
    );
    assert!(task_by_ref(&wf, "t2").is_none(), "t2 waits for t1: {wf:#}");

    // The silent worker wakes up late: its result for the timed-out attempt is ignored.
    let late = api.update_task(&task_result(
        &first,
        "COMPLETED",
        json!({ "op": "too late" }),
        None,
        None,
    ));
    assert!(
        late.status < 500,
        "a late result is not a server error: {late:?}"
    );
    let wf = api.workflow(&id);
    assert_eq!(
        attempts(&wf, "t1")[0]["status"],
        "TIMED_OUT",
        "terminal states absorb late results"
    );
    assert!(
        task_by_ref(&wf, "t2").is_none(),
        "a late result on a timed-out attempt must not advance the workflow"
    );

    // The retry is handed out and completes the normal way.
    let retry = api.poll_until("task_rt", "worker", WAIT);
    assert_eq!(retry["taskId"], chain[1]["taskId"]);
    api.complete(&retry, json!({ "op": "retried" }));
    let t2 = api.poll_until("integration_task_2", "worker", WAIT);
    assert_eq!(t2["inputData"]["tp2"], "retried");
    api.complete(&t2, json!({ "uuid": "u" }));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(wf["output"]["o3"], "retried");
}

#[test]
fn in_progress_with_callback_requeues_the_same_task_after_the_delay() {
    let server = Server::start();
    let api = server.api();
    // responseTimeoutSeconds 1 < callbackAfterSeconds 3: the response timeout is counted on top of the
    // callback delay, so the task must not time out while it waits to be handed out again.
    api.register_task_defs(&[
        task_def(
            "callback_task",
            json!({ "retryCount": 0, "responseTimeoutSeconds": 1 }),
        ),
        task_def("after_callback", json!({ "retryCount": 0 })),
    ]);
    api.register_workflow_def(&json!({
        "name": "callback_wf",
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@harness.com",
        "tasks": [
            { "name": "callback_task", "taskReferenceName": "cb", "type": "SIMPLE", "inputParameters": {} },
            { "name": "after_callback", "taskReferenceName": "next", "type": "SIMPLE",
              "inputParameters": { "progress": "${cb.output.progress}" } },
        ],
    }));

    let id = api.start_workflow("callback_wf", &json!({}));
    let task = api.poll_until("callback_task", "w", WAIT);
    let sent = Instant::now();
    api.update_task(&task_result(
        &task,
        "IN_PROGRESS",
        json!({ "progress": 1 }),
        None,
        Some(3),
    ))
    .expect_ok("IN_PROGRESS with callbackAfterSeconds");

    let wf = api.workflow(&id);
    let row = task_by_ref(&wf, "cb").expect("cb");
    assert_eq!(row["status"], "IN_PROGRESS", "{wf:#}");
    assert_eq!(
        row["outputData"]["progress"], 1,
        "an IN_PROGRESS update keeps its output: {row:#}"
    );
    assert!(
        api.poll("callback_task", "w").is_none(),
        "the task is not handed out again before its callback delay"
    );

    let again = api.poll_until("callback_task", "w", WAIT);
    let waited = sent.elapsed();
    assert_eq!(
        again["taskId"], task["taskId"],
        "the same attempt comes back, not a retry"
    );
    assert!(
        waited >= Duration::from_millis(2900),
        "handed out again after {waited:?}, before the 3 s callback delay"
    );
    let wf = api.workflow(&id);
    assert_eq!(attempts(&wf, "cb").len(), 1, "no retry was created: {wf:#}");
    assert_eq!(wf["status"], "RUNNING");

    api.complete(&again, json!({ "progress": 2 }));
    let next = api.poll_until("after_callback", "w", WAIT);
    assert_eq!(next["inputData"]["progress"], 2);
    api.complete(&next, json!({}));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(status_of(&wf, "cb").as_deref(), Some("COMPLETED"));
}

/// A WAIT with a `duration` completes by itself, and its timer survives a `kill -9`: the due time
/// is part of the committed task (`waitTimeout`), so the restarted node arms it again.
#[test]
fn wait_with_a_duration_completes_by_itself_even_across_a_kill() {
    let mut server = Server::start();
    let wait = |r: &str, secs: u64| {
        json!({ "name": r, "taskReferenceName": r, "type": "WAIT",
                "inputParameters": { "duration": format!("{secs} seconds") } })
    };
    server.api().register_workflow_def(&json!({
        "name": "wait_twice", "version": 1,
        "tasks": [wait("short", 1), wait("long", 3)],
    }));
    let id = server.api().start_workflow("wait_twice", &json!({}));

    let wf = harness::wait_for(WAIT, "the 1 s WAIT to complete by itself", || {
        let wf = server.api().workflow(&id);
        (task_by_ref(&wf, "long").is_some()).then_some(wf)
    });
    let short = task_by_ref(&wf, "short").expect("short ran");
    assert_eq!(short["status"], "COMPLETED", "{wf:#}");
    let due = millis(short, "waitTimeout");
    assert_eq!(due, millis(short, "startTime") + 1_000, "{wf:#}");
    assert!(
        millis(short, "endTime") >= due,
        "fired before it was due: {wf:#}"
    );

    server.kill9();
    server.restart();
    let wf = server
        .api()
        .wait_workflow_status(&id, "COMPLETED", Duration::from_secs(30));
    let long = task_by_ref(&wf, "long").expect("long ran");
    assert!(
        millis(long, "endTime") >= millis(long, "waitTimeout"),
        "fired before it was due: {wf:#}"
    );
    assert_eq!(long["status"], "COMPLETED", "{wf:#}");
}
