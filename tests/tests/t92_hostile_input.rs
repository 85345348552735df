//! Hostile input from outside over plain HTTP: every request is checked at the door with the
//! limits the stores rely on, so what is accepted can be stored, read back, replicated and
//! decoded after a restart, and what is not gets a clear 4xx that changes nothing. A workflow
//! whose payloads add up past what a record may hold fails with that reason instead of sticking,
//! and a record the store cannot decode is set aside without stopping its partition.

use harness::cluster::{partition_of, Cluster};
use harness::{nonce, task_result, Server, PARTITIONS};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// `{"a": {"a": ... 1}}`, `levels` objects deep.
fn nested(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = json!({ "a": v });
    }
    v
}

/// A workflow of `n` SIMPLE tasks `t1..tn` of type `type_`, each given the workflow's input.
fn chain_def(name: &str, type_: &str, n: usize) -> Value {
    let tasks: Vec<Value> = (1..=n)
        .map(|i| {
            json!({"name": type_, "taskReferenceName": format!("t{i}"), "type": "SIMPLE",
                   "inputParameters": {"x": "${workflow.input.x}"}})
        })
        .collect();
    json!({"name": name, "version": 1, "schemaVersion": 2, "tasks": tasks})
}

#[test]
fn deep_input_is_refused_and_what_is_accepted_reads_back_across_a_restart() {
    let mut server = Server::start();
    let api = server.api().clone();
    let ty = format!("deep_{}", nonce());
    api.register_workflow_def(&chain_def("deep", &ty, 1));
    // 126 levels: refused before anything is stored (it used to disable the partition).
    for levels in [126, 65] {
        api.post_json("/api/workflow/deep", &json!({ "x": nested(levels - 1) }))
            .assert_error_response(400, "too deep an input");
    }
    let ok = api.start_workflow("deep", &json!({ "x": nested(63) }));
    let task = api.poll_until(&ty, "w1", WAIT);
    assert_eq!(task["inputData"]["x"], nested(63));
    // A worker's output is held to the same limit.
    api.update_task(&task_result(
        &task,
        "COMPLETED",
        json!({"y": nested(70)}),
        None,
        None,
    ))
    .assert_error_response(400, "too deep an output");

    server.restart();
    let api = server.api().clone();
    assert_eq!(api.workflow(&ok)["input"]["x"], nested(63));
    // The task leased before the restart is still the worker's to complete.
    api.complete(&task, json!({"y": nested(63)}));
    api.wait_workflow_status(&ok, "COMPLETED", WAIT);
    let health = api.get("/health").expect_ok("health").json();
    assert_eq!(health["healthy"], true, "{health}");

    // A template may nest an accepted input deeper than a stored record may: such a start is
    // refused with the reason, and stores nothing.
    let mut template = json!("${workflow.input.x}");
    for _ in 0..60 {
        template = json!({ "b": template });
    }
    api.register_workflow_def(&json!({"name": "deeper", "version": 1, "tasks": [
        {"name": ty, "taskReferenceName": "t", "type": "SIMPLE", "inputParameters": {"n": template}}]}));
    let reply = api.post_json("/api/workflow/deeper", &json!({ "x": nested(63) }));
    reply.assert_error_response(413, "a record nested past the limit");
    assert!(reply.body.contains("levels deep"), "{}", reply.body);
}

#[test]
fn deep_input_is_refused_by_every_node_of_a_cluster() {
    let cluster = Cluster::start(3);
    let first = cluster.api(1);
    let ty = format!("deep_{}", nonce());
    first.register_workflow_def(&chain_def("deep3", &ty, 1));
    for id in cluster.ids() {
        cluster
            .api(id)
            .post_json("/api/workflow/deep3", &json!({ "x": nested(125) }))
            .assert_error_response(400, "too deep an input");
    }
    let ok = first.start_workflow("deep3", &json!({ "x": nested(63) }));
    for id in cluster.ids() {
        assert_eq!(cluster.api(id).workflow(&ok)["input"]["x"], nested(63));
    }
}

#[test]
fn payloads_that_add_up_fail_the_workflow_with_the_reason_instead_of_sticking() {
    let server = Server::start();
    let api = server.api();
    let ty = format!("big_{}", nonce());
    api.register_workflow_def(&chain_def("big_outputs", &ty, 6));
    let id = api.start_workflow("big_outputs", &json!({}));
    let big = "x".repeat(870_000);
    let mut refused = None;
    for _ in 0..6 {
        let task = api.poll_until(&ty, "w1", WAIT);
        let reply = api.update_task(&task_result(
            &task,
            "COMPLETED",
            json!({ "blob": big }),
            None,
            None,
        ));
        if reply.status != 200 {
            refused = Some(reply);
            break;
        }
    }
    let reply = refused.expect("an output past the workflow's limit is refused");
    reply.assert_error_response(413, "the output that passes the workflow's limit");
    assert!(reply.body.contains("the workflow failed"), "{}", reply.body);
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    let reason = wf["reasonForIncompletion"].as_str().unwrap_or_default();
    assert!(reason.contains("over the limit"), "{wf}");
    // Terminating it now is a plain conflict, not a retryable 503.
    api.delete(&format!("/api/workflow/{id}?reason=stop"))
        .assert_error_response(409, "terminate a failed workflow");

    // A FORK copying a large input into 20 branches: the start is refused, nothing is stored.
    let branches: Vec<Value> = (0..20)
        .map(|i| {
            json!([{"name": ty, "taskReferenceName": format!("b{i}"), "type": "SIMPLE",
                    "inputParameters": {"data": "${workflow.input.data}"}}])
        })
        .collect();
    let join_on: Vec<String> = (0..20).map(|i| format!("b{i}")).collect();
    api.register_workflow_def(&json!({
        "name": "fan_out", "version": 1, "schemaVersion": 2,
        "tasks": [{"name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN",
                   "forkTasks": branches},
                  {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": join_on}]
    }));
    let correlation = format!("fan-{}", nonce());
    api.post_json(
        "/api/workflow",
        &json!({"name": "fan_out", "correlationId": correlation,
                "input": {"data": "y".repeat(900_000)}}),
    )
    .assert_error_response(413, "a start past the workflow's limit");
    assert!(api.correlated("fan_out", &correlation).is_empty());
}

#[test]
fn every_field_a_request_sets_is_checked_at_the_door() {
    let server = Server::start();
    let api = server.api();
    let ty = format!("door_{}", nonce());
    api.register_workflow_def(&chain_def("door", &ty, 1));
    let long = "c".repeat(64 * 1024);
    api.post_json(
        "/api/workflow",
        &json!({"name": "door", "correlationId": long}),
    )
    .assert_error_response(400, "a 64 KB correlation id");
    assert!(api.correlated("door", &long[..1024]).is_empty());

    let simple = |name: &str| json!({"name": name, "taskReferenceName": "a", "type": "SIMPLE"});
    let def = |name: &str, tasks: Value| json!({"name": name, "version": 1, "tasks": tasks});
    let refused_defs = [
        def("nul\u{0}name", json!([simple("a")])),
        def("evil\u{202E}fdp", json!([simple("a")])),
        def("../escape", json!([simple("a")])),
        def("ok", json!([simple("bad/type")])),
        def(
            "self_join",
            json!([{"name": "j", "taskReferenceName": "j", "type": "JOIN", "joinOn": ["j"]}]),
        ),
        def(
            "no_join",
            json!([{"name": "f", "taskReferenceName": "f", "type": "FORK_JOIN",
                    "forkTasks": [[simple("a")]]}]),
        ),
        def(
            "kafka_sink",
            json!([{"name": "e", "taskReferenceName": "e", "type": "EVENT", "sink": "kafka:q"}]),
        ),
    ];
    for d in refused_defs {
        api.post_json("/api/metadata/workflow", &d)
            .assert_error_response(400, &format!("definition {}", d["name"]));
    }
    for td in [
        json!({"name": "t_retry", "retryCount": 1_000_000_000u64}),
        json!({"name": "t_timeout", "timeoutSeconds": i64::MAX, "responseTimeoutSeconds": 10}),
        json!({"name": "t\u{0}nul"}),
    ] {
        api.post_json("/api/metadata/taskdefs", &json!([td]))
            .assert_error_response(400, &format!("task definition {}", td["name"]));
    }
    let defs = api.get("/api/metadata/workflow").expect_ok("list").json();
    let names: Vec<&str> = defs
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert_eq!(names, ["door"], "nothing refused was stored");

    api.get(&format!(
        "/api/tasks/poll/{ty}?workerid={}",
        "w".repeat(10 * 1024)
    ))
    .assert_error_response(400, "a 10 KB worker id");

    // A schedule whose input could never be started is refused when it is stored.
    api.post_json(
        "/api/scheduler/schedules",
        &json!({"name": "huge", "cronExpression": "* * * * * *",
                "startWorkflowRequest": {"name": "door", "input": {"x": "z".repeat(3 << 20)}}}),
    )
    .assert_error_response(413, "a schedule with a 3 MB input");
    // Cron expressions that would never fire, or make every search walk to the year 5000.
    for cron in ["0 0 0 31 2 *", ", * 9 * * MON-FRI"] {
        api.post_json(
            "/api/scheduler/schedules",
            &json!({"name": "never", "cronExpression": cron,
                    "startWorkflowRequest": {"name": "door"}}),
        )
        .assert_error_response(400, cron);
    }
}

#[test]
fn webhooks_bound_their_secrets_and_tolerance_and_sign_the_delivery_id() {
    use node::service::triggers::sign;
    let server = Server::start();
    let api = server.api();
    let secrets: Vec<String> = (0..4).map(|i| format!("secret-number-{i:04}")).collect();
    api.post_json(
        "/api/metadata/webhook",
        &json!({"name": "many", "secrets": secrets}),
    )
    .assert_error_response(400, "four secrets");
    api.post_json(
        "/api/metadata/webhook",
        &json!({"name": "lax", "secrets": [secrets[0]], "toleranceSeconds": 2_000_000_000u64}),
    )
    .assert_error_response(400, "a tolerance of 63 years");
    api.post_json(
        "/api/metadata/webhook",
        &json!({"name": "hook", "secrets": [secrets[0]]}),
    )
    .expect_ok("a webhook");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        .to_string();
    let body = r#"{"order":"o-1"}"#;
    let send = |delivery: &str, signed_as: &str| {
        let headers = vec![
            ("X-Baton-Timestamp".to_owned(), now.clone()),
            ("X-Baton-Delivery".to_owned(), delivery.to_owned()),
            (
                "X-Baton-Signature".to_owned(),
                sign(&secrets[0], &now, signed_as, body.as_bytes()),
            ),
        ];
        api.post_with_headers("/api/webhook/hook", body, &headers)
    };
    send("d-1", "d-1").expect_ok("a signed delivery");
    // The same signed delivery replayed under a new id does not verify.
    send("d-2", "d-1").assert_error_response(401, "a replay with a new delivery id");
}

/// Seeds partition `p` of a stopped node's store with a workflow row that does not decode and
/// its running row, as damage or a bug could leave them; answers the workflow's id.
fn seed_undecodable(data: &Path, p: usize) -> String {
    let id = format!("0badc0de-0000-4000-8000-00000000{p:04x}");
    let db = cluster::storage::Db::open_sled(data).expect("the store opens");
    let state = db.open_tree(format!("p{p}/state")).expect("the state tree");
    state
        .insert(
            format!("w/{id}"),
            proto::record::patch::chain_start(1, b"{\"version\": [[[ not json"),
        )
        .expect("writes");
    state
        .insert(format!("r/damaged\0{id}"), 1u32.to_be_bytes().to_vec())
        .expect("writes");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(db.flush())
        .expect("flushes");
    id
}

#[test]
fn an_undecodable_record_is_quarantined_and_its_partition_serves_the_rest() {
    let mut server = Server::start();
    let api = server.api().clone();
    let ty = format!("q_{}", nonce());
    api.register_workflow_def(&chain_def("neighbour", &ty, 1));
    // A workflow on partition 3 that must keep running beside the damaged one.
    let neighbour = loop {
        let id = api.start_workflow("neighbour", &json!({"x": 1}));
        if partition_of(&id, PARTITIONS) == 3 {
            break id;
        }
    };
    let mut damaged = String::new();
    server.restart_with(|data| damaged = seed_undecodable(data, 3));
    let api = server.api().clone();
    let health = api.get("/health").expect_ok("health").json();
    assert_eq!(health["healthy"], true, "{health}");
    harness::wait_until(WAIT, "the damaged record quarantined", || {
        let q = api.get("/api/admin/quarantine").expect_ok("list").json();
        q.as_array()
            .is_some_and(|l| l.iter().any(|e| e["workflowId"] == damaged))
    });
    let q = api.get("/api/admin/quarantine").expect_ok("list").json();
    assert_eq!(q[0]["partition"], 3, "{q}");
    assert!(
        q[0]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("malformed"),
        "{q}"
    );
    api.get(&format!("/api/workflow/{damaged}"))
        .assert_error_response(409, "reading a quarantined workflow");
    let metrics = api.get("/metrics").expect_ok("metrics").body;
    assert!(
        metrics.contains("baton_quarantined_workflows{partition=\"3\"} 1"),
        "{metrics}"
    );
    // batonctl status names it for the operator.
    let batonctl = harness::baton_bin().with_file_name("batonctl");
    let out = std::process::Command::new(&batonctl)
        .args(["--url", &server.base_url(), "status"])
        .output()
        .expect("batonctl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("quarantined: workflow {damaged} (partition 3)")),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every other workflow of the partition runs on.
    let task = loop {
        let t = api.poll_until(&ty, "w1", WAIT);
        if t["workflowInstanceId"] == neighbour.as_str() {
            break t;
        }
        api.complete(&t, json!({}));
    };
    api.complete(&task, json!({}));
    api.wait_workflow_status(&neighbour, "COMPLETED", WAIT);
    // Removed once looked at.
    api.delete(&format!("/api/admin/quarantine/{damaged}"))
        .expect_status(204, "drop the quarantined record");
    assert_eq!(
        api.get("/api/admin/quarantine").expect_ok("list").json(),
        json!([])
    );
    api.get(&format!("/api/workflow/{damaged}"))
        .assert_error_response(404, "a dropped workflow");
}
