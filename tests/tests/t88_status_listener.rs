//! The workflow status listener end to end: a definition with `workflowStatusListenerEnabled`
//! and `workflowStatusListenerSink` publishes each workflow's end (COMPLETED, FAILED,
//! TERMINATED) as its summary on Baton's own queues and on NATS JetStream, where an event
//! handler records it by starting a workflow; a sink into an unknown or disabled provider is
//! refused at registration; a node that dies before publishing publishes at recovery.

use harness::brokers::Broker;
use harness::{nonce, wait_for, Api, Server};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const NATS: &str = "nats://127.0.0.1:4222";

/// A workflow of one worker task, `listened_task`, that publishes its end to `sink`.
fn listened_def(api: &Api, name: &str, sink: &str) {
    api.register_task_defs(&[
        json!({"name": "listened_task", "retryCount": 0, "responseTimeoutSeconds": 60}),
        json!({"name": "seen_task", "retryCount": 0, "responseTimeoutSeconds": 60}),
    ]);
    api.register_workflow_def(&json!({
        "name": name, "version": 1, "schemaVersion": 2,
        "workflowStatusListenerEnabled": true,
        "workflowStatusListenerSink": sink,
        "tasks": [{"name": "listened_task", "taskReferenceName": "work", "type": "SIMPLE"}]
    }));
}

/// A handler on `event` that records each end it receives as a `status_seen` workflow,
/// correlated by the ended workflow's id.
fn recorder(api: &Api, event: &str) {
    api.register_workflow_def(&json!({
        "name": "status_seen", "version": 1, "schemaVersion": 2,
        "tasks": [{"name": "seen_task", "taskReferenceName": "seen", "type": "SIMPLE"}]
    }));
    api.post_json(
        "/api/event",
        &json!({
            "name": format!("record_ends_{}", nonce()),
            "event": event,
            "actions": [{
                "action": "start_workflow",
                "start_workflow": {
                    "name": "status_seen",
                    "correlationId": "${workflowId}",
                    "input": {"status": "${status}", "workflowType": "${workflowType}",
                              "output": "${output}", "reason": "${reasonForIncompletion}"}
                }
            }],
            "active": true
        }),
    )
    .expect_ok("add the recorder handler");
}

/// Works the started workflow's one task to `status` (COMPLETED or FAILED).
fn finish_task(api: &Api, id: &str, status: &str) {
    let task = api.poll_until("listened_task", "w1", WAIT);
    assert_eq!(task["workflowInstanceId"], id);
    api.post_json(
        "/api/tasks",
        &json!({"workflowInstanceId": id, "taskId": task["taskId"], "status": status,
                "outputData": {"done": status}, "reasonForIncompletion": "worker said so"}),
    )
    .expect_ok("task result");
}

/// The one recorded end of workflow `id`.
fn recorded(api: &Api, id: &str) -> Value {
    let seen = wait_for(WAIT, &format!("the end of {id} recorded"), || {
        let found = api.correlated("status_seen", id);
        (!found.is_empty()).then_some(found)
    });
    assert_eq!(seen.len(), 1, "one record per end: {seen:#?}");
    api.workflow(seen[0]["workflowId"].as_str().expect("id"))["input"].clone()
}

fn each_end_is_published(api: &Api, name: &str) {
    let completed = api.start_workflow(name, &json!({}));
    finish_task(api, &completed, "COMPLETED");
    api.wait_workflow_status(&completed, "COMPLETED", WAIT);
    let input = recorded(api, &completed);
    assert_eq!(input["status"], "COMPLETED", "{input:#}");
    assert_eq!(input["workflowType"], name);
    assert_eq!(input["output"], r#"{"done":"COMPLETED"}"#);

    let failed = api.start_workflow(name, &json!({}));
    finish_task(api, &failed, "FAILED");
    api.wait_workflow_status(&failed, "FAILED", WAIT);
    assert_eq!(recorded(api, &failed)["status"], "FAILED");

    let terminated = api.start_workflow(name, &json!({}));
    api.delete(&format!("/api/workflow/{terminated}?reason=stopped"))
        .expect_ok("terminate");
    let input = recorded(api, &terminated);
    assert_eq!(input["status"], "TERMINATED", "{input:#}");
    assert_eq!(input["reason"], "stopped");
}

#[test]
fn ends_are_published_on_batons_own_queue() {
    let server = Server::start();
    let api = server.api();
    let queue = format!("conductor:ends-{}", nonce());
    recorder(api, &queue);
    listened_def(api, "listened_own", &queue);
    each_end_is_published(api, "listened_own");
}

#[test]
fn ends_are_published_on_nats_jetstream() {
    harness::brokers::ensure_running(Broker::Nats).expect("NATS JetStream on 127.0.0.1:4222");
    let server = Server::start_with_args(&["--nats".into(), NATS.into()]);
    let api = server.api();
    let subject = format!("nats:ends-{}", nonce());
    recorder(api, &subject);
    listened_def(api, "listened_nats", &subject);
    each_end_is_published(api, "listened_nats");
}

#[test]
fn a_sink_into_an_unknown_or_disabled_provider_is_refused_and_nothing_is_stored() {
    let server = Server::start();
    let api = server.api();
    for (sink, says) in [
        ("kafka:ends", "kafka"),
        ("amqp:ends", "amqp"),
        ("ends", "provider:queue"),
    ] {
        let name = format!("refused_{}", nonce());
        let reply = api.post_json(
            "/api/metadata/workflow",
            &json!({
                "name": name, "version": 1, "schemaVersion": 2,
                "workflowStatusListenerEnabled": true,
                "workflowStatusListenerSink": sink,
                "tasks": [{"name": "t", "taskReferenceName": "t", "type": "SIMPLE"}]
            }),
        );
        reply.assert_error_response(400, sink);
        let body = reply.json();
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains("workflowStatusListenerSink"), "{body:#}");
        assert!(message.contains(says), "{body:#}");
        api.get(&format!("/api/metadata/workflow/{name}"))
            .expect_status(404, "nothing stored");
    }
}

#[test]
fn a_node_that_dies_before_publishing_publishes_at_recovery() {
    let marker_path = harness::arm_failpoint("status-publish");
    let mut server = Server::start();
    let queue = format!("conductor:ends-{}", nonce());
    recorder(server.api(), &queue);
    listened_def(server.api(), "listened_crash", &queue);
    let id = server.api().start_workflow("listened_crash", &json!({}));
    // The node may abort before it answers: the end is committed before it is published.
    let _ = server
        .api()
        .try_delete(&format!("/api/workflow/{id}?reason=stopped"));
    let status = server.wait_exit(WAIT);
    assert!(
        !status.success(),
        "the failpoint aborts the node: {status:?}"
    );
    assert!(marker_path.exists(), "the failpoint fired");
    server.restart();
    assert_eq!(server.api().workflow_status(&id), "TERMINATED");
    let input = recorded(server.api(), &id);
    assert_eq!(input["status"], "TERMINATED");
    let _ = std::fs::remove_file(&marker_path);
}
