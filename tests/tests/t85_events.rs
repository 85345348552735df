//! Event handlers end to end: the seed's handlers as written, on Baton's own queues (fed by an
//! EVENT task and by the publish endpoint), on NATS JetStream and on RabbitMQ; deduplication of
//! redelivered messages, also across a `kill -9`; SKIPPED records; bad handlers and payloads;
//! a condition that loops forever.

use harness::brokers::Broker;
use harness::{nonce, wait_for, wait_until, Api, Server};
use node::events::brokers::{BrokerConfig, Brokers, Provider};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const NATS: &str = "nats://127.0.0.1:4222";
const AMQP: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A node with both brokers enabled (started if they are not running).
fn server() -> Server {
    harness::brokers::ensure_running(Broker::Nats).expect("NATS JetStream on 127.0.0.1:4222");
    harness::brokers::ensure_running(Broker::RabbitMq).expect("RabbitMQ on 127.0.0.1:5672");
    Server::start_with_args(&["--nats".into(), NATS.into(), "--amqp".into(), AMQP.into()])
}

/// Publishes to a broker from the test (a client of its own, as a producer would be).
fn publish(provider: Provider, queue: &str, message_id: &str, payload: &Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let b = Brokers::new(BrokerConfig {
            nats_url: NATS.into(),
            amqp_url: AMQP.into(),
        });
        let body = serde_json::to_vec(payload).expect("json");
        b.publish(provider, queue, Some(message_id), &body)
            .await
            .expect("publish to the broker");
    });
}

fn fulfill_order_def(api: &Api) {
    api.register_task_defs(&[
        json!({"name": "pack_order", "retryCount": 0, "responseTimeoutSeconds": 60}),
    ]);
    api.register_workflow_def(&json!({
        "name": "fulfill_order", "version": 1, "schemaVersion": 2,
        "tasks": [{"name": "pack_order", "taskReferenceName": "pack", "type": "SIMPLE",
                   "inputParameters": {"orderId": "${workflow.input.orderId}"}}]
    }));
}

/// The seed's first handler, as written.
fn start_fulfillment_handler() -> Value {
    json!({
        "name": "start_fulfillment_on_order_ready",
        "event": "conductor:publish_order_event:order-status",
        "condition": "$.status == 'READY'",
        "actions": [{
            "action": "start_workflow",
            "start_workflow": {
                "name": "fulfill_order",
                "correlationId": "${orderId}",
                "input": {"orderId": "${orderId}", "items": "${items}"}
            }
        }],
        "active": true
    })
}

#[test]
fn an_event_task_starts_the_fulfillment_workflow_through_the_seed_handler() {
    let server = server();
    let api = server.api();
    fulfill_order_def(api);
    api.post_json("/api/event", &start_fulfillment_handler())
        .expect_ok("add handler");
    // The producer: a workflow whose EVENT task (sink `conductor`) publishes on
    // `conductor:publish_order_event:order-status`.
    api.register_workflow_def(&json!({
        "name": "publish_order_event", "version": 1, "schemaVersion": 2,
        "tasks": [{"name": "order_status", "taskReferenceName": "order-status", "type": "EVENT",
                   "sink": "conductor",
                   "inputParameters": {"orderId": "${workflow.input.orderId}",
                                       "status": "${workflow.input.status}",
                                       "items": "${workflow.input.items}"}}]
    }));

    let ready = format!("order-{}", nonce());
    let producer = api.start_workflow(
        "publish_order_event",
        &json!({"orderId": ready, "status": "READY", "items": [1, 2]}),
    );
    let done = api.wait_workflow_status(&producer, "COMPLETED", WAIT);
    let event_task = &done["tasks"][0];
    assert_eq!(event_task["status"], "COMPLETED", "{done:#}");
    assert_eq!(
        event_task["outputData"]["event_produced"],
        "conductor:publish_order_event:order-status"
    );

    let started = wait_for(WAIT, "fulfill_order started for the READY order", || {
        let found = api.correlated("fulfill_order", &ready);
        (!found.is_empty()).then_some(found)
    });
    assert_eq!(started.len(), 1, "{started:#?}");
    let wf = api.workflow(started[0]["workflowId"].as_str().expect("id"));
    assert_eq!(wf["input"]["orderId"], ready.as_str());
    assert_eq!(wf["input"]["items"], json!([1, 2]));
    assert_eq!(wf["correlationId"], ready.as_str());
    assert_eq!(wf["event"], "conductor:publish_order_event:order-status");
    // The message id is the EVENT task's id, and the event's name rides along.
    assert_eq!(
        wf["input"]["conductor.event.messageId"], event_task["taskId"],
        "{wf:#}"
    );

    // A status that is not READY: the condition is false, one SKIPPED record, nothing started.
    let waiting = format!("order-{}", nonce());
    let producer = api.start_workflow(
        "publish_order_event",
        &json!({"orderId": waiting, "status": "WAITING"}),
    );
    let done = api.wait_workflow_status(&producer, "COMPLETED", WAIT);
    let message_id = done["tasks"][0]["taskId"].as_str().expect("id").to_owned();
    let skipped = wait_for(WAIT, "a SKIPPED record", || {
        let mine: Vec<Value> = api
            .executions("start_fulfillment_on_order_ready")
            .into_iter()
            .filter(|e| e["messageId"] == message_id.as_str())
            .collect();
        (!mine.is_empty()).then_some(mine)
    });
    assert_eq!(skipped.len(), 1, "{skipped:#?}");
    assert_eq!(skipped[0]["status"], "SKIPPED");
    assert_eq!(skipped[0]["id"], format!("{message_id}_0"));
    assert!(api.correlated("fulfill_order", &waiting).is_empty());
}

#[test]
fn a_message_published_twice_starts_one_workflow_and_survives_a_kill_between_action_and_ack() {
    let mut server = server();
    fulfill_order_def(server.api());
    server
        .api()
        .post_json("/api/event", &start_fulfillment_handler())
        .expect_ok("add handler");
    let queue = "publish_order_event:order-status";

    // The same message id twice through the publish endpoint.
    let order = format!("order-{}", nonce());
    let id = format!("msg-{}", nonce());
    for _ in 0..2 {
        let answer = server
            .api()
            .post_json(
                &format!("/api/event/publish/{queue}?messageId={id}"),
                &json!({"orderId": order, "status": "READY"}),
            )
            .expect_ok("publish");
        assert_eq!(answer.id(), id);
    }
    wait_until(WAIT, "the order's workflow starts", || {
        !server.api().correlated("fulfill_order", &order).is_empty()
    });
    wait_until(WAIT, "both copies are consumed", || {
        server
            .api()
            .executions("start_fulfillment_on_order_ready")
            .iter()
            .filter(|e| e["messageId"] == id.as_str())
            .all(|e| e["status"] == "COMPLETED")
    });
    assert_eq!(server.api().correlated("fulfill_order", &order).len(), 1);

    // Many messages, and the node killed while it works on them: after the restart every
    // message has started exactly one workflow.
    let orders: Vec<String> = (0..40).map(|i| format!("bulk-{}-{i}", nonce())).collect();
    for (i, o) in orders.iter().enumerate() {
        server
            .api()
            .post_json(
                &format!("/api/event/publish/{queue}?messageId={o}"),
                &json!({"orderId": o, "status": "READY"}),
            )
            .expect_ok("publish");
        if i == 20 {
            server.kill9();
            server.restart();
        }
    }
    for o in &orders {
        wait_until(WAIT, &format!("a workflow for {o}"), || {
            !server.api().correlated("fulfill_order", o).is_empty()
        });
    }
    // Let every message drain, then count again.
    wait_until(WAIT, "every message consumed", || {
        let done = server.api().executions("start_fulfillment_on_order_ready");
        orders.iter().all(|o| {
            done.iter()
                .any(|e| e["messageId"] == o.as_str() && e["status"] == "COMPLETED")
        })
    });
    for o in &orders {
        assert_eq!(
            server.api().correlated("fulfill_order", o).len(),
            1,
            "exactly one workflow for {o}"
        );
    }
}

/// A workflow that waits for a payment, and the seed's two handlers on `event`.
fn payment_setup(api: &Api, event: &str) {
    api.register_workflow_def(&json!({
        "name": "await_payment", "version": 1, "schemaVersion": 2,
        "tasks": [{"name": "wait_for_payment", "taskReferenceName": "wait_for_payment",
                   "type": "WAIT"}]
    }));
    for h in [
        json!({
            "name": "complete_payment_wait",
            "event": event,
            "condition": "$.result == 'PAID'",
            "actions": [{"action": "complete_task",
                         "complete_task": {"workflowId": "${workflowId}",
                                           "taskRefName": "wait_for_payment",
                                           "output": {"paid": "${amount}"}}}],
            "active": true
        }),
        json!({
            "name": "fail_payment_wait",
            "event": event,
            "condition": "$.result == 'DECLINED'",
            "actions": [{"action": "fail_task",
                         "fail_task": {"taskId": "${taskId}",
                                       "reasonForIncompletion": "${reason}",
                                       "output": {"declined": true}}}],
            "active": true
        }),
    ] {
        api.post_json("/api/event", &h).expect_ok("add handler");
    }
}

fn payment_round(api: &Api, provider: Provider, queue: &str) {
    let paid = api.start_workflow("await_payment", &json!({}));
    let declined = api.start_workflow("await_payment", &json!({}));
    let wf = api.workflow(&declined);
    let task_id = wf["tasks"][0]["taskId"]
        .as_str()
        .expect("task id")
        .to_owned();
    publish(
        provider,
        queue,
        &format!("pay-{}", nonce()),
        &json!({"workflowId": paid, "result": "PAID", "amount": 42}),
    );
    // The same broker message delivered twice (a producer retry): one completion.
    let declined_msg = format!("decline-{}", nonce());
    for _ in 0..2 {
        publish(
            provider,
            queue,
            &declined_msg,
            &json!({"taskId": task_id, "result": "DECLINED", "reason": "card declined"}),
        );
    }
    let done = api.wait_workflow_status(&paid, "COMPLETED", WAIT);
    assert_eq!(done["tasks"][0]["outputData"]["paid"], 42, "{done:#}");
    let failed = api.wait_workflow_status(&declined, "FAILED", WAIT);
    let task = &failed["tasks"][0];
    assert_eq!(task["status"], "FAILED", "{failed:#}");
    assert_eq!(task["reasonForIncompletion"], "card declined");
    assert_eq!(task["outputData"]["declined"], true);
}

#[test]
fn payment_waits_complete_and_fail_from_nats_jetstream() {
    let server = server();
    payment_setup(server.api(), "nats:payment-events");
    payment_round(server.api(), Provider::Nats, "payment-events");
}

#[test]
fn payment_waits_complete_and_fail_from_a_rabbitmq_queue() {
    let server = server();
    payment_setup(server.api(), "amqp_queue:payment-events");
    payment_round(server.api(), Provider::AmqpQueue, "payment-events");
}

#[test]
fn malformed_handlers_and_payloads_get_clear_errors_and_change_nothing() {
    let server = Server::start();
    let api = server.api();
    let ok = start_fulfillment_handler();
    let with = |patch: Value| {
        let mut h = ok.clone();
        for (k, v) in patch.as_object().expect("object") {
            h[k] = v.clone();
        }
        h
    };
    let cases = [
        (with(json!({"name": ""})), "Missing event handler name"),
        (with(json!({"event": "no-colon"})), "provider:queue"),
        (
            with(json!({"event": "kafka:orders"})),
            "unknown event provider 'kafka'",
        ),
        // This node runs without --nats: the provider is disabled.
        (with(json!({"event": "nats:orders"})), "not enabled"),
        (with(json!({"actions": []})), "at least one action"),
        (with(json!({"condition": "$.status == "})), "condition"),
        (
            with(json!({"evaluatorType": "python"})),
            "evaluatorType 'python'",
        ),
        (
            with(
                json!({"actions": [{"action": "complete_task", "complete_task": {"output": {}}}]}),
            ),
            "needs taskId, or workflowId and taskRefName",
        ),
        (
            with(json!({"actions": [{"action": "start_workflow"}]})),
            "has no start_workflow details",
        ),
    ];
    for (handler, want) in cases {
        let reply = api.post_json("/api/event", &handler);
        reply.assert_error_response(400, want);
    }
    let unknown_action = with(json!({"actions": [{"action": "launch_rocket"}]}));
    api.post_json("/api/event", &unknown_action)
        .expect_status(400, "unknown action type");
    assert_eq!(
        api.get("/api/event").expect_ok("list").json(),
        json!([]),
        "nothing was stored"
    );

    // Names: unique on POST; PUT and DELETE need an existing one.
    api.post_json("/api/event", &ok).expect_ok("add");
    api.post_json("/api/event", &ok)
        .assert_error_response(409, "already exists");
    api.put_json("/api/event", &with(json!({"name": "nope"})))
        .assert_error_response(404, "not found");
    api.delete("/api/event/nope")
        .assert_error_response(404, "not found");
    // `active` defaults to false; activeOnly (default true) hides inactive handlers.
    let mut inactive = with(json!({"name": "inactive_one"}));
    inactive.as_object_mut().expect("object").remove("active");
    api.post_json("/api/event", &inactive)
        .expect_ok("add inactive");
    let event = "conductor:publish_order_event:order-status";
    let active = api
        .get(&format!("/api/event/{event}"))
        .expect_ok("get")
        .json();
    assert_eq!(active.as_array().map(Vec::len), Some(1), "{active:#}");
    let all = api
        .get(&format!("/api/event/{event}?activeOnly=false"))
        .expect_ok("get")
        .json();
    assert_eq!(all.as_array().map(Vec::len), Some(2), "{all:#}");
    api.delete("/api/event/inactive_one").expect_ok("delete");

    // Payloads: not JSON, or too large.
    api.post_raw("/api/event/publish/q", "{not json", "application/json")
        .expect_status(400, "malformed payload");
    let big = "x".repeat(proto::limits::PAYLOAD_BYTES_MAX + 10);
    api.post_json("/api/event/publish/q", &json!({ "big": big }))
        .assert_error_response(413, "a payload over the limit");
}

#[test]
fn a_condition_that_loops_forever_is_stopped_and_the_node_stays_healthy() {
    let server = Server::start();
    let api = server.api();
    fulfill_order_def(api);
    let mut looping = start_fulfillment_handler();
    looping["name"] = json!("looping");
    looping["event"] = json!("conductor:loop-q");
    looping["condition"] = json!("while (true) {} ; true");
    api.post_json("/api/event", &looping)
        .expect_ok("a looping condition parses");
    let mut fine = start_fulfillment_handler();
    fine["event"] = json!("conductor:loop-q");
    api.post_json("/api/event", &fine).expect_ok("add");

    let order = format!("order-{}", nonce());
    let id = api
        .post_json(
            "/api/event/publish/loop-q",
            &json!({"orderId": order, "status": "READY"}),
        )
        .expect_ok("publish")
        .id();
    let failed = wait_for(WAIT, "the looping condition's record", || {
        api.executions("looping")
            .into_iter()
            .find(|e| e["messageId"] == id.as_str())
    });
    assert_eq!(failed["status"], "FAILED", "{failed:#}");
    assert!(
        failed["output"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("stopped")),
        "{failed:#}"
    );
    // The other handler of the same event still ran, and the node answers.
    wait_until(WAIT, "the other handler's workflow", || {
        !api.correlated("fulfill_order", &order).is_empty()
    });
    api.get("/health").expect_ok("health");
}

/// The node aborts (as `kill -9`) right after an action ran and before its record and the
/// broker's ack: the restarted node gets the message again and starts nothing twice.
fn killed_between_action_and_ack(provider: Option<Provider>) {
    let marker_path = harness::arm_failpoint("event-after-action");
    let mut server = server();
    fulfill_order_def(server.api());
    let mut handler = start_fulfillment_handler();
    let queue = format!("orders-{}", nonce());
    let event = match provider {
        Some(p) => format!("{}:{queue}", p.name()),
        None => format!("conductor:{queue}"),
    };
    handler["name"] = json!(format!("crash_{}", nonce()));
    handler["event"] = json!(event);
    server
        .api()
        .post_json("/api/event", &handler)
        .expect_ok("add handler");
    let order = format!("order-{}", nonce());
    let payload = json!({"orderId": order, "status": "READY"});
    let id = format!("crash-{}", nonce());
    match provider {
        Some(p) => publish(p, &queue, &id, &payload),
        None => {
            server
                .api()
                .post_json(
                    &format!("/api/event/publish/{queue}?messageId={id}"),
                    &payload,
                )
                .expect_ok("publish");
        }
    }
    let status = server.wait_exit(WAIT);
    assert!(
        !status.success(),
        "the failpoint aborts the node: {status:?}"
    );
    assert!(marker_path.exists(), "the failpoint fired");
    server.restart();
    let name = handler["name"].as_str().expect("name").to_owned();
    wait_until(
        WAIT,
        "the redelivered message is recorded COMPLETED",
        || {
            server
                .api()
                .executions(&name)
                .iter()
                .any(|e| e["messageId"] == id.as_str() && e["status"] == "COMPLETED")
        },
    );
    assert_eq!(
        server.api().correlated("fulfill_order", &order).len(),
        1,
        "one workflow although the action ran twice"
    );
    let _ = std::fs::remove_file(&marker_path);
}

#[test]
fn a_node_killed_between_action_and_ack_starts_one_workflow_from_its_own_queue() {
    killed_between_action_and_ack(None);
}

#[test]
fn a_node_killed_between_action_and_ack_starts_one_workflow_from_rabbitmq() {
    killed_between_action_and_ack(Some(Provider::AmqpQueue));
}

#[test]
fn a_broker_consumer_moves_with_its_partitions_leadership() {
    harness::brokers::ensure_running(Broker::Nats).expect("NATS JetStream on 127.0.0.1:4222");
    // nextest runs each test in its own process: the variable reaches only this test's nodes.
    std::env::set_var("BATON_NATS", NATS);
    let mut c = harness::cluster::Cluster::start(3);
    let api = c.api(1);
    fulfill_order_def(&api);
    let subject = format!("orders-moving-{}", nonce());
    let event = format!("nats:{subject}");
    let mut handler = start_fulfillment_handler();
    handler["event"] = json!(event);
    api.post_json("/api/event", &handler)
        .expect_ok("add handler");
    let order = |i: usize| format!("moving-{subject}-{i}");
    let send = |i: usize| {
        publish(
            Provider::Nats,
            &subject,
            &format!("{subject}-{i}"),
            &json!({"orderId": order(i), "status": "READY"}),
        )
    };
    send(0);
    wait_until(WAIT, "the first message's workflow", || {
        !api.correlated("fulfill_order", &order(0)).is_empty()
    });

    // The consumer runs on the leader of the partition the event hashes to: kill that node.
    let survivor = c.kill_leader_of_key(&event);
    let api = c.api(survivor);
    for i in 1..=4 {
        send(i);
    }
    for i in 0..=4 {
        wait_until(WAIT, &format!("a workflow for message {i}"), || {
            !api.correlated("fulfill_order", &order(i)).is_empty()
        });
        assert_eq!(api.correlated("fulfill_order", &order(i)).len(), 1);
    }
}

#[test]
fn conditions_see_inline_json_expanded_and_actions_expand_it_when_asked() {
    let server = Server::start();
    let api = server.api();
    fulfill_order_def(api);
    api.post_json(
        "/api/event",
        &json!({
            "name": "inline", "event": "conductor:inline-q", "active": true,
            "condition": "$.body.status == 'READY'",
            "actions": [{"action": "start_workflow", "expandInlineJSON": true,
                         "start_workflow": {"name": "fulfill_order",
                                            "correlationId": "${body.orderId}"}}]
        }),
    )
    .expect_ok("add handler");
    let order = format!("inline-{}", nonce());
    let inner = json!({"orderId": order, "status": "READY"}).to_string();
    // The sender's W3C trace context rides with the event to its execution records.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let id = api
        .post_with_headers(
            "/api/event/publish/inline-q",
            &json!({ "body": inner }).to_string(),
            &[(
                "traceparent".into(),
                format!("00-{trace}-00f067aa0ba902b7-01"),
            )],
        )
        .expect_ok("publish")
        .id();
    wait_until(WAIT, "the workflow named by the inline JSON", || {
        !api.correlated("fulfill_order", &order).is_empty()
    });
    // The action's execution record is finished in a write after the start it made.
    let record = || {
        api.executions("inline")
            .into_iter()
            .find(|e| e["messageId"] == id.as_str())
            .expect("the message's record")
    };
    wait_until(WAIT, "the action's execution record finished", || {
        record()["status"] != "IN_PROGRESS"
    });
    let record = record();
    assert_eq!(record["status"], "COMPLETED", "{record:#}");
    assert_eq!(record["output"]["traceId"], trace, "{record:#}");
}
