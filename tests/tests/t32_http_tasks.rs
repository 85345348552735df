//! Conductor's HTTP task on a running node, against a server the test runs on loopback: the
//! call is made as the task asks (method, headers, body) and its answer becomes the task's
//! output; an answer outside 2xx is retried as the registered task definition says, then fails
//! the workflow; a read timeout and a host outside `--http-allow` fail the task with a reason
//! that says so; a leader killed during a call leaves it to the next leader, which calls again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use harness::cluster::{partition_of, Cluster};
use harness::upstream::{Answer, Upstream};
use harness::{attempts, task_by_ref, wait_for, Api, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

fn register(api: &Api, name: &str, tasks: Value) {
    api.register_workflow_def(&json!({
        "name": name, "version": 1, "schemaVersion": 2, "tasks": tasks,
        "outputParameters": {"id": "${call.output.response.body.id}"},
    }));
}

fn http_task(name: &str, request: Value) -> Value {
    json!({"name": name, "taskReferenceName": "call", "type": "HTTP",
           "inputParameters": {"http_request": request}})
}

fn reason(wf: &Value) -> String {
    wf["reasonForIncompletion"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_call_is_made_as_asked_and_its_answer_completes_the_task() {
    let upstream = Upstream::start(|seen| match seen.method.as_str() {
        "POST" => Answer {
            headers: vec![("content-type", "application/json"), ("x-upstream", "yes")],
            ..Answer::new("200 OK", r#"{"accepted": true, "id": 7}"#)
        },
        _ => Answer::new("202 Accepted", "noted"),
    });
    let server = Server::start();
    let api = server.api();
    let order = json!({"uri": upstream.url("/orders?src=baton"), "method": "POST",
        "headers": {"X-Trace": "${workflow.input.trace}"},
        "body": {"order": "${workflow.input.order}", "n": 2},
        "contentType": "application/json", "accept": "application/json"});
    let note = json!({"uri": upstream.url("/notes"), "method": "put",
        "body": "as it is", "contentType": "text/plain", "accept": "text/plain"});
    let mut second = http_task("note", note);
    second["taskReferenceName"] = json!("note");
    register(api, "http_ok", json!([http_task("order", order), second]));

    let id = api.start_workflow("http_ok", &json!({"trace": "t-1", "order": "o-1"}));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);

    let response = &task_by_ref(&wf, "call").expect("the call")["outputData"]["response"];
    assert_eq!(response["statusCode"], 200);
    assert_eq!(response["reasonPhrase"], "OK");
    assert_eq!(response["body"], json!({"accepted": true, "id": 7}));
    assert_eq!(response["headers"]["X-Upstream"], json!(["yes"]));
    assert_eq!(wf["output"]["id"], 7, "later expressions read the answer");
    let note = &task_by_ref(&wf, "note").expect("the note")["outputData"]["response"];
    assert_eq!(
        (&note["statusCode"], &note["body"]),
        (&json!(202), &json!("noted"))
    );

    let seen = upstream.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let (post, put) = (&seen[0], &seen[1]);
    assert_eq!(
        (post.method.as_str(), post.path.as_str()),
        ("POST", "/orders?src=baton")
    );
    assert_eq!(post.headers.get("x-trace").map(String::as_str), Some("t-1"));
    assert_eq!(
        post.headers.get("content-type").map(String::as_str),
        Some("application/json")
    );
    assert_eq!(
        post.headers.get("accept").map(String::as_str),
        Some("application/json")
    );
    let body: Value = serde_json::from_str(&post.body).expect("a JSON body");
    assert_eq!(body, json!({"order": "o-1", "n": 2}));
    assert_eq!(
        (put.method.as_str(), put.body.as_str()),
        ("PUT", "as it is")
    );
    assert_eq!(
        put.headers.get("content-type").map(String::as_str),
        Some("text/plain")
    );
}

#[test]
fn an_answer_outside_2xx_is_retried_as_the_definition_says_then_fails() {
    let upstream = Upstream::start(|_| Answer::new("503 Service Unavailable", "busy"));
    let server = Server::start();
    let api = server.api();
    api.register_task_defs(&[json!({"name": "flaky_call", "retryCount": 2,
        "retryLogic": "FIXED", "retryDelaySeconds": 1,
        "timeoutSeconds": 120, "responseTimeoutSeconds": 120})]);
    let request = json!({"uri": upstream.url("/busy"), "method": "GET"});
    register(api, "http_busy", json!([http_task("flaky_call", request)]));

    let id = api.start_workflow("http_busy", &json!({}));
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    assert!(reason(&wf).contains("HTTP 503"), "{}", reason(&wf));
    let tries = attempts(&wf, "call");
    assert_eq!(tries.len(), 3, "the first call and two retries");
    assert!(tries.iter().all(|t| t["status"] == "FAILED"), "{tries:?}");
    assert_eq!(tries[2]["outputData"]["response"]["statusCode"], 503);
    let seen = upstream.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for pair in seen.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_millis(900),
            "a retry waits its delay: {gap:?}"
        );
    }
}

#[test]
fn a_read_timeout_fails_the_task_saying_it_timed_out() {
    let upstream = Upstream::start(|_| Answer {
        delay: Duration::from_secs(2),
        ..Answer::new("200 OK", "{}")
    });
    let server = Server::start();
    let api = server.api();
    let request = json!({"uri": upstream.url("/slow"), "readTimeOut": 300});
    register(api, "http_slow", json!([http_task("slow_call", request)]));

    let id = api.start_workflow("http_slow", &json!({}));
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    assert!(reason(&wf).contains("timed out"), "{}", reason(&wf));
    assert!(reason(&wf).contains("300 ms"), "{}", reason(&wf));
    assert_eq!(upstream.seen().len(), 1, "no retry without a definition");
}

#[test]
fn a_host_outside_the_allow_list_fails_the_task_without_a_call() {
    let upstream = Upstream::start(|_| Answer::new("200 OK", "{}"));
    let server = Server::start_with_args(&[
        "--http-allow".to_owned(),
        "api.example.com,*.internal.example".to_owned(),
    ]);
    let api = server.api();
    let request = json!({"uri": upstream.url("/secret")});
    register(
        api,
        "http_refused",
        json!([http_task("refused_call", request)]),
    );

    let id = api.start_workflow("http_refused", &json!({}));
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    let why = reason(&wf);
    assert!(
        why.contains("'127.0.0.1'") && why.contains("--http-allow"),
        "{why}"
    );
    assert!(upstream.seen().is_empty(), "no call was made");
}

#[test]
fn a_leader_killed_during_a_call_leaves_it_to_the_next_leader_which_calls_again() {
    let calls = AtomicUsize::new(0);
    let upstream = Upstream::start(move |_| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        Answer {
            // The first call is still waiting for its answer when its leader is killed.
            delay: Duration::from_secs(if n == 1 { 20 } else { 0 }),
            ..Answer::new("200 OK", &format!(r#"{{"id": {n}}}"#))
        }
    });
    let mut cluster = Cluster::start(3);
    let api = cluster.api(1);
    let request = json!({"uri": upstream.url("/once"), "method": "POST", "body": {"x": 1}});
    register(
        &api,
        "http_failover",
        json!([http_task("failover_call", request)]),
    );
    let id = api.start_workflow("http_failover", &json!({}));
    wait_for(WAIT, "the first call", || {
        (!upstream.seen().is_empty()).then_some(())
    });
    let partition = partition_of(&id, cluster.partitions());
    let leader = cluster.leader_of_partition(partition).expect("a leader");
    cluster.kill9(leader);

    let survivor = cluster.live_ids()[0];
    let api = cluster.api_with_timeout(survivor, Duration::from_secs(5));
    let wf = wait_for(Duration::from_secs(60), "the workflow to complete", || {
        let reply = api.try_get(&format!("/api/workflow/{id}")).ok()?;
        let wf = reply.is_success().then(|| reply.json())?;
        (wf["status"] == "COMPLETED").then_some(wf)
    });
    let calls = upstream.seen().len();
    assert!(calls >= 2, "the call was made again: {calls} calls");
    let answered = wf["output"]["id"].as_u64().unwrap_or_default();
    assert!(
        answered >= 2,
        "a later call's answer completed the task: {answered}"
    );
}
