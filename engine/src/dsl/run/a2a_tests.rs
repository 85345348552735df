//! `call: a2a` driven input by input through the engine: the card read, the send claimed and
//! made at most once, the remote task followed to its end, and the errors it raises.

use crate::testing::H;
use crate::{Error, Input, TimerKey, TimerKind, Work};
use proto::model::{TaskStatus, WorkflowStatus};
use serde_json::{json, Value};

struct Workers;

impl crate::Catalog for Workers {
    fn task_def(&self, name: &str) -> Option<proto::model::TaskDef> {
        Some(crate::testing::harness_task_def(name))
    }
}

const AT: &str = "/do/0/ask";

fn doc(with: &str) -> String {
    format!(
        "document:\n  dsl: '1.0.3'\n  namespace: test\n  name: t\n  version: '1.0.0'\ndo:\n  - ask:\n      call: a2a\n      with:\n{with}"
    )
}

const CARD: &str = "        method: message/send\n        agentCard:\n          endpoint: http://agent.test/card\n        parameters:\n          message:\n            role: user\n            parts:\n              - kind: text\n                text: ${ .question }\n";

fn start(with: &str) -> H {
    let doc = crate::dsl::load_with(&doc(with), &Workers).unwrap_or_else(|e| panic!("{e}"));
    let def = crate::dsl::workflow_def(&doc);
    let input = json!({"question": "2+3?"});
    H::try_start_with(def, input, std::sync::Arc::new(Workers)).expect("starts")
}

fn dsl(h: &H, key: &str) -> Value {
    let run = h.wf().dsl.as_ref().expect("a DSL instance");
    match key {
        "output" => run.output.clone().unwrap_or_default(),
        _ => run.error.clone().unwrap_or_default(),
    }
}

/// The HTTP call the current step waits for.
fn call(h: &H) -> crate::HttpRequest {
    match h.work(AT) {
        Some(Work::Http(request)) => request,
        other => panic!("an HTTP call: {other:?}"),
    }
}

fn claim(h: &mut H) -> Result<bool, Error> {
    let t = h.task(AT);
    let (task_id, iteration) = (t.task_id.clone(), t.iteration);
    h.apply(Input::Claim { task_id, iteration })
}

fn answer(result: Value) -> Result<Value, String> {
    let body = json!({"jsonrpc": "2.0", "id": "x", "result": result});
    Ok(json!({"response": {"statusCode": 200, "body": body}}))
}

fn task(state: &str) -> Value {
    json!({"kind": "task", "id": "remote-1", "contextId": "c", "status": {"state": state}})
}

/// Reads the card and claims the send; answers the send's request.
fn sent(h: &mut H) -> crate::HttpRequest {
    let card = call(h);
    assert_eq!(
        (card.method.as_str(), card.uri.as_str()),
        ("GET", "http://agent.test/card")
    );
    assert!(!card.at_most_once, "reading the card may be repeated");
    let body =
        json!({"name": "a", "url": "http://agent.test/rpc", "preferredTransport": "JSONRPC"});
    h.perform(
        AT,
        Ok(json!({"response": {"statusCode": 200, "body": body}})),
    );
    let send = call(h);
    assert!(send.at_most_once, "the send is made at most once");
    assert!(claim(h).expect("the first claim commits"));
    assert_eq!(h.st(AT), TaskStatus::InProgress);
    assert_eq!(h.work(AT), None, "a claimed call is not asked for again");
    assert!(
        matches!(claim(h), Err(Error::Conflict(_))),
        "a second claim is refused, and with it a second call"
    );
    send
}

#[test]
fn a_call_reads_the_card_sends_once_and_follows_the_task_to_its_end() {
    let mut h = start(CARD);
    let send = sent(&mut h);
    let rpc = send.body.expect("a JSON-RPC request");
    assert_eq!(
        (send.method.as_str(), send.uri.as_str()),
        ("POST", "http://agent.test/rpc")
    );
    assert_eq!(rpc["method"], "message/send");
    let call_task = h.wf().tasks.iter().find(|t| t.task_type == "dsl/call");
    let call_id = call_task.expect("the call's own task").task_id.clone();
    assert_eq!(
        rpc["params"]["message"]["messageId"],
        format!("baton-{call_id}")
    );
    assert_eq!(rpc["params"]["message"]["parts"][0]["text"], "2+3?");
    assert_eq!(rpc["params"]["configuration"]["blocking"], true);
    h.perform(AT, answer(task("working")));
    let wait = h.task(AT).clone();
    assert_eq!(wait.task_type, "WAIT");
    assert_eq!(wait.wait_timeout, h.now + super::a2a::POLL_FIRST_MS);
    h.now = wait.wait_timeout;
    h.ok(Input::Timer(TimerKey {
        kind: TimerKind::Wait,
        task_id: Some(wait.task_id),
    }));
    let poll = call(&h);
    assert!(!poll.at_most_once, "a poll only reads: it may be repeated");
    let rpc = poll.body.expect("a JSON-RPC request");
    assert_eq!(
        (rpc["method"].clone(), rpc["params"].clone()),
        (json!("tasks/get"), json!({"id": "remote-1"}))
    );
    h.perform(AT, answer(task("TASK_STATE_WORKING")));
    let wait = h.task(AT).clone();
    assert_eq!(
        wait.wait_timeout,
        h.now + 2 * super::a2a::POLL_FIRST_MS,
        "the wait doubles"
    );
    h.now = wait.wait_timeout;
    h.ok(Input::Timer(TimerKey {
        kind: TimerKind::Wait,
        task_id: Some(wait.task_id),
    }));
    let done = task("completed");
    h.perform(AT, answer(done.clone()));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(dsl(&h, "output"), done);
    let call_task = h.wf().tasks.iter().find(|t| t.task_id == call_id);
    assert_eq!(call_task.map(|t| t.status), Some(TaskStatus::Completed));
}

#[test]
fn input_required_ends_the_following_with_the_task_as_it_stands() {
    let mut h = start(CARD);
    sent(&mut h);
    let waiting = task("input-required");
    h.perform(AT, answer(waiting.clone()));
    assert_eq!(dsl(&h, "output"), waiting);
}

#[test]
fn a_server_is_called_without_a_card_and_other_methods_are_one_call() {
    let mut h = start("        method: tasks/get\n        server: http://agent.test/rpc\n        parameters:\n          id: remote-1\n");
    let get = call(&h);
    assert_eq!(get.uri, "http://agent.test/rpc");
    assert!(!get.at_most_once);
    let working = task("working");
    h.perform(AT, answer(working.clone()));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(dsl(&h, "output"), working, "a read is not followed");
}

#[test]
fn errors_raise_the_runtime_error_naming_what_went_wrong() {
    let cases = [
        (
            json!({"response": {"statusCode": 200, "body": {"jsonrpc": "2.0", "id": 1,
                "error": {"code": -32001, "message": "task not found"}}}}),
            500,
            "A2A error -32001: task not found",
        ),
        (
            answer(
                json!({"kind": "task", "id": "remote-1", "status": {"state": "failed",
                "message": {"parts": [{"kind": "text", "text": "boom"}]}}}),
            )
            .expect("an answer"),
            500,
            "the A2A task remote-1 ended failed: boom",
        ),
        (
            json!({"response": {"statusCode": 503, "body": "busy", "reasonPhrase": "Service Unavailable"}}),
            503,
            "sending the request: HTTP 503 Service Unavailable",
        ),
    ];
    for (outcome, status, detail) in cases {
        let mut h = start(CARD);
        sent(&mut h);
        h.perform(AT, Ok(outcome));
        assert_eq!(h.status(), WorkflowStatus::Failed);
        let e = dsl(&h, "error");
        assert_eq!(
            e["type"],
            "https://serverlessworkflow.io/spec/1.0.0/errors/runtime"
        );
        assert_eq!(
            (e["status"].clone(), e["detail"].clone()),
            (json!(status), json!(detail))
        );
        assert_eq!(e["instance"], AT);
    }
}

#[test]
fn a_claimed_send_whose_report_never_comes_fails_without_a_second_call() {
    let mut h = start(CARD);
    sent(&mut h);
    let t = h.task(AT).clone();
    let key = TimerKey {
        kind: TimerKind::Perform,
        task_id: Some(t.task_id.clone()),
    };
    let due = crate::timers(h.wf())
        .into_iter()
        .find(|timer| timer.key == key);
    let due = due.expect("a claimed call's timer").due_ms;
    let limit = crate::HTTP_CONNECT_TIMEOUT_MS + crate::HTTP_READ_TIMEOUT_MS;
    assert_eq!(due, t.update_time + limit as i64 + crate::CLAIM_MARGIN_MS);
    h.now = due;
    h.ok(Input::Timer(key));
    assert_eq!(
        h.wf().task(&t.task_id).map(|t| t.status),
        Some(TaskStatus::Failed)
    );
    assert_eq!(h.status(), WorkflowStatus::Failed);
    let detail = dsl(&h, "error")["detail"].clone();
    assert!(
        detail.as_str().is_some_and(|d| d.contains("not repeated")),
        "{detail}"
    );
    assert!(
        crate::pending_work(h.wf()).is_empty(),
        "nothing is called again"
    );
}

#[test]
fn a_report_after_the_claim_is_taken_and_a_late_one_changes_nothing() {
    let mut h = start(CARD);
    sent(&mut h);
    assert!(h.perform(AT, answer(json!({"kind": "message", "parts": []}))));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert!(
        !h.perform(AT, answer(task("working"))),
        "the call was reported already"
    );
}

#[test]
fn registration_asks_for_a_method_and_an_agent() {
    let refused = |with: &str| {
        let doc = crate::dsl::load_with(&doc(with), &Workers).expect("a valid document");
        let refused = crate::dsl::check_supported(&doc).err();
        refused.map(|e| format!("{e} {e:?}")).unwrap_or_default()
    };
    let no_agent = refused("        method: message/send\n");
    assert!(no_agent.contains("/do/0/ask/with"), "{no_agent}");
    assert!(no_agent.contains("agentCard"), "{no_agent}");
    let streaming = refused("        method: message/stream\n        server: http://a.test/rpc\n");
    assert_eq!(streaming, "", "streams are supported");
}

const STREAM: &str = "        method: message/stream\n        server: http://agent.test/rpc\n        parameters:\n          message:\n            parts:\n              - kind: text\n                text: ${ .question }\n";

/// Claims the stream's request and answers it with `events` (each a result).
fn streamed(h: &mut H, results: &[Value]) {
    let send = call(h);
    assert!(send.at_most_once, "a stream sends a message: at most once");
    assert_eq!(
        send.headers.get("Accept").map(String::as_str),
        Some("text/event-stream")
    );
    let rpc = send.body.expect("a JSON-RPC request");
    assert_eq!(rpc["method"], "message/stream");
    assert_eq!(
        rpc["params"]["message"]["role"], "user",
        "the spec's default"
    );
    assert!(rpc["params"].get("configuration").is_none());
    assert!(claim(h).expect("the first claim commits"));
    let events: Vec<Value> = results
        .iter()
        .map(|r| json!({"jsonrpc": "2.0", "id": "x", "result": r}))
        .collect();
    h.perform(
        AT,
        Ok(json!({"response": {"statusCode": 200, "body": events}})),
    );
}

#[test]
fn a_stream_read_to_its_end_is_the_list_of_its_results() {
    let mut h = start(STREAM);
    let results = [
        task("submitted"),
        json!({"kind": "artifact-update", "taskId": "remote-1", "artifact": {"parts": []}}),
        json!({"kind": "status-update", "taskId": "remote-1", "status": {"state": "completed"}, "final": true}),
    ];
    streamed(&mut h, &results);
    assert_eq!(
        h.status(),
        WorkflowStatus::Completed,
        "{}",
        dsl(&h, "error")
    );
    assert_eq!(dsl(&h, "output"), json!(results));
}

#[test]
fn a_stream_cut_short_is_followed_by_polls_and_ends_with_the_settled_task() {
    let mut h = start(STREAM);
    let working = json!({"kind": "status-update", "taskId": "remote-1", "status": {"state": "working"}, "final": false});
    streamed(&mut h, &[task("submitted"), working.clone()]);
    let wait = h.task(AT).clone();
    assert_eq!(wait.task_type, "WAIT");
    h.now = wait.wait_timeout;
    h.ok(Input::Timer(TimerKey {
        kind: TimerKind::Wait,
        task_id: Some(wait.task_id),
    }));
    let poll = call(&h);
    assert!(!poll.at_most_once);
    assert_eq!(poll.body.expect("a request")["method"], "tasks/get");
    h.perform(AT, answer(task("completed")));
    assert_eq!(
        h.status(),
        WorkflowStatus::Completed,
        "{}",
        dsl(&h, "error")
    );
    assert_eq!(
        dsl(&h, "output"),
        json!([task("submitted"), working, task("completed")])
    );
}

#[test]
fn a_stream_that_shows_no_task_or_a_failed_one_raises() {
    let failed = json!({"kind": "status-update", "taskId": "remote-1", "status": {"state": "failed"}, "final": true});
    let cases = [
        (
            vec![task("working"), failed],
            "the A2A task remote-1 ended failed: no message",
        ),
        (vec![], "the agent's stream ended carrying no event"),
        (
            vec![json!({"kind": "status-update", "status": {"state": "working"}})],
            "the agent's task still runs and its answer names no task id to follow",
        ),
    ];
    for (results, detail) in cases {
        let mut h = start(STREAM);
        streamed(&mut h, &results);
        assert_eq!(h.status(), WorkflowStatus::Failed);
        assert_eq!(dsl(&h, "error")["detail"], detail);
    }
}

#[test]
fn an_agent_that_speaks_only_a2a_1_0_is_called_in_its_terms() {
    let mut h = start(CARD);
    let card = json!({"name": "a", "supportedInterfaces": [
        {"url": "http://agent.test/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]});
    h.perform(
        AT,
        Ok(json!({"response": {"statusCode": 200, "body": card}})),
    );
    let send = call(&h);
    assert_eq!(send.uri, "http://agent.test/v1");
    assert_eq!(
        send.headers.get("A2A-Version").map(String::as_str),
        Some("1.0")
    );
    let rpc = send.body.expect("a JSON-RPC request");
    assert_eq!(rpc["method"], "SendMessage");
    let message = &rpc["params"]["message"];
    assert_eq!(message["role"], "ROLE_USER");
    assert_eq!(message["parts"], json!([{"text": "2+3?"}]));
    assert!(claim(&mut h).expect("claimed"));
    h.perform(
        AT,
        answer(json!({"task": {"id": "remote-1", "status": {"state": "TASK_STATE_WORKING"}}})),
    );
    let wait = h.task(AT).clone();
    h.now = wait.wait_timeout;
    h.ok(Input::Timer(TimerKey {
        kind: TimerKind::Wait,
        task_id: Some(wait.task_id),
    }));
    let poll = call(&h).body.expect("a JSON-RPC request");
    assert_eq!(poll["method"], "GetTask");
    let done = json!({"id": "remote-1", "status": {"state": "TASK_STATE_COMPLETED"}});
    h.perform(AT, answer(done));
    assert_eq!(
        h.status(),
        WorkflowStatus::Completed,
        "{:?}",
        dsl(&h, "error")
    );
    assert_eq!(
        dsl(&h, "output"),
        json!({"id": "remote-1", "status": {"state": "completed"}}),
        "read back in v0.3's terms"
    );
}

#[test]
fn a_card_with_a_v0_3_url_keeps_the_v0_3_terms() {
    let mut h = start(CARD);
    let card = json!({"name": "a", "url": "http://agent.test/rpc", "protocolVersion": "0.3.0",
        "supportedInterfaces": [{"url": "http://agent.test/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]});
    h.perform(
        AT,
        Ok(json!({"response": {"statusCode": 200, "body": card}})),
    );
    let rpc = call(&h).body.expect("a JSON-RPC request");
    assert_eq!(rpc["method"], "message/send");
    assert_eq!(rpc["params"]["message"]["parts"][0]["kind"], "text");
}
