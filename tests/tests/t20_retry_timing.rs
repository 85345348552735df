//! Retry timing: exponential backoff with a cap and jitter, and `totalTimeoutSeconds` cutting retries
//! short.
//!
//! These are the only pass/fail tests that look at times. They check the schedule the server recorded
//! (`scheduledTime` of each attempt, which for a retry is the failure time plus the computed delay),
//! with bounds wide enough for a worker that polls every few milliseconds on a loaded 2-core box.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use harness::{attempts, millis, task_def, Api, Server};
use serde_json::{json, Value};

/// Slack for the worker's poll loop and the HTTP round trips between a retry becoming due and the
/// failure of the previous attempt being recorded.
const TOLERANCE_MS: i64 = 250;
const JITTER_MS: i64 = 200;

fn one_task_workflow(name: &str, task: &str) -> Value {
    json!({
        "name": name,
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@harness.com",
        "tasks": [{ "name": task, "taskReferenceName": "only", "type": "SIMPLE", "inputParameters": {} }],
    })
}

/// A worker thread that fails every task of `task_type` as soon as it gets it, until stopped.
fn failing_worker(
    api: Api,
    task_type: &'static str,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match api.try_poll(task_type, "failing-worker") {
                Ok(Some(task)) => {
                    let result = harness::task_result(
                        &task,
                        "FAILED",
                        json!({}),
                        Some("always fails"),
                        None,
                    );
                    let reply = api
                        .try_update_task(&result)
                        .expect("update reaches the server");
                    assert!(reply.is_success(), "failure update refused: {reply:?}");
                }
                // Poll interval of a busy worker, not synchronisation.
                Ok(None) => thread::sleep(Duration::from_millis(5)),
                Err(e) => panic!("poll failed: {e:#}"),
            }
        }
    })
}

#[test]
fn exponential_backoff_is_capped_and_jittered() {
    let server = Server::start();
    let api = server.api();
    api.register_task_defs(&[task_def(
        "backoff_task",
        json!({
            "retryCount": 3,
            "retryLogic": "EXPONENTIAL_BACKOFF",
            "retryDelaySeconds": 1,
            "maxRetryDelaySeconds": 2,
            "backoffJitterMs": JITTER_MS,
            "responseTimeoutSeconds": 60,
        }),
    )]);
    api.register_workflow_def(&one_task_workflow("backoff_wf", "backoff_task"));

    let stop = Arc::new(AtomicBool::new(false));
    let worker = failing_worker(api.clone(), "backoff_task", stop.clone());
    let id = api.start_workflow("backoff_wf", &json!({}));
    let wf = api.wait_workflow_status(&id, "FAILED", Duration::from_secs(30));
    stop.store(true, Ordering::Relaxed);
    worker.join().expect("worker thread");

    let chain = attempts(&wf, "only");
    assert_eq!(chain.len(), 4, "the first attempt and 3 retries: {wf:#}");
    for (i, attempt) in chain.iter().enumerate() {
        assert_eq!(attempt["status"], "FAILED", "attempt {i}");
        assert_eq!(
            attempt["retryCount"].as_u64(),
            Some(i as u64),
            "attempt {i}"
        );
        if i > 0 {
            assert_eq!(
                attempt["retriedTaskId"],
                chain[i - 1]["taskId"],
                "attempt {i} chains to its predecessor"
            );
        }
        // No attempt is handed out before it is due.
        assert!(
            millis(attempt, "startTime") >= millis(attempt, "scheduledTime"),
            "attempt {i} started before its scheduledTime: {attempt:#}"
        );
    }

    // Delays: 1 s * 2^0 = 1 s, 1 s * 2^1 = 2 s, 1 s * 2^2 = 4 s capped to 2 s; each plus [0, 200] ms jitter.
    let expected_delays_ms = [1000, 2000, 2000];
    for (k, delay_ms) in expected_delays_ms.iter().enumerate() {
        let (prev, next) = (chain[k], chain[k + 1]);
        // The retry's scheduledTime is the failure time plus delay and jitter.
        let after_failure = millis(next, "scheduledTime") - millis(prev, "endTime");
        assert!(
            after_failure >= *delay_ms && after_failure <= delay_ms + JITTER_MS + TOLERANCE_MS,
            "retry {} scheduled {after_failure} ms after the failure; expected {delay_ms} ms + [0, {JITTER_MS}] ms",
            k + 1
        );
        let gap = millis(next, "scheduledTime") - millis(prev, "scheduledTime");
        assert!(
            gap >= *delay_ms && gap <= delay_ms + JITTER_MS + TOLERANCE_MS,
            "gap between attempts {k} and {} is {gap} ms; expected {delay_ms} ms + [0, {JITTER_MS}] ms (+{TOLERANCE_MS} ms)",
            k + 1
        );
    }
    let failed_refs = wf["failedReferenceTaskNames"]
        .as_array()
        .expect("failedReferenceTaskNames");
    assert!(failed_refs.contains(&json!("only")), "{wf:#}");
}

#[test]
fn total_timeout_ends_the_workflow_before_retries_run_out() {
    let server = Server::start();
    let api = server.api();
    // 10 retries 1 s apart would take over 10 s; totalTimeoutSeconds 3 must cut them short.
    let retry_count = 10;
    api.register_task_defs(&[task_def(
        "total_timeout_task",
        json!({
            "retryCount": retry_count,
            "retryLogic": "FIXED",
            "retryDelaySeconds": 1,
            "totalTimeoutSeconds": 3,
            "responseTimeoutSeconds": 60,
        }),
    )]);
    api.register_workflow_def(&one_task_workflow("total_timeout_wf", "total_timeout_task"));

    let stop = Arc::new(AtomicBool::new(false));
    let worker = failing_worker(api.clone(), "total_timeout_task", stop.clone());
    let id = api.start_workflow("total_timeout_wf", &json!({}));
    let wf = harness::wait_for(Duration::from_secs(30), "the workflow to end", || {
        let wf = api.workflow(&id);
        harness::is_terminal_workflow_status(wf["status"].as_str().unwrap_or_default())
            .then_some(wf)
    });
    stop.store(true, Ordering::Relaxed);
    worker.join().expect("worker thread");

    // FAILED when the last failure finds the budget spent; TIMED_OUT when the budget runs out while a
    // retry waits (both are correct: an exhausted budget fails the workflow, or times it out if the
    // task timed out).
    let status = wf["status"].as_str().unwrap_or_default();
    assert!(
        status == "FAILED" || status == "TIMED_OUT",
        "unexpected end: {wf:#}"
    );
    let chain = attempts(&wf, "only");
    assert!(
        chain.len() >= 2 && chain.len() < retry_count + 1,
        "retries start but do not run out: {} attempts in {wf:#}",
        chain.len()
    );
    let first_scheduled = millis(chain[0], "scheduledTime");
    for attempt in &chain {
        assert!(
            millis(attempt, "scheduledTime") - first_scheduled <= 3000 + 1000 + JITTER_MS,
            "no attempt is scheduled long after the 3 s budget: {attempt:#}"
        );
    }
    let ended = millis(&wf, "endTime");
    assert!(
        ended - first_scheduled < 3000 + 2000,
        "the workflow ends soon after the 3 s budget, not after all retries: ended {} ms after the first attempt",
        ended - first_scheduled
    );
    assert!(
        ended - first_scheduled >= 1000,
        "the workflow ran at least until the first retry: {} ms",
        ended - first_scheduled
    );
}
