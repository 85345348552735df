//! Baton as an A2A client: a Serverless Workflow task `call: a2a` reads an agent's card, sends it
//! a message at most once and follows the task it answers until it settles. The agents are a
//! Python agent built with the official SDK (`tests/python/a2a_sum_agent.py`, whose task works
//! a while before it completes, so the call follows it with `tasks/get`; its card offers A2A 1.0
//! only, so the call speaks 1.0) and a skill of the calling node itself, through its own card
//! (v0.3) and behind a card that offers only 1.0. Killed with the send made and reported, the node follows the same
//! remote task after its restart without sending again; killed with the send claimed and not
//! made, it does not make it after the restart: the call fails, saying why. An agent's JSON-RPC
//! error faults the call with the runtime error (the spec's type for a2a calls). A
//! `message/stream` reads the agent's events to the end of its task; the output is their
//! results, in order.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use harness::python::venv_python;
use harness::upstream::{Answer, Upstream};
use harness::{free_port, wait_for, workspace_root, Api, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);
/// How long the Python agent's task works before it completes.
const AGENT_DELAY_S: &str = "3";

/// The Python agent, killed when dropped.
struct Agent {
    child: Child,
    api: Api,
    card: String,
}

impl Agent {
    fn start() -> Agent {
        let port = free_port();
        let script = workspace_root().join("tests/python/a2a_sum_agent.py");
        let child = Command::new(venv_python())
            .arg(&script)
            .arg(port.to_string())
            .arg(AGENT_DELAY_S)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        let base = format!("http://127.0.0.1:{port}");
        let api = Api::new(&base);
        let card = "/.well-known/agent-card.json";
        wait_for(WAIT, "the Python agent's card", || {
            api.try_get(card).ok().filter(|r| r.is_success())
        });
        Agent {
            child,
            api,
            card: format!("{base}{card}"),
        }
    }

    /// The ids of the messages the agent was sent.
    fn received(&self) -> Vec<Value> {
        let count = self.api.get("/count").expect_ok("the agent's count").json();
        count["ids"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A document whose one task sends `message` to the agent whose card is at `card`.
fn asking(name: &str, card: &str, parameters: &Value) -> String {
    calling(name, "message/send", card, parameters)
}

/// A document whose one task calls `method` of the agent whose card is at `card`.
fn calling(name: &str, method: &str, card: &str, parameters: &Value) -> String {
    format!(
        "document:\n  dsl: '1.0.3'\n  namespace: a2a\n  name: {name}\n  version: '1.0.0'\n\
         do:\n  - ask:\n      call: a2a\n      with:\n        method: {method}\n\
         \x20       agentCard:\n          endpoint: {card}\n        parameters: {parameters}\n"
    )
}

/// Registers `document` and starts an instance of it on `input`; answers its id.
fn start(api: &Api, name: &str, document: &str, input: &Value) -> String {
    let registered = reqwest::blocking::Client::new()
        .post(api.url("/api/dsl/workflows?overwrite=true"))
        .header("Content-Type", "application/yaml")
        .body(document.to_owned())
        .send()
        .expect("register");
    assert_eq!(
        registered.status().as_u16(),
        200,
        "{}",
        registered.text().unwrap_or_default()
    );
    let path = format!("/api/dsl/workflows/a2a/{name}/1.0.0/instances");
    let started = api.post_json(&path, input).expect_ok("start").json();
    started["id"].as_str().expect("id").to_owned()
}

/// Waits for the instance to end; answers its view.
fn ended(api: &Api, id: &str) -> Value {
    wait_for(WAIT, "the instance to end", || {
        let view: Value = api.get(&format!("/api/dsl/instances/{id}")).json();
        (view["phase"] == "completed" || view["phase"] == "faulted").then_some(view)
    })
}

/// The parameters of a non-blocking send of {a, b} from the input (so the call follows).
fn sum_message() -> Value {
    json!({"message": {"role": "user", "kind": "message",
        "parts": [{"kind": "data", "data": {"a": "${ .a }", "b": "${ .b }"}}]},
        "configuration": {"blocking": false}})
}

/// The sum in a completed task's artifact.
fn sum_of(task: &Value) -> f64 {
    let sum = task.pointer("/artifacts/0/parts/0/data/sum");
    sum.and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("a sum: {task:#}"))
}

#[test]
fn a_workflow_calls_a_python_agent_and_follows_its_task() {
    let agent = Agent::start();
    let server = Server::start();
    let api = server.api();
    let document = asking("ask-python", &agent.card, &sum_message());
    let id = start(api, "ask-python", &document, &json!({"a": 2, "b": 3}));
    let view = ended(api, &id);
    assert_eq!(view["phase"], "completed", "{view:#}");
    assert_eq!(view["output"]["status"]["state"], "completed", "{view:#}");
    assert_eq!(sum_of(&view["output"]), 5.0);
    let polls = view["tasks"].as_array().map_or(0, |tasks| {
        tasks.iter().filter(|t| t["type"] == "WAIT").count()
    });
    assert!(polls >= 1, "the call followed the task: {view:#}");
    let received = agent.received();
    assert_eq!(received.len(), 1, "one message: {received:?}");
    let sent = received[0].as_str().unwrap_or_default();
    assert!(
        sent.starts_with("baton-"),
        "the message id is Baton's: {sent}"
    );
}

/// Registers `name`, a workflow that sums `a` and `b`, as the skill `skill`; answers the
/// parameters of a message that asks it for the sum of the input's `a` and `b`.
fn sum_skill(api: &Api, name: &str, skill: &str) -> Value {
    api.register_workflow_def(&json!({
        "name": name, "version": 1, "schemaVersion": 2,
        "metadata": {"a2a": {"skill": {"id": skill, "name": "Sum"}}},
        "tasks": [{"name": "add", "taskReferenceName": "add", "type": "JSON_JQ_TRANSFORM",
                   "inputParameters": {"a": "${workflow.input.a}", "b": "${workflow.input.b}",
                                       "queryExpression": "{sum: (.a + .b)}"}}],
        "outputParameters": {"sum": "${add.output.result.sum}"},
    }));
    json!({"message": {"role": "user", "kind": "message", "metadata": {"skill": skill},
        "parts": [{"kind": "data", "data": {"a": "${ .a }", "b": "${ .b }"}}]}})
}

#[test]
fn a_workflow_calls_a_skill_of_its_own_node() {
    let server = Server::start();
    let api = server.api();
    let parameters = sum_skill(api, "a2a_client_sum", "sum");
    let card = format!("{}/.well-known/agent-card.json", server.base_url());
    let document = asking("ask-self", &card, &parameters);
    let id = start(api, "ask-self", &document, &json!({"a": 20, "b": 22}));
    let view = ended(api, &id);
    assert_eq!(view["phase"], "completed", "{view:#}");
    let task = &view["output"];
    assert_eq!(task["status"]["state"], "completed", "{view:#}");
    assert_eq!(sum_of(task), 42.0);
    let skill_run = api.workflow(task["id"].as_str().expect("the remote task's id"));
    assert_eq!(skill_run["workflowName"], "a2a_client_sum");
}

#[test]
fn a_workflow_calls_an_agent_that_speaks_only_a2a_1_0_in_its_terms() {
    let server = Server::start();
    let api = server.api();
    let parameters = sum_skill(api, "a2a_v1_sum", "sum1");
    // The node's own endpoint behind a card that offers only a 1.0 interface.
    let card = json!({"name": "v1-only", "supportedInterfaces": [{"url": format!("{}/a2a", server.base_url()),
        "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]})
    .to_string();
    let upstream = Upstream::start(move |_| Answer::new("200 OK", &card));
    let document = asking("ask-v1", &upstream.url("/card"), &parameters);
    let id = start(api, "ask-v1", &document, &json!({"a": 40, "b": 2}));
    let view = ended(api, &id);
    assert_eq!(view["phase"], "completed", "{view:#}");
    let task = &view["output"];
    assert_eq!(task["kind"], "task", "read back in v0.3's terms: {view:#}");
    assert_eq!(task["status"]["state"], "completed", "{view:#}");
    assert_eq!(sum_of(task), 42.0);
}

/// The sum in the artifact a stream's results carry, and the last result's state.
fn streamed_sum(view: &Value) -> (f64, Value) {
    let results = view["output"].as_array();
    let results = results.unwrap_or_else(|| panic!("a list of results: {view:#}"));
    let update = results.iter().find(|r| r["kind"] == "artifact-update");
    let sum = update.and_then(|u| u.pointer("/artifact/parts/0/data/sum"));
    let sum = sum.and_then(Value::as_f64);
    let last = results.last().map(|r| r["status"]["state"].clone());
    (
        sum.unwrap_or_else(|| panic!("a sum: {view:#}")),
        last.unwrap_or_default(),
    )
}

#[test]
fn a_workflow_streams_messages_to_a_python_agent_and_to_its_own_node() {
    let agent = Agent::start();
    let server = Server::start();
    let api = server.api();
    let parameters =
        json!({"message": {"parts": [{"kind": "data", "data": {"a": "${ .a }", "b": "${ .b }"}}]}});
    let document = calling("stream-python", "message/stream", &agent.card, &parameters);
    let id = start(api, "stream-python", &document, &json!({"a": 2, "b": 3}));
    let view = ended(api, &id);
    assert_eq!(view["phase"], "completed", "{view:#}");
    assert_eq!(view["output"][0]["kind"], "task", "{view:#}");
    assert_eq!(streamed_sum(&view), (5.0, json!("completed")));
    assert_eq!(agent.received().len(), 1, "one message");

    let parameters = sum_skill(api, "a2a_stream_sum", "stream_sum");
    let card = format!("{}/.well-known/agent-card.json", server.base_url());
    let document = calling("stream-self", "message/stream", &card, &parameters);
    let id = start(api, "stream-self", &document, &json!({"a": 40, "b": 2}));
    let view = ended(api, &id);
    assert_eq!(view["phase"], "completed", "{view:#}");
    assert_eq!(streamed_sum(&view), (42.0, json!("completed")));
    let last = view["output"].as_array().and_then(|r| r.last().cloned());
    assert_eq!(last.unwrap_or_default()["final"], true, "{view:#}");
}

/// A marker path for a failpoint, and the node started with it armed at `point`.
fn armed(point: &str) -> (Server, PathBuf) {
    let marker_path = harness::arm_failpoint(point);
    (Server::start(), marker_path)
}

#[test]
fn a_restart_follows_the_task_it_sent_without_sending_again() {
    let agent = Agent::start();
    let (mut server, marker) = armed("http-once-reported");
    let api = server.api().clone();
    let document = asking("ask-durable", &agent.card, &sum_message());
    let id = start(&api, "ask-durable", &document, &json!({"a": 4, "b": 5}));
    let status = server.wait_exit(WAIT);
    assert!(
        !status.success(),
        "the failpoint aborts the node: {status:?}"
    );
    assert!(marker.exists(), "the failpoint fired");
    server.restart();
    let view = ended(&api, &id);
    assert_eq!(view["phase"], "completed", "{view:#}");
    assert_eq!(sum_of(&view["output"]), 9.0);
    assert_eq!(agent.received().len(), 1, "the message was sent once");
}

#[test]
fn a_send_claimed_before_a_crash_is_not_made_after_the_restart() {
    let agent = Agent::start();
    let (mut server, marker) = armed("http-once-claimed");
    let api = server.api().clone();
    let document = asking("ask-claimed", &agent.card, &sum_message());
    let id = start(&api, "ask-claimed", &document, &json!({"a": 1, "b": 1}));
    let status = server.wait_exit(WAIT);
    assert!(
        !status.success(),
        "the failpoint aborts the node: {status:?}"
    );
    assert!(marker.exists(), "the failpoint fired");
    server.restart();
    let view = ended(&api, &id);
    assert_eq!(view["phase"], "faulted", "{view:#}");
    let error = &view["error"];
    assert_eq!(
        error["type"],
        "https://serverlessworkflow.io/spec/1.0.0/errors/runtime"
    );
    let detail = error["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("not repeated"), "{view:#}");
    assert!(
        agent.received().is_empty(),
        "the claimed send was never made"
    );
}

#[test]
fn an_agents_json_rpc_error_faults_the_call_with_the_runtime_error() {
    let server = Server::start();
    let api = server.api();
    let card = format!("{}/.well-known/agent-card.json", server.base_url());
    let parameters = json!({"message": {"role": "user", "kind": "message",
        "metadata": {"skill": "no_such_skill"}, "parts": [{"kind": "text", "text": "hi"}]}});
    let document = asking("ask-nobody", &card, &parameters);
    let id = start(api, "ask-nobody", &document, &json!({}));
    let view = ended(api, &id);
    assert_eq!(view["phase"], "faulted", "{view:#}");
    let error = &view["error"];
    assert_eq!(
        error["type"],
        "https://serverlessworkflow.io/spec/1.0.0/errors/runtime"
    );
    assert_eq!(error["instance"], "/do/0/ask");
    let detail = error["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with("A2A error -32"), "{view:#}");
}
