//! Serverless Workflow `listen` end to end: an instance waits for a CloudEvent that another
//! instance emits (through Baton's own queue of the event's type), events sent to one instance
//! are consumed once each and in order (also through a `foreach` whose iterations wait, the
//! events that come meanwhile queued), and a listen whose filter names no event type hears
//! events of every type.

use std::time::Duration;

use harness::{wait_for, Api, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

/// Registers a document of namespace `test` with the given tasks (YAML, indented as under
/// `do:`); answers the status and body.
fn register(api: &Api, name: &str, tasks: &str) -> (u16, Value) {
    api.register_dsl(&format!(
        "document:\n  dsl: '1.0.3'\n  namespace: test\n  name: {name}\n  version: '1.0.0'\ndo:\n{tasks}"
    ))
}

fn start(api: &Api, name: &str, input: &Value) -> String {
    let started = api
        .post_json(
            &format!("/api/dsl/workflows/test/{name}/1.0.0/instances"),
            input,
        )
        .expect_ok("start")
        .json();
    started["id"].as_str().expect("id").to_owned()
}

fn view(api: &Api, id: &str) -> Value {
    api.get(&format!("/api/dsl/instances/{id}"))
        .expect_ok("view")
        .json()
}

/// Waits for the instance to reach `phase`; answers its view then.
fn reaches(api: &Api, id: &str, phase: &str) -> Value {
    wait_for(WAIT, &format!("the instance to be {phase}"), || {
        let view = view(api, id);
        (view["phase"] == phase).then_some(view)
    })
}

const LISTENER: &str = "  - hear:\n      listen:\n        to:\n          one:\n            with:\n              type: com.example.order.placed\n              data: ${ .total > 100 }\n  - note:\n      set:\n        big: ${ .[0].total }\n";

const EMITTER: &str = "  - tell:\n      emit:\n        event:\n          with:\n            source: https://shop.example.com\n            type: com.example.order.placed\n            data:\n              total: ${ .total }\n";

#[test]
fn an_event_one_instance_emits_resumes_another_that_listens() {
    let server = Server::start();
    let api = server.api();
    for (name, tasks) in [("listener", LISTENER), ("emitter", EMITTER)] {
        let (status, body) = register(api, name, tasks);
        assert_eq!(status, 200, "{body}");
    }
    let listener = start(api, "listener", &json!({}));
    let waiting = reaches(api, &listener, "waiting");
    assert_eq!(waiting["tasks"][0]["phase"], "waiting", "{waiting:#}");
    // A small order does not pass the filter; a big one does.
    for total in [5, 250] {
        let emitter = start(api, "emitter", &json!({"total": total}));
        reaches(api, &emitter, "completed");
    }
    let done = reaches(api, &listener, "completed");
    assert_eq!(done["output"], json!({"big": 250}), "{done:#}");
}

#[test]
fn events_sent_to_an_instance_are_consumed_once_each_in_order() {
    let server = Server::start();
    let api = server.api();
    let tasks = "  - collect:\n      listen:\n        to:\n          any:\n            - with:\n                type: com.example.reading\n          until: ${ length >= 2 }\n        read: envelope\n      output:\n        as: ${ map(.data.v) }\n";
    let (status, body) = register(api, "collector", tasks);
    assert_eq!(status, 200, "{body}");
    let id = start(api, "collector", &json!({}));
    reaches(api, &id, "waiting");
    let path = format!("/api/dsl/instances/{id}/events");
    let event = |id: &str, v: u64| {
        json!({"specversion": "1.0", "id": id, "source": "test", "type": "com.example.reading",
               "data": {"v": v}})
    };
    for (event_id, v) in [("r1", 1), ("r1", 1), ("r2", 2)] {
        api.post_json(&path, &event(event_id, v))
            .expect_ok("deliver an event");
    }
    let done = reaches(api, &id, "completed");
    assert_eq!(done["output"], json!([1, 2]), "{done:#}");
    let refused = api.try_post_json(&path, &json!({"data": 1})).expect("POST");
    assert_eq!(
        refused.status, 400,
        "an event without id and type: {}",
        refused.body
    );
}

#[test]
fn a_listens_foreach_processes_events_one_at_a_time_in_order() {
    let server = Server::start();
    let api = server.api();
    let tasks = "  - collect:\n      listen:\n        to:\n          any:\n            - with:\n                type: com.example.reading\n          until: ${ length >= 2 }\n      foreach:\n        do:\n          - pause:\n              wait:\n                milliseconds: 300\n          - double:\n              set:\n                v: ${ .v * 2 }\n        output:\n          as: ${ .v }\n";
    let (status, body) = register(api, "processor", tasks);
    assert_eq!(status, 200, "{body}");
    let id = start(api, "processor", &json!({}));
    reaches(api, &id, "waiting");
    let path = format!("/api/dsl/instances/{id}/events");
    for (event_id, v) in [("p1", 1), ("p2", 2)] {
        let event = json!({"specversion": "1.0", "id": event_id, "source": "test",
                           "type": "com.example.reading", "data": {"v": v}});
        api.post_json(&path, &event).expect_ok("deliver an event");
    }
    let done = reaches(api, &id, "completed");
    assert_eq!(done["output"], json!([2, 4]), "{done:#}");
    let pauses = done["tasks"].as_array().map_or(0, |tasks| {
        tasks.iter().filter(|t| t["name"] == "pause").count()
    });
    assert_eq!(pauses, 2, "one iteration per event: {done:#}");
}

/// Emits an event of `type` from `source` (an `emit` through Baton's own queue of the type).
const TYPED_EMITTER: &str = "  - tell:\n      emit:\n        event:\n          with:\n            source: ${ .source }\n            type: ${ .type }\n            data:\n              n: ${ .n }\n";

#[test]
fn a_listen_that_names_no_event_type_hears_events_of_every_type() {
    let server = Server::start();
    let api = server.api();
    let tasks = "  - hear:\n      listen:\n        to:\n          any:\n            - with:\n                source: https://shop.example.com\n          until: ${ length >= 2 }\n        read: envelope\n      output:\n        as: ${ map(.type) | sort }\n";
    for (name, tasks) in [("untyped", tasks), ("emitter", TYPED_EMITTER)] {
        let (status, body) = register(api, name, tasks);
        assert_eq!(status, 200, "{body}");
    }
    let id = start(api, "untyped", &json!({}));
    reaches(api, &id, "waiting");
    let events = [
        ("https://shop.example.com", "com.example.order.placed", 1),
        (
            "https://elsewhere.example.com",
            "com.example.order.placed",
            2,
        ),
        ("https://shop.example.com", "com.example.parcel.sent", 3),
    ];
    for (source, kind, n) in events {
        let input = json!({"source": source, "type": kind, "n": n});
        let emitter = start(api, "emitter", &input);
        reaches(api, &emitter, "completed");
    }
    let done = reaches(api, &id, "completed");
    assert_eq!(
        done["output"],
        json!(["com.example.order.placed", "com.example.parcel.sent"]),
        "two types, the other source's event left: {done:#}"
    );
}
