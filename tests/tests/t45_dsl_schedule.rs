//! Serverless Workflow `schedule` end to end: `every` and `cron` start instances at their
//! times and stop once the version is deleted, `after` starts each instance once the one before
//! has ended and the delay has passed, and `schedule.on` starts one instance per accepted event
//! (a message delivered again starts none) with the event as its input, or, when it gathers
//! (`all` with `correlate`), one per group of correlated events, across a restart of the node;
//! a filter that names no type hears events of every type.
//! Schedules this runtime cannot run are refused at registration with their pointers.

use std::time::Duration;

use harness::{wait_for, Api, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(40);

/// Registers a document of namespace `test` with `schedule` and `tasks` (YAML, indented as
/// under their keys); answers the status and body.
fn register(api: &Api, name: &str, schedule: &str, tasks: &str) -> (u16, Value) {
    api.register_dsl(&format!(
        "document:\n  dsl: '1.0.3'\n  namespace: test\n  name: {name}\n  version: '1.0.0'\nschedule:\n{schedule}do:\n{tasks}"
    ))
}

fn registered(api: &Api, name: &str, schedule: &str, tasks: &str) {
    let (status, body) = register(api, name, schedule, tasks);
    assert_eq!(status, 200, "{name}: {body}");
}

const NOTHING: &str = "  - note:\n      set:\n        done: true\n";

/// The instances of document `name` (its workflow type) in the DSL's terms, oldest first.
fn instances(api: &Api, name: &str) -> Vec<Value> {
    let found = api
        .get(&format!(
            "/api/workflow/search?start=0&size=1000&query=workflowType%20IN%20%28{name}%29"
        ))
        .expect_status(200, "search")
        .json();
    let ids = found["results"].as_array().cloned().unwrap_or_default();
    let mut all: Vec<Value> = ids
        .iter()
        .map(|w| {
            let id = w["workflowId"].as_str().unwrap_or_default();
            api.get(&format!("/api/dsl/instances/{id}"))
                .expect_ok("view")
                .json()
        })
        .collect();
    all.sort_by_key(|v| v["startedAt"].as_i64().unwrap_or_default());
    all
}

/// Waits until document `name` has at least `n` completed instances; answers those.
fn completed_at_least(api: &Api, name: &str, n: usize) -> Vec<Value> {
    wait_for(WAIT, &format!("{n} completed instances of {name}"), || {
        let mut all = instances(api, name);
        all.retain(|v| v["phase"] == "completed");
        (all.len() >= n).then_some(all)
    })
}

#[test]
fn every_and_cron_start_instances_until_the_version_is_deleted() {
    let server = Server::start();
    let api = server.api();
    registered(api, "ticker", "  every:\n    seconds: 1\n", NOTHING);
    registered(api, "clock", "  cron: '* * * * * *'\n", NOTHING);
    completed_at_least(api, "ticker", 2);
    let clock = completed_at_least(api, "clock", 2).len();
    api.delete("/api/dsl/workflows/test/ticker/1.0.0")
        .expect_ok("delete the ticker");
    let ticks = instances(api, "ticker").len();
    // Three more seconds by the clock, and the ticker started at most the one it was starting.
    completed_at_least(api, "clock", clock + 3);
    let after = instances(api, "ticker").len();
    assert!(after <= ticks + 1, "{ticks} ticks, then {after}");
}

#[test]
fn after_starts_each_instance_once_the_one_before_ended_and_the_delay_passed() {
    let server = Server::start();
    let api = server.api();
    let tasks = "  - pause:\n      wait:\n        milliseconds: 300\n";
    registered(api, "relay", "  after:\n    seconds: 1\n", tasks);
    let all = completed_at_least(api, "relay", 3);
    for pair in all.windows(2) {
        let ended = pair[0]["endedAt"].as_i64().expect("endedAt");
        let next = pair[1]["startedAt"].as_i64().expect("startedAt");
        assert!(next >= ended + 1_000, "started {next}, ended {ended}");
    }
}

const ON_LOW: &str = "  on:\n    one:\n      with:\n        type: com.example.heartbeat.low\n        source: https://ward\\.example\\.com/.*\n";

const CALL_NURSE: &str =
    "  - call:\n      set:\n        patient: ${ $workflow.input[0].data.patient }\n";

const ON_PAID_AND_PACKED: &str = "  on:
    all:
      - with:
          type: com.example.order.paid
        correlate:
          order:
            from: ${ .data.order }
      - with:
          type: com.example.order.packed
        correlate:
          order:
            from: ${ .data.order }
";

const SHIP: &str = "  - ship:
      set:
        order: ${ $workflow.input[0].data.order }
        events: ${ [$workflow.input[].type] | sort }
";

/// Publishes an order event of `kind` (`paid`, `packed`) to Baton's own queue under `id`.
fn publish_order(api: &Api, id: &str, kind: &str, order: u64) {
    let kind = format!("com.example.order.{kind}");
    let event = json!({"specversion": "1.0", "id": id, "source": "https://shop.example.com",
        "type": kind, "data": {"order": order}});
    let path = format!("/api/event/publish/{kind}?messageId={id}");
    api.post_json(&path, &event).expect_ok("publish");
}

const ON_THE_SHOP: &str =
    "  on:\n    one:\n      with:\n        source: https://shop.example.com\n";

const NOTE_KIND: &str = "  - note:\n      set:\n        kind: ${ $workflow.input[0].type }\n";

#[test]
fn a_schedule_whose_filter_names_no_type_starts_on_events_of_every_type() {
    let server = Server::start();
    let api = server.api();
    registered(api, "any-kind", ON_THE_SHOP, NOTE_KIND);
    let elsewhere = json!({"specversion": "1.0", "id": "other-1", "type": "com.example.order.paid",
        "source": "https://elsewhere.example.com", "data": {"order": 1}});
    let path = "/api/event/publish/com.example.order.paid?messageId=other-1";
    api.post_json(path, &elsewhere).expect_ok("publish");
    publish_order(api, "paid-1", "paid", 1);
    publish_order(api, "packed-1", "packed", 1);
    let done = completed_at_least(api, "any-kind", 2);
    let mut kinds: Vec<&str> = done
        .iter()
        .filter_map(|v| v["output"]["kind"].as_str())
        .collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        ["com.example.order.packed", "com.example.order.paid"]
    );
    assert_eq!(instances(api, "any-kind").len(), 2, "none from elsewhere");
}

#[test]
fn a_gathering_schedule_starts_one_instance_per_group_of_correlated_events() {
    let mut server = Server::start();
    registered(server.api(), "shipper", ON_PAID_AND_PACKED, SHIP);
    publish_order(server.api(), "paid-7", "paid", 7);
    publish_order(server.api(), "paid-8", "paid", 8);
    publish_order(server.api(), "paid-8", "paid", 8);
    publish_order(server.api(), "packed-8", "packed", 8);
    let first = completed_at_least(server.api(), "shipper", 1);
    assert_eq!(first[0]["output"]["order"], 8, "{first:?}");
    let kinds = json!(["com.example.order.packed", "com.example.order.paid"]);
    assert_eq!(first[0]["output"]["events"], kinds);
    // What order 7 gathered so far outlives the node.
    server.restart();
    publish_order(server.api(), "packed-7", "packed", 7);
    let all = completed_at_least(server.api(), "shipper", 2);
    assert_eq!(all[1]["output"]["order"], 7, "{all:?}");
    // The message delivered again joined no group: order 8 has no second 'paid' waiting.
    publish_order(server.api(), "packed-8b", "packed", 8);
    publish_order(server.api(), "paid-9", "paid", 9);
    publish_order(server.api(), "packed-9", "packed", 9);
    let all = completed_at_least(server.api(), "shipper", 3);
    let orders: Vec<&Value> = all.iter().map(|v| &v["output"]["order"]).collect();
    assert_eq!(orders, [&json!(8), &json!(7), &json!(9)], "{all:?}");
}

/// Publishes a CloudEvent of the heartbeat type to Baton's own queue under `id`.
fn publish(api: &Api, id: &str, source: &str, patient: &str) {
    let event = json!({"specversion": "1.0", "id": id, "source": source,
        "type": "com.example.heartbeat.low", "data": {"patient": patient}});
    let path = format!("/api/event/publish/com.example.heartbeat.low?messageId={id}");
    api.post_json(&path, &event).expect_ok("publish");
}

#[test]
fn an_accepted_event_starts_one_instance_with_the_event_as_its_input() {
    let server = Server::start();
    let api = server.api();
    registered(api, "nurse", ON_LOW, CALL_NURSE);
    let ward = "https://ward.example.com/3";
    publish(api, "beat-1", ward, "ada");
    publish(api, "beat-1", ward, "ada");
    completed_at_least(api, "nurse", 1);
    publish(api, "beat-2", "https://elsewhere.example.com", "bob");
    publish(api, "beat-3", ward, "cy");
    let all = completed_at_least(api, "nurse", 2);
    // Each started by its own event, whole: the message's id and the patient it names.
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut started: Vec<(String, String)> = all
        .iter()
        .map(|view| {
            (
                text(&view["input"][0]["id"]),
                text(&view["output"]["patient"]),
            )
        })
        .collect();
    started.sort();
    let expected = [("beat-1", "ada"), ("beat-3", "cy")];
    assert_eq!(started, expected.map(|(m, p)| (m.to_owned(), p.to_owned())));
}

#[test]
fn schedules_this_runtime_cannot_run_are_refused_where_they_say_so() {
    let server = Server::start();
    let api = server.api();
    for (schedule, pointer) in [
        ("  cron: 'every day'\n", "/schedule/cron"),
        ("  every:\n    milliseconds: 10\n", "/schedule/every"),
        (
            "  on:\n    one:\n      with:\n        type: a\n        source: ${ error(1 }\n",
            "/schedule/on/one/with/source",
        ),
    ] {
        let (status, body) = register(api, "refused", schedule, NOTHING);
        assert_eq!(status, 400, "{schedule}: {body}");
        assert_eq!(body["instance"], pointer, "{body}");
    }
    let nothing = api.get("/api/dsl/workflows").expect_ok("list").json();
    assert_eq!(nothing, json!([]), "nothing is stored");
}
