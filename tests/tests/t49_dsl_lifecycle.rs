//! Serverless Workflow lifecycle CloudEvents (`baton server --dsl-lifecycle-sink`) end to end on
//! NATS JetStream: an instance's workflow and task events arrive in order, numbered without a
//! gap, with the spec's data; a node killed while the instance waits publishes, after its
//! restart, every event it had recorded and those that follow, none lost.

use harness::brokers::Broker;
use harness::{nonce, wait_until, Api, Server};
use node::events::brokers::{BrokerConfig, Brokers, Provider};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
const NATS: &str = "nats://127.0.0.1:4222";

const DOC: &str = "document:\n  dsl: '1.0.3'\n  namespace: shop\n  name: order\n  version: '1.0.0'\ndo:\n  - note:\n      set:\n        placed: true\n  - hear:\n      listen:\n        to:\n          one:\n            with:\n              type: com.example.go\n  - done:\n      set:\n        shipped: true\n";

/// A node publishing lifecycle events to a fresh NATS subject, and a consumer of it.
fn setup() -> (Server, mpsc::Receiver<Value>) {
    harness::brokers::ensure_running(Broker::Nats).expect("NATS JetStream on 127.0.0.1:4222");
    let subject = format!("baton.lifecycle.n{}", nonce());
    let events = consume(&subject);
    let sink = format!("nats:{subject}");
    let args = ["--nats", NATS, "--dsl-lifecycle-sink", &sink].map(String::from);
    let server = Server::start_with_args(&args);
    let (status, body) = server.api().register_dsl(DOC);
    assert_eq!(status, 200, "{body}");
    (server, events)
}

/// The events published on `subject`, from a consumer of the test's own, as a subscriber would.
fn consume(subject: &str) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let subject = subject.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let brokers = Brokers::new(BrokerConfig {
                nats_url: NATS.into(),
                ..BrokerConfig::default()
            });
            let mut consumer = brokers
                .consume(Provider::Nats, &subject)
                .await
                .expect("a consumer");
            let _ = ready_tx.send(());
            while let Ok(delivery) = consumer.next().await {
                let event: Value = serde_json::from_slice(&delivery.payload).expect("JSON");
                let _ = delivery.ack().await;
                if tx.send(event).is_err() {
                    return;
                }
            }
        });
    });
    ready_rx.recv_timeout(WAIT).expect("the consumer is ready");
    rx
}

/// Events received until one of type `last` for instance `id`, by id (a repeat once).
fn received_until(events: &mpsc::Receiver<Value>, id: &str, last: &str) -> BTreeMap<u64, Value> {
    let deadline = Instant::now() + WAIT;
    let mut by_seq = BTreeMap::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = events
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no {last} for {id} in time; got {by_seq:#?}"));
        let Some(seq) = event["id"]
            .as_str()
            .and_then(|i| i.strip_prefix(&format!("{id}:")))
        else {
            continue;
        };
        let seq: u64 = seq.parse().expect("a number");
        let done = event["type"] == last;
        by_seq.insert(seq, event);
        if done {
            return by_seq;
        }
    }
}

/// (type without its prefix and version, task pointer or "") of each event, in order.
fn kinds(events: &BTreeMap<u64, Value>) -> Vec<(String, String)> {
    events
        .values()
        .map(|e| {
            let kind = e["type"].as_str().unwrap_or_default();
            let kind = kind.trim_start_matches("io.serverlessworkflow.");
            let task = e["data"]["task"].as_str().unwrap_or_default();
            (kind.trim_end_matches(".v1").to_owned(), task.to_owned())
        })
        .collect()
}

fn expected() -> Vec<(String, String)> {
    let mut out = vec![("workflow.started".to_owned(), String::new())];
    for task in ["/do/0/note", "/do/1/hear", "/do/2/done"] {
        for kind in ["task.created", "task.started", "task.completed"] {
            out.push((kind.to_owned(), task.to_owned()));
            if task == "/do/1/hear" && kind != "task.created" {
                let what = if kind == "task.started" {
                    "started"
                } else {
                    "completed"
                };
                out.push((format!("workflow.correlation-{what}"), String::new()));
            }
        }
    }
    out.push(("workflow.completed".to_owned(), String::new()));
    out
}

fn deliver(api: &Api, id: &str) {
    let event = json!({"specversion": "1.0", "id": format!("go-{}", nonce()), "source": "test",
                       "type": "com.example.go", "data": {}});
    api.post_json(&format!("/api/dsl/instances/{id}/events"), &event)
        .expect_ok("deliver the event");
}

fn waits(api: &Api, id: &str) {
    wait_until(WAIT, "the instance to wait", || {
        api.get(&format!("/api/dsl/instances/{id}")).json()["phase"] == "waiting"
    });
}

#[test]
fn an_instance_publishes_its_workflow_and_task_events_in_order() {
    let (server, events) = setup();
    let api = server.api();
    let id = api.start_dsl("shop/order/1.0.0", &json!({}));
    waits(api, &id);
    deliver(api, &id);
    let ended = api.wait_dsl_ended(&id, WAIT);
    assert_eq!(ended["phase"], "completed", "{ended:#}");
    assert_eq!(ended["lifecycle"]["dropped"], 0, "{ended:#}");
    assert!(ended["lifecycle"]["pending"].is_u64(), "{ended:#}");

    let got = received_until(&events, &id, "io.serverlessworkflow.workflow.completed.v1");
    assert_eq!(kinds(&got), expected(), "{got:#?}");
    assert_eq!(
        got.keys().copied().collect::<Vec<_>>(),
        (0..13).collect::<Vec<_>>()
    );
    let started = &got[&0];
    assert_eq!(started["specversion"], "1.0");
    assert_eq!(started["source"], "/dsl/shop/order/1.0.0");
    assert_eq!(started["subject"], id.as_str());
    assert_eq!(started["data"]["name"], format!("order-{id}.shop").as_str());
    assert_eq!(
        started["data"]["definition"],
        json!({"namespace": "shop", "name": "order", "version": "1.0.0"})
    );
    assert!(started["data"]["startedAt"].is_string(), "{started:#}");
    let completed = &got[&12];
    assert_eq!(
        completed["data"]["output"], ended["output"],
        "{completed:#}"
    );
    assert_eq!(completed["data"]["output"], json!({"shipped": true}));
}

#[test]
fn events_recorded_before_a_kill_are_published_after_the_restart() {
    let (mut server, events) = setup();
    let id = server.api().start_dsl("shop/order/1.0.0", &json!({}));
    waits(server.api(), &id);
    server.kill9();
    server.restart();
    deliver(server.api(), &id);
    let ended = server.api().wait_dsl_ended(&id, WAIT);
    assert_eq!(ended["phase"], "completed", "{ended:#}");

    let got = received_until(&events, &id, "io.serverlessworkflow.workflow.completed.v1");
    assert_eq!(
        kinds(&got),
        expected(),
        "every event once at least: {got:#?}"
    );
}
