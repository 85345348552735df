//! Orkes' schema registry and `enforceSchema`, end to end: schemas registered, read, versioned,
//! refused when they are not JSON Schema, deleted, and kept across a restart; definitions that
//! enforce an unknown or non-JSON schema refused; a start whose input does not match refused
//! with the errors and nothing stored; a workflow whose output does not match failed; a task
//! whose input does not match failed when scheduled, and one whose worker's output does not
//! match failed and retried.

use std::time::Duration;

use harness::{status_of, task_def, wait_for, Api, Reply, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

/// Asserts that `reply` is a `status` whose message holds each of `want`.
fn refused(reply: Reply, status: u16, want: &[&str]) {
    reply.assert_error_response(status, want.first().copied().unwrap_or("refused"));
    let message = reply.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for w in want {
        assert!(message.contains(w), "{w:?} not in {message:?}");
    }
}

/// `order` needs an integer `id`; `receipt` a string `ok`.
fn register_schemas(api: &Api) {
    let schemas = json!([
        {"name": "s_order", "version": 1, "type": "JSON", "data": {
            "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "required": ["id"], "properties": {"id": {"type": "integer"}}}},
        {"name": "s_receipt", "version": 1, "type": "JSON", "data": {
            "type": "object", "required": ["ok"], "properties": {"ok": {"type": "string"}}}},
        {"name": "s_avro", "version": 1, "type": "AVRO", "data": {"type": "record"}},
    ]);
    api.post_json("/api/schema", &schemas)
        .expect_ok("register schemas");
}

fn schema_ref(name: &str) -> Value {
    json!({"name": name, "version": 1, "type": "JSON"})
}

#[test]
fn the_registry_stores_versions_refuses_bad_schemas_and_survives_a_restart() {
    let mut server = Server::start();
    register_schemas(server.api());
    let api = server.api();
    let one = json!({"name": "s_order", "type": "JSON", "data": {"type": "object"}});
    api.post_json("/api/schema?newVersion=true", &one)
        .expect_ok("a new version");
    let latest = api.get("/api/schema/s_order").expect_ok("latest").json();
    assert_eq!(
        (latest["version"].as_u64(), &latest["data"]),
        (Some(2), &json!({"type": "object"}))
    );
    let first = api
        .get("/api/schema/s_order/1")
        .expect_ok("version 1")
        .json();
    assert_eq!(first["data"]["required"], json!(["id"]));
    assert_eq!(
        api.get("/api/schema")
            .expect_ok("all")
            .json()
            .as_array()
            .map(Vec::len),
        Some(4)
    );

    let bad = json!({"name": "s_bad", "type": "JSON", "data": {"type": 12}});
    refused(
        api.post_json("/api/schema", &bad),
        400,
        &["s_bad", "not a valid JSON Schema"],
    );
    let remote = json!({"name": "s_remote", "data": {"$ref": "https://example.com/x.json"}});
    refused(api.post_json("/api/schema", &remote), 400, &["s_remote"]);
    refused(api.get("/api/schema/s_bad"), 404, &["s_bad"]);

    api.delete("/api/schema/s_order/2")
        .expect_ok("delete version 2");
    refused(api.get("/api/schema/s_order/2"), 404, &["s_order"]);
    refused(api.delete("/api/schema/s_none"), 404, &["s_none"]);

    server.restart();
    let api = server.api();
    let names: Vec<(String, u64)> = api
        .get("/api/schema")
        .expect_ok("all")
        .json()
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or_default().to_owned(),
                s["version"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("s_avro".into(), 1),
            ("s_order".into(), 1),
            ("s_receipt".into(), 1)
        ]
    );
    api.delete("/api/schema/s_avro")
        .expect_ok("delete every version");
    refused(api.get("/api/schema/s_avro"), 404, &["s_avro"]);
}

fn enforcing_workflow(name: &str, input: &str, output: &str) -> Value {
    json!({
        "name": name, "version": 1, "schemaVersion": 2, "ownerEmail": "test@harness.com",
        "enforceSchema": true, "inputSchema": schema_ref(input), "outputSchema": schema_ref(output),
        "outputParameters": {"ok": "${t.output.ok}"},
        "tasks": [{"name": "s_work", "taskReferenceName": "t", "type": "SIMPLE"}],
    })
}

#[test]
fn a_workflow_enforcing_schemas_checks_its_input_and_its_output() {
    let server = Server::start();
    let api = server.api();
    register_schemas(api);
    api.register_task_defs(&[task_def("s_work", json!({"retryCount": 0}))]);

    let unknown = enforcing_workflow("s_wf_unknown", "s_nothing", "s_receipt");
    refused(
        api.post_json("/api/metadata/workflow", &unknown),
        400,
        &["s_nothing", "inputSchema"],
    );
    let avro = enforcing_workflow("s_wf_avro", "s_order", "s_avro");
    refused(
        api.post_json("/api/metadata/workflow", &avro),
        400,
        &["s_avro", "AVRO"],
    );
    refused(
        api.get("/api/metadata/workflow/s_wf_unknown"),
        404,
        &["s_wf_unknown"],
    );
    let mut lax = enforcing_workflow("s_wf_lax", "s_nothing", "s_avro");
    lax["enforceSchema"] = json!(false);
    api.register_workflow_def(&lax);
    let back = api
        .get("/api/metadata/workflow/s_wf_lax")
        .expect_ok("get")
        .json();
    assert_eq!(
        (&back["inputSchema"], &back["outputSchema"]),
        (&lax["inputSchema"], &lax["outputSchema"])
    );

    api.register_workflow_def(&enforcing_workflow("s_wf", "s_order", "s_receipt"));
    let back = api
        .get("/api/metadata/workflow/s_wf")
        .expect_ok("get")
        .json();
    assert_eq!(
        (&back["enforceSchema"], &back["inputSchema"]),
        (&json!(true), &schema_ref("s_order"))
    );
    let bad = json!({"name": "s_wf", "input": {"id": "seven"}, "correlationId": "s_bad_start"});
    refused(
        api.post_json("/api/workflow", &bad),
        400,
        &["s_order", "/id", "integer"],
    );
    assert!(
        api.correlated("s_wf", "s_bad_start").is_empty(),
        "nothing stored"
    );

    let id = api.start_workflow("s_wf", &json!({"id": 7}));
    let task = api.poll_until("s_work", "w", WAIT);
    api.complete(&task, json!({"ok": 1}));
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    let reason = wf["reasonForIncompletion"].as_str().unwrap_or_default();
    assert!(
        reason.contains("workflow output does not match schema 's_receipt'"),
        "{reason}"
    );
    assert!(reason.contains("/ok"), "{reason}");

    let id = api.start_workflow("s_wf", &json!({"id": 8}));
    let task = api.poll_until("s_work", "w", WAIT);
    api.complete(&task, json!({"ok": "yes"}));
    api.wait_workflow_status(&id, "COMPLETED", WAIT);
}

#[test]
fn a_task_definition_enforcing_schemas_fails_its_tasks() {
    let server = Server::start();
    let api = server.api();
    register_schemas(api);
    let avro = task_def(
        "s_task_avro",
        json!({"enforceSchema": true, "inputSchema": schema_ref("s_avro")}),
    );
    refused(
        api.post_json("/api/metadata/taskdefs", &json!([avro])),
        400,
        &["s_avro", "AVRO"],
    );
    api.register_task_defs(&[task_def(
        "s_checked",
        json!({
            "retryCount": 1, "retryDelaySeconds": 0, "enforceSchema": true,
            "inputSchema": schema_ref("s_order"), "outputSchema": schema_ref("s_receipt"),
        }),
    )]);
    api.register_workflow_def(&json!({
        "name": "s_task_wf", "version": 1, "schemaVersion": 2, "ownerEmail": "test@harness.com",
        "tasks": [{"name": "s_checked", "taskReferenceName": "c", "type": "SIMPLE",
            "inputParameters": {"id": "${workflow.input.id}"}}],
    }));

    let id = api.start_workflow("s_task_wf", &json!({"id": "x"}));
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    assert_eq!(
        status_of(&wf, "c").as_deref(),
        Some("FAILED_WITH_TERMINAL_ERROR")
    );
    let reason = wf["tasks"][0]["reasonForIncompletion"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("input of task 'c' does not match schema 's_order'"),
        "{reason}"
    );

    let id = api.start_workflow("s_task_wf", &json!({"id": 1}));
    let task = api.poll_until("s_checked", "w", WAIT);
    api.complete(&task, json!({"ok": false}));
    let retry = wait_for(WAIT, "the retry", || {
        let wf = api.workflow(&id);
        (wf["tasks"].as_array().map(Vec::len) == Some(2)).then_some(wf)
    });
    assert_eq!(retry["tasks"][0]["status"], "FAILED");
    let reason = retry["tasks"][0]["reasonForIncompletion"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("output of task 'c' does not match schema 's_receipt'"),
        "{reason}"
    );
    let task = api.poll_until("s_checked", "w", WAIT);
    api.complete(&task, json!({"ok": "done"}));
    api.wait_workflow_status(&id, "COMPLETED", WAIT);
}
