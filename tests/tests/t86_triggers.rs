//! Webhooks and cron schedules: signed deliveries (bad signature 401, stale timestamp refused,
//! a replay acts once, secret rotation), and a schedule every 2 s that keeps firing once per
//! tick while its partition's leader is killed.

use harness::cluster::Cluster;
use harness::{nonce, wait_for, wait_until, Api, Server};
use node::service::triggers::sign;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const WAIT: Duration = Duration::from_secs(30);
const OLD_SECRET: &str = "old-secret-0123456789";
const NEW_SECRET: &str = "new-secret-9876543210";

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// POSTs a delivery with the given timestamp and signature headers.
fn deliver(
    api: &Api,
    hook: &str,
    body: &str,
    ts: Option<i64>,
    sig: Option<String>,
) -> harness::Reply {
    let mut headers: Vec<(String, String)> = Vec::new();
    if let Some(ts) = ts {
        headers.push(("X-Baton-Timestamp".into(), ts.to_string()));
    }
    if let Some(sig) = sig {
        headers.push(("X-Baton-Signature".into(), sig));
    }
    api.post_with_headers(&format!("/api/webhook/{hook}"), body, &headers)
}

/// A workflow that finishes by itself (no worker needed).
fn instant_workflow(api: &Api, name: &str) {
    api.register_workflow_def(&json!({
        "name": name, "version": 1, "schemaVersion": 2,
        "tasks": [{"name": "note", "taskReferenceName": "note", "type": "SET_VARIABLE",
                   "inputParameters": {"at": "${workflow.input._scheduledTime}"}}]
    }));
}

#[test]
fn webhooks_check_signature_and_timestamp_and_act_once_per_delivery() {
    let server = Server::start();
    let api = server.api();
    instant_workflow(api, "on_order");
    api.post_json(
        "/api/metadata/webhook",
        &json!({"name": "orders", "secrets": [OLD_SECRET, NEW_SECRET]}),
    )
    .expect_ok("add webhook");
    api.post_json(
        "/api/event",
        &json!({
            "name": "order_hook", "event": "webhook:orders", "active": true,
            "actions": [{"action": "start_workflow",
                         "start_workflow": {"name": "on_order", "correlationId": "${orderId}"}}]
        }),
    )
    .expect_ok("add handler");
    // Secrets are never read back.
    let listed = api.get("/api/metadata/webhook").expect_ok("list").json();
    assert_eq!(listed[0]["secrets"], json!(["***", "***"]), "{listed:#}");

    let order = format!("o-{}", nonce());
    let body = json!({"orderId": order}).to_string();
    let now = unix_now();
    let ts = now.to_string();

    deliver(
        api,
        "orders",
        &body,
        Some(now),
        Some(sign("wrong-secret-xxxxxxxx", &ts, "", body.as_bytes())),
    )
    .assert_error_response(401, "signature does not match");
    deliver(api, "orders", &body, Some(now), None).assert_error_response(401, "x-baton-signature");
    deliver(
        api,
        "orders",
        &body,
        None,
        Some(sign(NEW_SECRET, &ts, "", body.as_bytes())),
    )
    .assert_error_response(401, "x-baton-timestamp");
    let stale = now - 400;
    deliver(
        api,
        "orders",
        &body,
        Some(stale),
        Some(sign(NEW_SECRET, &stale.to_string(), "", body.as_bytes())),
    )
    .assert_error_response(401, "away from this node's clock");
    // A body changed after signing.
    deliver(
        api,
        "orders",
        &body.replace(&order, "tampered"),
        Some(now),
        Some(sign(NEW_SECRET, &ts, "", body.as_bytes())),
    )
    .assert_error_response(401, "signature does not match");
    deliver(
        api,
        "nope",
        &body,
        Some(now),
        Some(sign(NEW_SECRET, &ts, "", body.as_bytes())),
    )
    .assert_error_response(404, "No such webhook");
    assert!(
        api.correlated("on_order", &order).is_empty(),
        "nothing refused acted"
    );

    // Signed with the new secret: accepted. The same delivery replayed: acknowledged, dropped.
    let sig = sign(NEW_SECRET, &ts, "", body.as_bytes());
    let first = deliver(api, "orders", &body, Some(now), Some(sig.clone()))
        .expect_ok("a signed delivery")
        .json();
    assert_eq!(first["duplicate"], false, "{first:#}");
    let again = deliver(api, "orders", &body, Some(now), Some(sig))
        .expect_ok("a replay")
        .json();
    assert_eq!(again["duplicate"], true, "{again:#}");
    assert_eq!(again["messageId"], first["messageId"]);
    // The old secret still works during rotation (another order, so it is not a replay).
    let order2 = format!("o-{}", nonce());
    let body2 = json!({"orderId": order2}).to_string();
    deliver(
        api,
        "orders",
        &body2,
        Some(now),
        Some(sign(OLD_SECRET, &ts, "", body2.as_bytes())),
    )
    .expect_ok("signed with the old secret");

    wait_until(WAIT, "both orders' workflows", || {
        !api.correlated("on_order", &order).is_empty()
            && !api.correlated("on_order", &order2).is_empty()
    });
    assert_eq!(
        api.correlated("on_order", &order).len(),
        1,
        "the replay acted once"
    );

    // Bad definitions change nothing.
    api.post_json(
        "/api/metadata/webhook",
        &json!({"name": "weak", "secrets": ["short"]}),
    )
    .assert_error_response(400, "16 or more characters");
    api.post_json(
        "/api/metadata/webhook",
        &json!({"name": "", "secrets": [NEW_SECRET]}),
    )
    .assert_error_response(400, "name cannot be empty");
}

#[test]
fn bad_schedules_are_refused() {
    let server = Server::start();
    let api = server.api();
    instant_workflow(api, "tick");
    let base = json!({"name": "s", "cronExpression": "*/2 * * * * *",
                      "startWorkflowRequest": {"name": "tick"}});
    let with = |k: &str, v: Value| {
        let mut s = base.clone();
        s[k] = v;
        s
    };
    for (s, want) in [
        (
            with("cronExpression", json!("every minute")),
            "cronExpression",
        ),
        (
            with("zoneId", json!("Mars/Olympus")),
            "not an IANA time zone",
        ),
        (
            with("startWorkflowRequest", json!({"name": "missing"})),
            "No such workflow",
        ),
        (with("name", json!("")), "name cannot be empty"),
    ] {
        let status = if want == "No such workflow" { 404 } else { 400 };
        api.post_json("/api/scheduler/schedules", &s)
            .assert_error_response(status, want);
    }
    assert_eq!(
        api.get("/api/scheduler/schedules").expect_ok("list").json(),
        json!([])
    );
    api.get("/api/scheduler/schedules/s")
        .assert_error_response(404, "No such schedule");
}

#[test]
fn a_schedule_every_two_seconds_fires_once_per_tick_while_its_leader_is_killed() {
    let mut c = Cluster::start(3);
    let api = c.api(1);
    instant_workflow(&api, "tick");
    let name = format!("every2s{}", nonce());
    let correlation = format!("cron-{}", nonce());
    api.post_json(
        "/api/scheduler/schedules",
        &json!({"name": name, "cronExpression": "*/2 * * * * *",
                "startWorkflowRequest": {"name": "tick", "correlationId": correlation}}),
    )
    .expect_ok("add schedule");

    let ticks = |api: &Api| -> Vec<i64> {
        api.correlated("tick", &correlation)
            .iter()
            .map(|w| {
                let id = w["workflowId"].as_str().expect("id");
                api.workflow(id)["input"]["_scheduledTime"]
                    .as_i64()
                    .expect("_scheduledTime")
            })
            .collect()
    };
    wait_until(WAIT, "two ticks", || ticks(&api).len() >= 2);

    // The schedule runs on the leader of the partition its name hashes to.
    let killed_at = unix_now() * 1000;
    let survivor = c.kill_leader_of_key(&format!("schedule:{name}"));
    let api = c.api(survivor);
    let after: Vec<i64> = wait_for(WAIT, "four ticks after the kill", || {
        let t = ticks(&api);
        (t.iter().filter(|t| **t > killed_at).count() >= 4).then_some(t)
    });
    let unique: BTreeSet<i64> = after.iter().copied().collect();
    assert_eq!(unique.len(), after.len(), "a tick fired twice: {after:?}");
    let (first, last) = (
        *unique.first().expect("ticks"),
        *unique.last().expect("ticks"),
    );
    let expected: BTreeSet<i64> = (0..=(last - first) / 2000)
        .map(|i| first + i * 2000)
        .collect();
    assert_eq!(unique, expected, "every 2 s tick fired once, none skipped");
    // Paused, it stops; deleted, it is gone.
    api.put_empty(&format!("/api/scheduler/schedules/{name}/pause"))
        .expect_ok("pause");
    api.delete(&format!("/api/scheduler/schedules/{name}"))
        .expect_ok("delete");
}
