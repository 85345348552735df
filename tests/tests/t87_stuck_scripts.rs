//! Scripts that QuickJS cannot stop from inside, and messages whose handling never finishes,
//! end to end: a condition stuck in a native built-in is killed with its script host, the node
//! stays healthy, the queue moves on, and the node still stops on SIGTERM within 5 s; a message
//! during whose handling the node crashes again and again ends as a dead letter.

use harness::{nonce, wait_for, wait_until, Api, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
/// The condition that kept a core busy for minutes when it ran inside the node.
const STUCK: &str = "Array.prototype.slice.call({length: 2**32-2})";
/// How long a node may take to stop on SIGTERM, whatever its scripts do.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

fn dead_letters(api: &Api) -> Vec<Value> {
    api.get("/api/admin/dead-letters")
        .expect_ok("dead letters")
        .json()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn workflow_def(api: &Api) {
    api.register_task_defs(&[json!({"name": "pack_order", "retryCount": 0})]);
    api.register_workflow_def(&json!({
        "name": "fulfill_order", "version": 1, "schemaVersion": 2,
        "tasks": [{"name": "pack_order", "taskReferenceName": "pack", "type": "SIMPLE",
                   "inputParameters": {"orderId": "${workflow.input.orderId}"}}]
    }));
}

/// A handler on `event` that starts `fulfill_order` for each order when `condition` holds.
fn handler(name: &str, event: &str, condition: &str) -> Value {
    json!({
        "name": name,
        "event": event,
        "condition": condition,
        "actions": [{
            "action": "start_workflow",
            "start_workflow": {"name": "fulfill_order", "correlationId": "${orderId}",
                               "input": {"orderId": "${orderId}"}}
        }],
        "active": true
    })
}

/// Child processes of `pid`, started by any of its threads (its script hosts).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Whether process `pid` is gone (or a zombie nobody waits for any more).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn a_condition_stuck_in_native_code_is_killed_and_the_node_stops_on_sigterm() {
    let mut server = Server::start();
    let api = server.api().clone();
    workflow_def(&api);
    let queue = format!("stuck-{}", nonce());
    let event = format!("conductor:{queue}");
    let stuck = format!("stuck_{}", nonce());
    let fine = format!("fine_{}", nonce());
    api.post_json("/api/event", &handler(&stuck, &event, STUCK))
        .expect_ok("the stuck condition parses");
    api.post_json("/api/event", &handler(&fine, &event, "$.status == 'READY'"))
        .expect_ok("a normal handler on the same queue");

    let bad_order = format!("bad-{}", nonce());
    let bad = api
        .post_json(
            &format!("/api/event/publish/{queue}"),
            &json!({"orderId": bad_order, "status": "STUCK"}),
        )
        .expect_ok("publish the first message")
        .id();
    let good_order = format!("good-{}", nonce());
    let good = api
        .post_json(
            &format!("/api/event/publish/{queue}"),
            &json!({"orderId": good_order, "status": "READY"}),
        )
        .expect_ok("publish the second message")
        .id();
    api.get("/health").expect_ok("health while the script runs");

    // The second message is handled: its normal condition held and its workflow started.
    wait_until(WAIT, "the second message's workflow", || {
        !api.correlated("fulfill_order", &good_order).is_empty()
    });
    // The stuck condition was stopped on both messages, and says so.
    for id in [&bad, &good] {
        let failed = wait_for(WAIT, "the stuck condition's record", || {
            api.executions(&stuck)
                .into_iter()
                .find(|e| e["messageId"] == id.as_str())
        });
        assert_eq!(failed["status"], "FAILED", "{failed:#}");
        let error = failed["output"]["error"].as_str().unwrap_or_default();
        assert!(error.contains("ran longer than 200 ms"), "{failed:#}");
    }
    assert!(
        api.correlated("fulfill_order", &bad_order).is_empty(),
        "the first message's normal condition did not hold"
    );
    wait_until(WAIT, "both messages consumed", || {
        api.executions(&fine).len() == 2
    });
    api.get("/health").expect_ok("health after");

    // SIGTERM while stuck scripts are running: a burst of messages keeps the hosts busy.
    for i in 0..20 {
        api.post_json(
            &format!("/api/event/publish/{queue}"),
            &json!({"orderId": format!("{bad_order}-{i}"), "status": "STUCK"}),
        )
        .expect_ok("publish");
    }
    let pid = server.pid().expect("the server runs");
    let hosts = wait_for(WAIT, "script hosts running", || {
        Some(children(pid)).filter(|c| !c.is_empty())
    });
    let (status, took) = server
        .terminate(SHUTDOWN_BOUND)
        .expect("the node stops within 5 s of SIGTERM");
    println!("stopped after {took:?} with {status}");
    assert!(status.success(), "a clean exit: {status}");
    wait_until(
        Duration::from_secs(5),
        "no script host outlives the node",
        || hosts.iter().all(|h| gone(*h)),
    );
}

#[test]
fn a_message_the_node_keeps_crashing_on_ends_as_a_dead_letter() {
    let marker_dir = tempfile::tempdir().expect("a directory for failpoint markers");
    let arm = |round: usize| {
        let marker = marker_dir.path().join(format!("crash-{round}"));
        harness::arm_failpoint_at("event-handling", &marker);
        marker
    };
    let mut marker = arm(0);
    let mut server = Server::start();
    let api = server.api().clone();
    workflow_def(&api);
    let queue = format!("crashing-{}", nonce());
    let name = format!("crashing_{}", nonce());
    api.post_json(
        "/api/event",
        &handler(&name, &format!("conductor:{queue}"), "$.status == 'READY'"),
    )
    .expect_ok("add handler");
    let order = format!("order-{}", nonce());
    let id = api
        .post_json(
            &format!("/api/event/publish/{queue}"),
            &json!({"orderId": order, "status": "READY"}),
        )
        .expect_ok("publish")
        .id();

    // Every start handles the message again and crashes during it, until the attempts run out.
    let attempts = proto::limits::EVENT_ATTEMPTS_MAX as usize;
    for round in 1..=attempts {
        let status = server.wait_exit(WAIT);
        assert!(
            !status.success(),
            "round {round}: the failpoint aborts the node"
        );
        assert!(marker.exists(), "round {round}: the failpoint fired");
        marker = arm(round);
        if round == attempts {
            // The marker exists: this start runs without a crash.
            std::fs::write(&marker, "inert").expect("write the marker");
            server.restart();
        } else {
            // It may crash before it answers /health.
            server.restart_unchecked();
        }
    }
    let letter = wait_for(WAIT, "the message's dead letter", || {
        dead_letters(&api)
            .into_iter()
            .find(|d| d["messageId"] == id.as_str())
    });
    println!("{letter:#}");
    assert_eq!(letter["attempts"], json!(attempts + 1), "{letter:#}");
    assert!(
        letter["reason"]
            .as_str()
            .is_some_and(|r| r.contains("did not finish")),
        "{letter:#}"
    );
    assert_eq!(letter["payload"]["orderId"], json!(order));
    assert!(
        api.correlated("fulfill_order", &order).is_empty(),
        "the message was never handled"
    );

    // The queue moves on, and the dead letter can be queued again, then is handled.
    let next = format!("order-{}", nonce());
    api.post_json(
        &format!("/api/event/publish/{queue}"),
        &json!({"orderId": next, "status": "READY"}),
    )
    .expect_ok("publish another");
    wait_until(WAIT, "the next message's workflow", || {
        !api.correlated("fulfill_order", &next).is_empty()
    });
    api.post_empty(&format!(
        "/api/admin/dead-letters/requeue?event=conductor:{queue}&messageId={id}"
    ))
    .expect_ok("requeue");
    wait_until(WAIT, "the requeued message's workflow", || {
        !api.correlated("fulfill_order", &order).is_empty()
    });
    assert!(dead_letters(&api)
        .iter()
        .all(|d| d["messageId"] != id.as_str()));
    api.delete(&format!(
        "/api/admin/dead-letters?event=conductor:{queue}&messageId={id}"
    ))
    .expect_status(404, "no dead letter any more");
    let started = Instant::now();
    let (status, took) = server.terminate(SHUTDOWN_BOUND).expect("stops");
    assert!(
        status.success(),
        "{status} after {took:?} ({:?})",
        started.elapsed()
    );
}
