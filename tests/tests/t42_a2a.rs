//! Baton as an A2A agent over real HTTP: the agent card lists the workflows marked as skills, and
//! JSON-RPC at `/a2a` (v0.3 and v1.0 method names) sends messages that start them, reads, cancels
//! and streams their tasks, refuses bad requests with A2A's codes, and keeps every task across a
//! restart (a task is a workflow). Then the official Python `a2a-sdk` talks to the same node
//! (`tests/python/test_a2a_interop.py`).

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use harness::{nonce, task_def, Api, Server};
use serde_json::{json, Value};

/// The `a2a-sdk` release the interop test is run with (`.ci/run` installs the same).
const A2A_SDK_VERSION: &str = "1.3.0";
const WAIT: Duration = Duration::from_secs(20);
const PYTEST_DEADLINE: Duration = Duration::from_secs(180);
/// The task type of the worker skill's one task, done by the test.
const WORKER_TASK: &str = "a2a_step";

/// Registers the skills `sum` (system tasks only), `a2a_worker` (one worker task) and a
/// workflow that is not a skill.
fn register(api: &Api) {
    api.register_task_defs(&[task_def(WORKER_TASK, json!({}))]);
    let sum = json!({
        "name": "a2a_sum", "version": 1, "schemaVersion": 2, "description": "adds a and b",
        "metadata": {"a2a": {"skill": {"id": "sum", "name": "Sum", "tags": ["math"]}}},
        "tasks": [{"name": "add", "taskReferenceName": "add", "type": "INLINE",
                   "inputParameters": {"evaluatorType": "graaljs", "a": "${workflow.input.a}",
                                       "b": "${workflow.input.b}",
                                       "expression": "(function () { return $.a + $.b; })()"}}],
        "outputParameters": {"sum": "${add.output.result}", "text": "${workflow.input.text}"},
    });
    let worker = json!({
        "name": "a2a_worker", "version": 1, "schemaVersion": 2,
        "metadata": {"a2a": {"skill": {"description": "one worker step"}}},
        "tasks": [{"name": WORKER_TASK, "taskReferenceName": "step", "type": "SIMPLE"}],
        "outputParameters": {"done": "${step.output.done}"},
    });
    let hidden = json!({
        "name": "a2a_hidden", "version": 1, "schemaVersion": 2, "metadata": {"owner": "ops"},
        "tasks": [{"name": "noop", "taskReferenceName": "noop", "type": "SET_VARIABLE",
                   "inputParameters": {"x": 1}}],
    });
    for def in [sum, worker, hidden] {
        api.register_workflow_def(&def);
    }
}

fn start() -> Server {
    let server = Server::start();
    register(server.api());
    server
}

/// One JSON-RPC call; answers the whole response object.
fn call(api: &Api, method: &str, params: Value) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": nonce(), "method": method, "params": params});
    let reply = api.post_json("/a2a", &request).expect_ok(method);
    let answer = reply.json();
    assert_eq!(answer["id"], request["id"], "{method}: {answer}");
    answer
}

/// A call that must succeed; answers its result.
fn ok(api: &Api, method: &str, params: Value) -> Value {
    let answer = call(api, method, params);
    assert!(answer.get("error").is_none(), "{method}: {answer}");
    answer["result"].clone()
}

/// A call that must fail; answers its error code.
fn code(api: &Api, method: &str, params: Value) -> i64 {
    let answer = call(api, method, params);
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("{method}: expected an error, got {answer}"))
}

/// A v0.3 message to `skill` with `parts`.
fn message(skill: &str, parts: Value) -> Value {
    json!({"messageId": nonce(), "role": "user", "parts": parts,
           "metadata": {"skill": skill}, "kind": "message"})
}

/// How many workflows the node holds (a refused request must not add one).
fn workflow_count(api: &Api) -> u64 {
    let found = api
        .get("/api/workflow/search?size=1")
        .expect_ok("search")
        .json();
    found["totalHits"].as_u64().expect("totalHits")
}

#[test]
fn the_card_lists_the_skills_only() {
    let server = start();
    let card = server
        .api()
        .get("/.well-known/agent-card.json")
        .expect_ok("card")
        .json();
    let ids: Vec<&str> = card["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["a2a_worker", "sum"], "{card:#}");
    assert_eq!(card["skills"][1]["name"], "Sum");
    assert_eq!(card["skills"][1]["description"], "adds a and b");
    assert_eq!(card["skills"][0]["description"], "one worker step");
    let url = format!("{}/a2a", server.base_url());
    assert_eq!(card["url"], url.as_str());
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["supportedInterfaces"][0]["url"], url.as_str());
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert_eq!(card["capabilities"]["streaming"], true);
}

#[test]
fn bad_requests_answer_their_codes_and_change_nothing() {
    let server = start();
    let api = server.api();
    let before = workflow_count(api);
    let raw = api
        .post_raw("/a2a", "{not json", "application/json")
        .expect_ok("raw");
    assert_eq!(raw.json()["error"]["code"], -32700, "{}", raw.body);
    assert_eq!(code(api, "tasks/nothing", json!({})), -32601);
    let unknown = "01234567-89ab-cdef-0123-456789ab0001";
    assert_eq!(code(api, "tasks/get", json!({"id": unknown})), -32001);
    assert_eq!(code(api, "GetTask", json!({"id": "not-an-id"})), -32001);
    assert_eq!(code(api, "tasks/cancel", json!({"id": unknown})), -32001);
    assert_eq!(code(api, "tasks/get", json!({})), -32602);
    let no_skill = message("nope", json!([{"kind": "data", "data": {}}]));
    assert_eq!(
        code(api, "message/send", json!({"message": no_skill})),
        -32602
    );
    let unnamed = json!({"messageId": nonce(), "role": "user", "parts": [{"text": "x"}]});
    assert_eq!(
        code(api, "SendMessage", json!({"message": unnamed})),
        -32602
    );
    let file = message(
        "sum",
        json!([{"kind": "file", "file": {"uri": "http://x/y"}}]),
    );
    assert_eq!(code(api, "message/send", json!({"message": file})), -32005);
    let scalar = message("sum", json!([{"kind": "data", "data": 5}]));
    assert_eq!(
        code(api, "message/send", json!({"message": scalar})),
        -32602
    );
    // A workflow that is not a skill is not a task.
    let hidden = api.start_workflow("a2a_hidden", &json!({}));
    assert_eq!(code(api, "tasks/get", json!({"id": hidden})), -32001);
    assert_eq!(
        workflow_count(api),
        before + 1,
        "only the hidden start added one"
    );
}

#[test]
fn send_get_and_cancel_tasks() {
    let server = start();
    let api = server.api();
    // v0.3, blocking, a data part: the answer is the completed task with its output.
    let sent = message("sum", json!([{"kind": "data", "data": {"a": 2, "b": 3}}]));
    let params = json!({"message": sent, "configuration": {"blocking": true}});
    let task = ok(api, "message/send", params);
    assert_eq!(task["kind"], "task");
    assert_eq!(task["status"]["state"], "completed", "{task:#}");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["data"]["sum"], 5,
        "{task:#}"
    );
    assert_eq!(task["history"][0]["messageId"], sent["messageId"]);
    let context = task["contextId"].as_str().expect("contextId").to_owned();
    let wf = api.workflow(task["id"].as_str().expect("id"));
    assert_eq!(
        wf["correlationId"],
        context.as_str(),
        "the context is the correlation id"
    );
    // The same message again answers the same task (its id is the start's idempotency key).
    let again = ok(api, "message/send", json!({"message": sent}));
    assert_eq!(again["id"], task["id"]);

    // v1.0, a text part holding JSON, in a given context: the same completed task, v1.0 spelling.
    let text = json!({"messageId": nonce(), "role": "ROLE_USER", "contextId": "ctx-7",
                      "parts": [{"text": "{\"a\": 1, \"b\": 1}"}], "metadata": {"skill": "sum"}});
    let result = ok(api, "SendMessage", json!({"message": text}));
    assert_eq!(
        result["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{result:#}"
    );
    assert_eq!(result["task"]["contextId"], "ctx-7");
    assert_eq!(result["task"]["artifacts"][0]["parts"][0]["data"]["sum"], 2);

    // A plain text part is the input's `text`.
    let plain = message("sum", json!([{"kind": "text", "text": "hello"}]));
    let task = ok(api, "message/send", json!({"message": plain}));
    assert_eq!(
        task["artifacts"][0]["parts"][0]["data"]["text"], "hello",
        "{task:#}"
    );

    // Not blocking, a worker skill: working; read it; cancel it; read it canceled.
    let work = message("a2a_worker", json!([{"kind": "data", "data": {}}]));
    let params = json!({"message": work, "configuration": {"blocking": false}});
    let task = ok(api, "message/send", params);
    assert_eq!(task["status"]["state"], "working", "{task:#}");
    let id = task["id"].clone();
    let read = ok(api, "GetTask", json!({"id": id}));
    assert_eq!(read["status"]["state"], "TASK_STATE_WORKING");
    assert_eq!(read["history"][0]["role"], "ROLE_USER");
    let followup = json!({"messageId": nonce(), "role": "user", "taskId": id,
                          "parts": [{"kind": "text", "text": "more"}]});
    assert_eq!(
        code(api, "message/send", json!({"message": followup})),
        -32004
    );
    let canceled = ok(api, "tasks/cancel", json!({"id": id}));
    assert_eq!(canceled["status"]["state"], "canceled", "{canceled:#}");
    let read = ok(api, "tasks/get", json!({"id": id}));
    assert_eq!(read["status"]["state"], "canceled");
    assert_eq!(code(api, "tasks/cancel", json!({"id": id})), -32002);

    // The context's tasks.
    let listed = ok(api, "ListTasks", json!({"contextId": "ctx-7"}));
    assert_eq!(listed["totalSize"], 1, "{listed:#}");
    assert_eq!(listed["tasks"][0]["contextId"], "ctx-7");
}

/// A stream request answered on a thread.
struct Stream {
    /// Answers once the response's head arrived (the stream's first event is decided).
    up: mpsc::Receiver<()>,
    events: thread::JoinHandle<Vec<Value>>,
}

impl Stream {
    /// Posts the request; the events are read on a thread until the stream ends.
    fn open(api: &Api, method: &'static str, params: Value) -> Stream {
        let url = api.url("/a2a");
        let (tx, up) = mpsc::channel();
        let events = thread::spawn(move || {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
            let client = reqwest::blocking::Client::builder()
                .timeout(WAIT * 2)
                .build();
            let response = client.expect("client").post(url).json(&body).send();
            let response = response.expect("stream");
            let _ = tx.send(());
            let kind = response.headers()["content-type"].to_str().expect("type");
            assert!(kind.starts_with("text/event-stream"), "{kind}");
            BufReader::new(response)
                .lines()
                .map(|l| l.expect("line"))
                .filter_map(|l| l.strip_prefix("data:").map(|d| d.trim().to_owned()))
                .map(|d| serde_json::from_str::<Value>(&d).expect("JSON event"))
                .collect()
        });
        Stream { up, events }
    }

    /// Waits for the stream's head, then does `step`, then answers every event.
    fn after(self, step: impl FnOnce()) -> Vec<Value> {
        self.up.recv_timeout(WAIT).expect("the stream to begin");
        step();
        self.events.join().expect("stream thread")
    }
}

/// Completes the worker skill's pending task.
fn do_step(api: &Api) {
    let polled = api.poll_until(WORKER_TASK, "t42", WAIT);
    api.complete(&polled, json!({"done": true}));
}

#[test]
fn a_stream_shows_working_then_completed() {
    let server = start();
    let api = server.api();
    let work = message("a2a_worker", json!([{"kind": "data", "data": {}}]));
    let stream = Stream::open(api, "message/stream", json!({"message": work}));
    let events = stream.after(|| do_step(api));
    let results: Vec<&Value> = events.iter().map(|e| &e["result"]).collect();
    assert_eq!(results.len(), 3, "{events:#?}");
    assert_eq!(results[0]["kind"], "task");
    assert_eq!(results[0]["status"]["state"], "working");
    assert_eq!(results[1]["kind"], "artifact-update");
    assert_eq!(results[1]["artifact"]["parts"][0]["data"]["done"], true);
    assert_eq!(results[2]["kind"], "status-update");
    assert_eq!(results[2]["status"]["state"], "completed");
    assert_eq!(results[2]["final"], true);

    // v1.0: resubscribe to a running task, in v1.0's shapes.
    let work = message("a2a_worker", json!([{"kind": "data", "data": {}}]));
    let params = json!({"message": work, "configuration": {"blocking": false}});
    let id = ok(api, "message/send", params)["id"].clone();
    let stream = Stream::open(api, "SubscribeToTask", json!({"id": id}));
    let events = stream.after(|| do_step(api));
    let last = events.last().expect("events");
    assert_eq!(
        events[0]["result"]["task"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(code(api, "tasks/resubscribe", json!({"id": id})), -32004);
}

#[test]
fn a_task_survives_a_restart() {
    let mut server = start();
    let sent = message("sum", json!([{"kind": "data", "data": {"a": 20, "b": 22}}]));
    let task = ok(server.api(), "message/send", json!({"message": sent}));
    assert_eq!(task["status"]["state"], "completed", "{task:#}");
    server.restart();
    let read = ok(server.api(), "tasks/get", json!({"id": task["id"]}));
    assert_eq!(read["status"]["state"], "completed");
    assert_eq!(read["contextId"], task["contextId"]);
    assert_eq!(read["artifacts"][0]["parts"][0]["data"]["sum"], 42);
}

/// The repository's venv with `a2a-sdk` at [`A2A_SDK_VERSION`] (installed when missing).
fn ensure_sdk() {
    let python = harness::python::venv_python();
    let check = format!(
        "import importlib.metadata as m; assert m.version('a2a-sdk') == '{A2A_SDK_VERSION}'"
    );
    let present = Command::new(&python).args(["-c", &check]).output();
    if !present.is_ok_and(|o| o.status.success()) {
        let pin = format!("a2a-sdk=={A2A_SDK_VERSION}");
        let installed = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(["--no-input", &pin])
            .status()
            .expect("run pip");
        assert!(installed.success(), "pip install {pin} failed");
    }
}

#[test]
fn the_python_a2a_sdk_talks_to_baton() {
    ensure_sdk();
    let server = start();
    let env = [("BATON_A2A_REQUIRED", Some("1"))];
    let target = "tests/python/test_a2a_interop.py";
    harness::python::pytest(target, &server.base_url(), &env, PYTEST_DEADLINE);
}

/// A Serverless Workflow document marked in its header: greets whoever the message names.
const GREETER: &str = r#"document:
  dsl: '1.0.3'
  namespace: agents
  name: greeter
  version: '1.0.0'
  summary: greets by name
  metadata:
    a2a:
      skill:
        id: greet
        tags: [ hello ]
do:
  - greet:
      set:
        greeting: '${ "Hello, " + .name + "!" }'
"#;

#[test]
fn a_dsl_document_marked_as_a_skill_is_served_like_a_workflow() {
    let server = start();
    let api = server.api();
    let (status, body) = api.register_dsl(GREETER);
    assert_eq!(status, 200, "{body}");
    let card = api
        .get("/.well-known/agent-card.json")
        .expect_ok("card")
        .json();
    let greet = card["skills"]
        .as_array()
        .and_then(|skills| skills.iter().find(|s| s["id"] == "greet"))
        .cloned()
        .unwrap_or_else(|| panic!("the document's skill: {card:#}"));
    assert_eq!(greet["description"], "greets by name");
    assert_eq!(greet["tags"], json!(["hello"]));

    let sent = message(
        "greet",
        json!([{"kind": "text", "text": "{\"name\": \"Ada\"}"}]),
    );
    let task = ok(
        api,
        "message/send",
        json!({"message": sent, "configuration": {"blocking": true}}),
    );
    assert_eq!(task["status"]["state"], "completed", "{task:#}");
    let greeting = &task["artifacts"][0]["parts"][0]["data"]["greeting"];
    assert_eq!(greeting, "Hello, Ada!", "{task:#}");
    let id = task["id"].as_str().expect("id");
    let instance = api
        .get(&format!("/api/dsl/instances/{id}"))
        .expect_ok("instance")
        .json();
    assert_eq!(
        instance["phase"], "completed",
        "the task is the DSL instance"
    );
    let got = ok(api, "tasks/get", json!({"id": id}));
    assert_eq!(got["status"]["state"], "completed");
}

/// A document marked as a skill that waits for an approval event before it answers.
const APPROVER: &str = r#"document:
  dsl: '1.0.3'
  namespace: agents
  name: approver
  version: '1.0.0'
  metadata:
    a2a:
      skill:
        id: approve
do:
  - ask:
      listen:
        to:
          one:
            with:
              type: com.example.approval
  - answer:
      set:
        item: ${ $workflow.input.item }
        approved: ${ .[0].ok }
"#;

#[test]
fn a_listen_asks_for_input_and_a_message_with_the_task_id_delivers_it() {
    let server = start();
    let api = server.api();
    let (status, body) = api.register_dsl(APPROVER);
    assert_eq!(status, 200, "{body}");
    let sent = message(
        "approve",
        json!([{"kind": "data", "data": {"item": "laptop"}}]),
    );
    let task = ok(
        api,
        "message/send",
        json!({"message": sent, "configuration": {"blocking": true}}),
    );
    assert_eq!(task["status"]["state"], "input-required", "{task:#}");
    let id = task["id"].as_str().expect("id").to_owned();
    let got = ok(api, "GetTask", json!({"id": id}));
    assert_eq!(
        got["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{got:#}"
    );

    let answer = json!({"messageId": nonce(), "role": "user", "taskId": id, "kind": "message",
                        "parts": [{"kind": "data", "data": {"ok": true}}]});
    let params = json!({"message": answer, "configuration": {"blocking": true}});
    let done = ok(api, "message/send", params.clone());
    assert_eq!(done["status"]["state"], "completed", "{done:#}");
    let output = &done["artifacts"][0]["parts"][0]["data"];
    assert_eq!(
        output,
        &json!({"item": "laptop", "approved": true}),
        "{done:#}"
    );
    // The same message again finds the task ended.
    assert_eq!(code(api, "message/send", params), -32004);
}
