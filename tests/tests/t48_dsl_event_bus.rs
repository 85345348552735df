//! The Serverless Workflow event bus on a broker (`baton server --dsl-events`): on NATS
//! JetStream and on a RabbitMQ topic exchange, an event one instance emits resumes another
//! that listens, and an event a producer publishes on the broker starts an instance of a
//! document whose `schedule.on` accepts it; on the exchange a filter that names no type hears
//! every type; a type that cannot travel on the bus, and on NATS a filter that names no type,
//! are refused at registration with their pointers.

use harness::brokers::Broker;
use harness::{nonce, wait_until, Api, Server};
use node::events::brokers::{BrokerConfig, Brokers, Provider};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const NATS: &str = "nats://127.0.0.1:4222";
const AMQP: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

fn server(broker: Broker, bus: &str) -> Server {
    harness::brokers::ensure_running(broker).expect("the broker runs");
    let (flag, url) = match broker {
        Broker::Nats => ("--nats", NATS),
        Broker::RabbitMq => ("--amqp", AMQP),
    };
    let args = [flag, url, "--dsl-events", bus].map(String::from);
    Server::start_with_args(&args)
}

/// Registers a document of namespace `test`, version 1.0.0, from its body (YAML after the
/// header); answers the status and body.
fn register(api: &Api, name: &str, body: &str) -> (u16, Value) {
    api.register_dsl(&format!(
        "document:\n  dsl: '1.0.3'\n  namespace: test\n  name: {name}\n  version: '1.0.0'\n{body}"
    ))
}

fn registered(api: &Api, name: &str, body: &str) {
    let (status, reply) = register(api, name, body);
    assert_eq!(status, 200, "{reply}");
}

fn listener(event_type: &str) -> String {
    format!("do:\n  - hear:\n      listen:\n        to:\n          one:\n            with:\n              type: {event_type}\n  - note:\n      set:\n        total: ${{ .[0].total }}\n")
}

fn emitter(event_type: &str) -> String {
    format!("do:\n  - tell:\n      emit:\n        event:\n          with:\n            source: https://shop.example.com\n            type: {event_type}\n            data:\n              total: ${{ .total }}\n")
}

fn scheduled(event_type: &str) -> String {
    format!("schedule:\n  on:\n    one:\n      with:\n        type: {event_type}\ndo:\n  - note:\n      set:\n        heard: ${{ .[0].data.order }}\n")
}

/// Waits until the node consumes the bus's queue of `event`, so that what is published from
/// now on reaches it (an exchange drops what no bound queue takes).
fn consumed(server: &Server, event: &str) {
    wait_until(WAIT, &format!("the node to consume {event}"), || {
        let log = server.log_tail();
        log.lines()
            .any(|l| l.contains("consuming") && l.contains(event))
    });
}

/// Publishes a CloudEvent on the broker, as a producer outside Baton would.
fn publish(provider: Provider, queue: &str, event: &Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let b = Brokers::new(BrokerConfig {
            nats_url: NATS.into(),
            amqp_url: AMQP.into(),
        });
        let body = serde_json::to_vec(event).expect("json");
        let id = event["id"].as_str().expect("an id");
        b.publish(provider, queue, Some(id), &body)
            .await
            .expect("publish to the broker");
    });
}

fn cloud_event(event_type: &str, data: Value) -> Value {
    json!({"specversion": "1.0", "id": format!("e-{}", nonce()), "source": "https://producer.example.com",
           "type": event_type, "data": data})
}

/// The emitted event resumes the listener; the published one starts the scheduled document.
fn round_trip(server: &Server, bus_event: impl Fn(&str) -> String, provider: Provider) {
    let api = server.api();
    let (placed, paid) = (
        format!("com.example.order.placed.n{}", nonce()),
        format!("com.example.order.paid.n{}", nonce()),
    );
    registered(api, "listener", &listener(&placed));
    registered(api, "emitter", &emitter(&placed));
    registered(api, "on-paid", &scheduled(&paid));
    consumed(server, &bus_event(&placed));
    consumed(server, &bus_event(&paid));

    let listening = api.start_dsl("test/listener/1.0.0", &json!({}));
    wait_until(WAIT, "the listener to wait", || {
        api.get(&format!("/api/dsl/instances/{listening}")).json()["phase"] == "waiting"
    });
    let emitting = api.start_dsl("test/emitter/1.0.0", &json!({"total": 120}));
    let emitted = api.wait_dsl_ended(&emitting, WAIT);
    assert_eq!(emitted["phase"], "completed", "{emitted:#}");
    let heard = api.wait_dsl_ended(&listening, WAIT);
    assert_eq!(heard["phase"], "completed", "{heard:#}");
    assert_eq!(heard["output"]["total"], 120, "{heard:#}");

    let (_, queue) = bus_event(&paid)
        .split_once(':')
        .map(|(p, q)| (p.to_owned(), q.to_owned()))
        .expect("provider:queue");
    publish(
        provider,
        &queue,
        &cloud_event(&paid, json!({"order": "o-7"})),
    );
    let started = harness::wait_for(WAIT, "an instance of on-paid", || {
        let search = "/api/workflow/search?start=0&size=10&query=workflowType%20IN%20%28on-paid%29";
        let found = api.get(search).expect_status(200, "search").json();
        let first = found["results"].as_array()?.first()?.clone();
        first["workflowId"].as_str().map(str::to_owned)
    });
    let ended = api.wait_dsl_ended(&started, WAIT);
    assert_eq!(ended["output"]["heard"], "o-7", "{ended:#}");
}

#[test]
fn events_travel_on_nats_between_instances_and_from_producers() {
    let server = server(Broker::Nats, "nats");
    round_trip(&server, |t| format!("nats:{t}"), Provider::Nats);
}

#[test]
fn events_travel_on_a_rabbitmq_exchange_between_instances_and_from_producers() {
    let exchange = format!("baton.dsl.n{}", nonce());
    let server = server(Broker::RabbitMq, &format!("amqp_exchange:{exchange}"));
    let event = |t: &str| format!("amqp_exchange:{exchange}?routingKey={t}");
    round_trip(&server, event, Provider::AmqpExchange);
}

#[test]
fn a_type_that_cannot_travel_on_the_bus_is_refused_with_its_pointer() {
    let server = server(Broker::Nats, "nats");
    let (status, body) = register(server.api(), "bad-type", &listener("'order placed'"));
    assert_eq!(status, 400, "{body}");
    let text = body.to_string();
    assert!(
        text.contains("/do/0/hear/listen/to/one/with/type"),
        "{body:#}"
    );
    let untyped = "do:\n  - hear:\n      listen:\n        to:\n          any:\n            - with:\n                source: https://shop.example.com\n";
    let (status, body) = register(server.api(), "untyped", untyped);
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["instance"], "/do/0/hear/listen/to/any/0/with",
        "{body}"
    );
    assert!(
        body.to_string().contains("--dsl-events conductor"),
        "{body}"
    );
}

#[test]
fn a_filter_that_names_no_type_hears_every_type_on_a_rabbitmq_exchange() {
    let exchange = format!("baton.dsl.n{}", nonce());
    let server = server(Broker::RabbitMq, &format!("amqp_exchange:{exchange}"));
    let api = server.api();
    let (placed, sent) = (
        format!("com.example.order.placed.n{}", nonce()),
        format!("com.example.parcel.sent.n{}", nonce()),
    );
    let untyped = "do:\n  - hear:\n      listen:\n        to:\n          any:\n            - with:\n                source: https://producer.example.com\n          until: ${ length >= 2 }\n        read: envelope\n      output:\n        as: ${ map(.type) | sort }\n";
    registered(api, "untyped", untyped);
    // A listener of one of the types: its events reach the untyped one through two queues.
    registered(api, "typed", &listener(&placed));
    let event = |t: &str| format!("amqp_exchange:{exchange}?routingKey={t}");
    consumed(&server, &event("#"));
    consumed(&server, &event(&placed));
    let untyped = api.start_dsl("test/untyped/1.0.0", &json!({}));
    let typed = api.start_dsl("test/typed/1.0.0", &json!({}));
    for id in [&untyped, &typed] {
        wait_until(WAIT, "the listeners to wait", || {
            api.get(&format!("/api/dsl/instances/{id}")).json()["phase"] == "waiting"
        });
    }
    let mut elsewhere = cloud_event(&sent, json!({"total": 1}));
    elsewhere["source"] = json!("https://elsewhere.example.com");
    let queue = |t: &str| format!("{exchange}?routingKey={t}");
    publish(Provider::AmqpExchange, &queue(&sent), &elsewhere);
    let order = cloud_event(&placed, json!({"total": 7}));
    publish(Provider::AmqpExchange, &queue(&placed), &order);
    let parcel = cloud_event(&sent, json!({"total": 8}));
    publish(Provider::AmqpExchange, &queue(&sent), &parcel);
    let heard = api.wait_dsl_ended(&untyped, WAIT);
    assert_eq!(heard["phase"], "completed", "{heard:#}");
    assert_eq!(
        heard["output"],
        json!([placed, sent]),
        "each once, the other source's left: {heard:#}"
    );
    let typed = api.wait_dsl_ended(&typed, WAIT);
    assert_eq!(typed["output"]["total"], 7, "{typed:#}");
}
