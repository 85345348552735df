//! `call: a2a`: a durable A2A client, one Conductor task per stage. With an `agentCard`, an HTTP
//! task reads the card first and the JSON-RPC endpoint is its `url` (v0.3) or the `url` of its
//! JSON-RPC interface (`supportedInterfaces`, v1.0); otherwise it is `server`. An agent whose
//! card offers only a 1.0 interface is called in 1.0's terms, and its answers read back in
//! v0.3's, so a document does not depend on the version its agent speaks ([`dialect`]). The request goes
//! out as an HTTP task whose call is made at most once (`atMostOnce`: the leader commits a
//! claim before calling, so a restart never sends it again); a `message/send` carries a
//! `messageId` derived from the call's task when the caller gave none (a receiving Baton dedups
//! on it) and `configuration.blocking: true` unless given. An answer that is a task still
//! `submitted` or `working` is followed: a WAIT task, then a `tasks/get` poll (an ordinary
//! HTTP task: a read, repeated if its report is lost), the wait doubling from
//! [`POLL_FIRST_MS`] to [`POLL_MAX_MS`], until the task settles. The call's output is the last
//! JSON-RPC `result`. A JSON-RPC error, a task that failed, was rejected or canceled, or an
//! HTTP failure raises the communication error, its detail naming what went wrong.
//! `input-required` and `auth-required` settle the call too: the remote task waits for
//! someone else, and the output is the task as it stands.
//!
//! `message/stream` and `tasks/resubscribe` answer server-sent events: the HTTP task reads the
//! stream to its end (or until its read timeout) and the call's output is the ordered list of
//! the events' results, as the spec asks. A stream that ends before its task settled (the
//! agent closed it early, or the read timed out) is followed with `tasks/get` polls as above,
//! and the settled task is the list's last item. A failure raises the runtime error (the
//! spec's type for a2a calls), its detail naming what went wrong.
//!
//! The decider makes no call itself: each stage is a task the runtime performs after the commit,
//! and [`Runner::a2a`] reads its end from the record.

use super::a2a_dialect as dialect;
use super::{errors, Outcome, Runner};
use proto::model::dsl::{A2aCall, A2aStage, Body, Frame};
use proto::model::{task_type, TaskStatus};
use proto::TaskId;
use serde_json::{json, Map, Value};

/// The wait before the first `tasks/get`.
pub(crate) const POLL_FIRST_MS: i64 = 1_000;
/// The longest wait between two `tasks/get` (the wait doubles up to it).
pub(crate) const POLL_MAX_MS: i64 = 30_000;
/// The most `tasks/get` one call makes (about three days at the longest wait).
pub(crate) const POLLS_MAX: u32 = 10_000;
/// The Conductor task type that shows the call as a whole.
const CALL_TASK_TYPE: &str = "dsl/call";
/// The method that sends a message, the one that streams it, and the one that reads a task
/// (A2A 0.3's names, the ones the DSL's schema lists).
const SEND: &str = "message/send";
const STREAM: &str = "message/stream";
const GET: &str = "tasks/get";
/// The methods answered by a stream of events.
const STREAMS: [&str; 2] = [STREAM, "tasks/resubscribe"];
/// The methods that only read, called again when a report is lost; every other is sent at most
/// once.
const READS: [&str; 4] = [
    GET,
    "tasks/pushNotificationConfig/get",
    "tasks/pushNotificationConfig/list",
    "agent/getAuthenticatedExtendedCard",
];

/// What went wrong with an A2A call.
#[derive(Debug, Clone, PartialEq)]
enum Failure {
    /// An HTTP task failed (no answer, or a status outside 2xx) while doing `what`.
    Http {
        what: &'static str,
        status: u16,
        reason: String,
    },
    /// The card names no JSON-RPC endpoint.
    Card,
    /// The agent answered with a JSON-RPC error.
    Rpc { code: i64, message: String },
    /// The remote task ended `state` (failed, rejected, canceled).
    Task {
        id: String,
        state: String,
        message: String,
    },
    /// The remote task was still running after [`POLLS_MAX`] polls.
    Polls { id: String },
    /// A stream ended carrying no event.
    Empty,
    /// An answer left its task running and named no task id to follow it by.
    Untracked,
    /// A stage's task is missing from the record.
    Record,
}

impl Failure {
    /// The DSL error this raises at `at`.
    fn problem(&self, at: &str) -> Value {
        let kind = errors::Kind::Runtime;
        let detail = match self {
            Failure::Http {
                what,
                status,
                reason,
            } => return errors::with_status(kind, *status, at, &format!("{what}: {reason}")),
            Failure::Card => "the agent card names no JSON-RPC endpoint".to_owned(),
            Failure::Rpc { code, message } => format!("A2A error {code}: {message}"),
            Failure::Task { id, state, message } => {
                format!("the A2A task {id} ended {state}: {message}")
            }
            Failure::Polls { id } => {
                format!("the A2A task {id} still runs after {POLLS_MAX} polls")
            }
            Failure::Empty => "the agent's stream ended carrying no event".to_owned(),
            Failure::Untracked => {
                "the agent's task still runs and its answer names no task id to follow".to_owned()
            }
            Failure::Record => return errors::runtime_error(at, "the call's task is missing"),
        };
        errors::standard(kind, at, &detail)
    }
}

/// How a remote task stands, in either protocol version's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    Running,
    Settled,
    Failed,
}

/// The standing of a task state (`working` or `TASK_STATE_WORKING`); an unknown state settles.
fn standing(state: &str) -> Standing {
    let name = match state.strip_prefix("TASK_STATE_") {
        Some(v10) => v10.to_ascii_lowercase().replace('_', "-"),
        None => state.to_owned(),
    };
    match name.as_str() {
        "submitted" | "working" => Standing::Running,
        "failed" | "rejected" | "canceled" | "cancelled" => Standing::Failed,
        _ => Standing::Settled,
    }
}

impl Runner<'_, '_> {
    /// Starts a `call: a2a` on its evaluated `with`: the card's read, or the request itself.
    pub(super) fn start_a2a(
        &mut self,
        at: &str,
        name: &str,
        args: &Value,
        input: Value,
    ) -> Result<Frame, Value> {
        let method = args
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let card = args
            .get("agentCard")
            .map(|c| c.get("endpoint").unwrap_or(c));
        let endpoint = card.or_else(|| args.get("server"));
        if method.is_empty() || endpoint.is_none() {
            let detail = "a2a needs a method, and an agentCard or a server";
            return Err(errors::configuration_error(&format!("{at}/with"), detail));
        }
        let authorization = self.authentication(at, &json!({ "endpoint": endpoint }))?;
        let task_id = self.open_task(at, name, CALL_TASK_TYPE, "", &input);
        let mut params = args.get("parameters").cloned().unwrap_or(json!({}));
        if method == SEND || method == STREAM {
            params = send_params(params, &task_id, method == SEND);
        }
        let mut call = A2aCall {
            stage: A2aStage::Card,
            step: task_id.clone(),
            method: method.to_owned(),
            params,
            url: String::new(),
            authorization,
            remote_task: None,
            polls: 0,
            v1: false,
            streamed: Vec::new(),
        };
        match card {
            Some(card) => {
                let uri = super::call::endpoint_uri(Some(card));
                let request = json!({"uri": uri, "method": "GET",
                    "headers": headers(call.authorization.as_deref())});
                let input = json!({ "http_request": request });
                call.step = self.open_task(at, name, task_type::HTTP, "", &input);
            }
            None => {
                call.url = super::call::endpoint_uri(args.get("server"));
                self.a2a_send(at, name, &task_id, &mut call);
            }
        }
        Ok(Frame {
            at: at.to_owned(),
            name: name.to_owned(),
            task_id,
            input,
            body: Body::A2a(Box::new(call)),
            deadline: None,
        })
    }

    /// Moves a `call: a2a` on once its stage's task ended.
    pub(super) fn a2a(&mut self, frame: &mut Frame) -> Outcome {
        let Frame {
            at,
            name,
            task_id,
            body,
            ..
        } = frame;
        let Body::A2a(call) = body else {
            return Outcome::Pending;
        };
        match self.a2a_stage(at, name, task_id, call) {
            Ok(Some(output)) => Outcome::done(output),
            Ok(None) => Outcome::Pending,
            Err(failure) => Outcome::Fault(failure.problem(at)),
        }
    }

    /// The next stage, the call's output (`Some`), or what went wrong.
    fn a2a_stage(
        &mut self,
        at: &str,
        name: &str,
        call_id: &TaskId,
        call: &mut A2aCall,
    ) -> Result<Option<Value>, Failure> {
        let step = self.task(&call.step).ok_or(Failure::Record)?;
        if !step.status.is_terminal() {
            return Ok(None);
        }
        if call.stage == A2aStage::Wait {
            self.a2a_poll(at, name, call_id, call);
            return Ok(None);
        }
        let body = self.answered(call)?;
        if call.stage == A2aStage::Card {
            let (url, v1) = card_url(&body, &self.step_uri(&call.step)).ok_or(Failure::Card)?;
            (call.url, call.v1) = (url, v1);
            self.a2a_send(at, name, call_id, call);
            return Ok(None);
        }
        let streams = STREAMS.contains(&call.method.as_str());
        if streams && call.stage == A2aStage::Send {
            return self.a2a_streamed(at, name, call, body);
        }
        let result = read_result(call, body)?;
        let follows = call.method == SEND || call.stage == A2aStage::Poll;
        let Some(task) = task_of(&result).filter(|_| follows) else {
            return Ok(Some(result));
        };
        if self.a2a_follow(at, name, call, task)? {
            return Ok(None);
        }
        if !streams {
            return Ok(Some(result));
        }
        call.streamed.push(result);
        Ok(Some(Value::Array(std::mem::take(&mut call.streamed))))
    }

    /// Reads a stream's events (`body`, their list) into the call: its output once the stream
    /// showed its task settled, else the wait before the task is polled.
    fn a2a_streamed(
        &mut self,
        at: &str,
        name: &str,
        call: &mut A2aCall,
        body: Value,
    ) -> Result<Option<Value>, Failure> {
        let events = match body {
            Value::Array(events) => events,
            one => vec![one],
        };
        for event in events {
            let result = read_result(call, event)?;
            call.streamed.push(result);
        }
        let last = stream_standing(&call.streamed).ok_or(Failure::Empty)?;
        if self.a2a_follow(at, name, call, &last)? {
            return Ok(None);
        }
        Ok(Some(Value::Array(std::mem::take(&mut call.streamed))))
    }

    /// The body the stage's HTTP task answered, or how it failed.
    fn answered(&self, call: &A2aCall) -> Result<Value, Failure> {
        let step = self.task(&call.step).ok_or(Failure::Record)?;
        let response = step.output_data.get("response");
        if step.status == TaskStatus::Completed {
            let body = response.and_then(|r| r.get("body")).cloned();
            return Ok(body.unwrap_or_default());
        }
        let what = match call.stage {
            A2aStage::Card => "reading the agent card",
            A2aStage::Send => "sending the request",
            A2aStage::Wait | A2aStage::Poll => "reading the task",
        };
        let status = response.and_then(|r| r.get("statusCode"));
        let status = status
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok());
        Err(Failure::Http {
            what,
            status: status.filter(|s| *s >= 400).unwrap_or(500),
            reason: step.reason_for_incompletion.clone().unwrap_or_default(),
        })
    }

    /// Follows the remote `task` a result is: whether it still runs (then the wait before the
    /// next poll starts), or how it failed.
    fn a2a_follow(
        &mut self,
        at: &str,
        name: &str,
        call: &mut A2aCall,
        task: &Value,
    ) -> Result<bool, Failure> {
        let id = task.get("id").and_then(Value::as_str).unwrap_or_default();
        let state = task.pointer("/status/state").and_then(Value::as_str);
        let state = state.unwrap_or_default();
        match standing(state) {
            Standing::Settled => Ok(false),
            Standing::Failed => Err(Failure::Task {
                id: id.to_owned(),
                state: state.to_owned(),
                message: status_text(task),
            }),
            Standing::Running if id.is_empty() => Err(Failure::Untracked),
            Standing::Running if call.polls >= POLLS_MAX => Err(Failure::Polls { id: id.into() }),
            Standing::Running => {
                call.remote_task = Some(id.to_owned());
                let due = self.ctx.now.saturating_add(poll_delay_ms(call.polls));
                call.step = self.open_wait(at, name, due, &json!({ "a2aTask": id }));
                call.stage = A2aStage::Wait;
                Ok(true)
            }
        }
    }
    /// Sends the call's request: an HTTP task, at most once unless the method only reads.
    fn a2a_send(&mut self, at: &str, name: &str, call_id: &TaskId, call: &mut A2aCall) {
        let body = match call.v1 {
            true => rpc(
                call_id,
                dialect::method(&call.method),
                &dialect::params(&call.params),
            ),
            false => rpc(call_id, &call.method, &call.params),
        };
        let mut request = post(call, body);
        if STREAMS.contains(&call.method.as_str()) {
            request["headers"]["Accept"] = "text/event-stream".into();
        }
        let mut input = json!({ "http_request": request });
        if !READS.contains(&call.method.as_str()) {
            input[proto::model::HTTP_AT_MOST_ONCE] = true.into();
        }
        call.step = self.open_task(at, name, task_type::HTTP, "", &input);
        call.stage = A2aStage::Send;
    }

    /// Reads the remote task once more (`tasks/get`).
    fn a2a_poll(&mut self, at: &str, name: &str, call_id: &TaskId, call: &mut A2aCall) {
        let id = call.remote_task.clone().unwrap_or_default();
        let method = if call.v1 { dialect::method(GET) } else { GET };
        let body = rpc(call_id, method, &json!({ "id": id }));
        let input = json!({ "http_request": post(call, body) });
        call.step = self.open_task(at, name, task_type::HTTP, "", &input);
        call.stage = A2aStage::Poll;
        call.polls = call.polls.saturating_add(1);
    }

    /// The URI an HTTP task called.
    fn step_uri(&self, step: &TaskId) -> String {
        let task = self.task(step);
        let request = task.and_then(|t| t.input_data.get("http_request"));
        let uri = request.and_then(|r| r.get("uri"));
        uri.and_then(Value::as_str).unwrap_or_default().to_owned()
    }
}

/// A `message/send`'s or `message/stream`'s parameters: the message's `messageId` derived from
/// the call's task and its `role` `user`, unless given; when `blocks` (a send),
/// `configuration.blocking` true unless given.
fn send_params(mut params: Value, call_id: &TaskId, blocks: bool) -> Value {
    if let Some(message) = params.get_mut("message").and_then(Value::as_object_mut) {
        let given = |m: &Map<String, Value>, k: &str| m.get(k).is_some_and(|v| !v.is_null());
        if !given(message, "messageId") {
            message.insert("messageId".into(), format!("baton-{call_id}").into());
        }
        if !given(message, "role") {
            message.insert("role".into(), "user".into());
        }
    }
    if let Some(map) = params.as_object_mut().filter(|_| blocks) {
        let configuration = map.entry("configuration").or_insert_with(|| json!({}));
        if let Some(configuration) = configuration.as_object_mut() {
            configuration.entry("blocking").or_insert(true.into());
        }
    }
    params
}

/// A JSON-RPC 2.0 request, its id the call's task.
fn rpc(call_id: &TaskId, method: &str, params: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": call_id.as_str(), "method": method, "params": params})
}

/// The headers of the call's requests.
fn headers(authorization: Option<&str>) -> Value {
    let mut headers = Map::new();
    headers.insert("Accept".into(), "application/json".into());
    if let Some(authorization) = authorization {
        headers.insert("Authorization".into(), authorization.into());
    }
    Value::Object(headers)
}

/// Conductor's `http_request` that posts `body` to the call's endpoint.
fn post(call: &A2aCall, body: Value) -> Value {
    let mut headers = headers(call.authorization.as_deref());
    if call.v1 {
        headers[dialect::VERSION_HEADER] = dialect::VERSION.into();
    }
    json!({"uri": call.url, "method": "POST", "headers": headers, "body": body})
}

/// The JSON-RPC endpoint a card names: its `url` (v0.3, when its preferred transport is
/// JSON-RPC), else an interface bound to JSON-RPC (v1.0's `supportedInterfaces`, v0.3's
/// `additionalInterfaces`); a relative URL is resolved against the card's own `card_uri`.
/// Whether the agent is called in 1.0's terms: the endpoint is an interface of protocol
/// version 1.x.
fn card_url(card: &Value, card_uri: &str) -> Option<(String, bool)> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let jsonrpc = |b: Option<String>| b.is_some_and(|b| b.eq_ignore_ascii_case("JSONRPC"));
    let preferred = text(card, "preferredTransport");
    let v03 = text(card, "url").filter(|_| preferred.is_none() || jsonrpc(preferred.clone()));
    let interfaces = ["supportedInterfaces", "additionalInterfaces"].into_iter();
    let listed = interfaces
        .filter_map(|k| card.get(k).and_then(Value::as_array))
        .flatten()
        .find(|i| jsonrpc(text(i, "protocolBinding").or_else(|| text(i, "transport"))));
    let v1 = v03.is_none()
        && listed
            .and_then(|i| text(i, "protocolVersion"))
            .is_some_and(|v| v.starts_with("1."));
    let url = v03.or_else(|| listed.and_then(|i| text(i, "url")))?;
    if !url.starts_with('/') {
        return Some((url, v1));
    }
    let (scheme, rest) = card_uri.split_once("://")?;
    let host = rest.split('/').next().unwrap_or_default();
    Some((format!("{scheme}://{host}{url}"), v1))
}

/// A JSON-RPC answer's `result`, or its error.
fn rpc_result(answer: Value) -> Result<Value, Failure> {
    if let Some(error) = answer.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = error.get("message").and_then(Value::as_str);
        let message = message.map_or_else(|| error.to_string(), str::to_owned);
        return Err(Failure::Rpc { code, message });
    }
    match answer {
        Value::Object(mut map) if map.contains_key("result") => {
            Ok(map.remove("result").unwrap_or_default())
        }
        other => Err(Failure::Rpc {
            code: 0,
            message: format!("not a JSON-RPC answer: {other}"),
        }),
    }
}

/// An answer's `result` in v0.3's shapes (read back from 1.0's when the agent speaks 1.0), or
/// its error.
fn read_result(call: &A2aCall, answer: Value) -> Result<Value, Failure> {
    let result = rpc_result(answer)?;
    Ok(match call.v1 {
        true => dialect::as_v03(result),
        false => result,
    })
}

/// How the task a stream's results show stands after its last one, as `{id, status}`: a
/// message settles it, and so does a `final` update that says nothing else; `None` when the
/// stream was empty.
fn stream_standing(results: &[Value]) -> Option<Value> {
    let last = results.last()?;
    let kind = last.get("kind").and_then(Value::as_str);
    let mut status = match kind {
        Some("message") => json!({"state": "completed"}),
        Some("artifact-update") => json!({"state": "working"}),
        _ => last.get("status").cloned().unwrap_or_default(),
    };
    let state = status.get("state").and_then(Value::as_str);
    let last_word = last.get("final") == Some(&Value::Bool(true));
    if last_word && standing(state.unwrap_or_default()) == Standing::Running {
        status = json!({"state": "completed"});
    }
    let task_id = |r: &Value| {
        let id = r
            .get("taskId")
            .or_else(|| task_of(r).and_then(|t| t.get("id")));
        id.and_then(Value::as_str).map(str::to_owned)
    };
    let id = results.iter().rev().find_map(task_id).unwrap_or_default();
    Some(json!({"id": id, "status": status}))
}

/// The task a result is: the result itself (v0.3, `kind: task`), or its `task` (v1.0); `None`
/// for a message.
fn task_of(result: &Value) -> Option<&Value> {
    if let Some(task) = result.get("task").filter(|t| t.is_object()) {
        return Some(task);
    }
    let kind = result.get("kind").and_then(Value::as_str);
    let is_task = kind == Some("task") || (kind.is_none() && result.get("status").is_some());
    is_task.then_some(result)
}

/// The text of a task's status message (its text parts), for an error's detail.
fn status_text(task: &Value) -> String {
    let parts = task
        .pointer("/status/message/parts")
        .and_then(Value::as_array);
    let texts: Vec<&str> = parts
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        "no message".to_owned()
    } else {
        texts.join(" ")
    }
}

/// The wait before poll number `polls + 1`: doubling from the first, at most the longest.
pub(crate) fn poll_delay_ms(polls: u32) -> i64 {
    POLL_FIRST_MS
        .saturating_mul(1_i64 << polls.min(16))
        .min(POLL_MAX_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_alike_in_both_versions() {
        assert_eq!(standing("working"), Standing::Running);
        assert_eq!(standing("TASK_STATE_SUBMITTED"), Standing::Running);
        assert_eq!(standing("TASK_STATE_INPUT_REQUIRED"), Standing::Settled);
        assert_eq!(standing("auth-required"), Standing::Settled);
        assert_eq!(standing("completed"), Standing::Settled);
        assert_eq!(standing("TASK_STATE_REJECTED"), Standing::Failed);
        assert_eq!(standing("canceled"), Standing::Failed);
    }

    #[test]
    fn the_wait_between_polls_doubles_to_its_maximum() {
        let waits: Vec<i64> = (0..7).map(poll_delay_ms).collect();
        assert_eq!(waits, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
        assert_eq!(poll_delay_ms(u32::MAX), POLL_MAX_MS);
    }

    #[test]
    fn a_card_names_its_jsonrpc_endpoint() {
        let v03 = json!({"url": "http://a/rpc", "preferredTransport": "JSONRPC"});
        assert_eq!(
            card_url(&v03, "http://a/card"),
            Some(("http://a/rpc".into(), false))
        );
        let v10 = json!({"supportedInterfaces": [
            {"url": "http://a/grpc", "protocolBinding": "GRPC"},
            {"url": "/rpc", "protocolBinding": "JSONRPC"}]});
        assert_eq!(
            card_url(&v10, "http://a:8/.well-known/agent-card.json"),
            Some(("http://a:8/rpc".into(), false)),
            "no 1.x protocol version named"
        );
        let other = json!({"url": "http://a/rest", "preferredTransport": "HTTP+JSON",
            "additionalInterfaces": [{"url": "http://a/rpc", "transport": "JSONRPC"}]});
        assert_eq!(card_url(&other, ""), Some(("http://a/rpc".into(), false)));
        assert_eq!(card_url(&json!({"name": "x"}), ""), None);
    }

    #[test]
    fn a_send_gets_a_message_id_and_blocks_unless_told() {
        let id = TaskId::new(proto::PartitionId(0), 1);
        let params = send_params(json!({"message": {"parts": []}}), &id, true);
        assert_eq!(params["message"]["messageId"], format!("baton-{id}"));
        assert_eq!(params["message"]["role"], "user");
        assert_eq!(params["configuration"]["blocking"], true);
        let given = json!({"message": {"messageId": "m", "role": "agent"},
            "configuration": {"blocking": false}});
        assert_eq!(send_params(given.clone(), &id, true), given);
        let streamed = send_params(json!({"message": {}}), &id, false);
        assert!(
            streamed.get("configuration").is_none(),
            "a stream does not block"
        );
    }

    #[test]
    fn a_streams_last_result_says_how_its_task_stands() {
        let task = json!({"kind": "task", "id": "r", "status": {"state": "submitted"}});
        let working = json!({"kind": "status-update", "taskId": "r", "status": {"state": "working"}, "final": false});
        let done = json!({"kind": "status-update", "taskId": "r", "status": {"state": "completed"}, "final": true});
        let artifact = json!({"kind": "artifact-update", "taskId": "r", "artifact": {}});
        let standing_of = |results: &[Value]| {
            let s = stream_standing(results).expect("a result");
            (
                s["id"].as_str().map(str::to_owned),
                standing(s["status"]["state"].as_str().unwrap_or_default()),
            )
        };
        assert_eq!(
            standing_of(&[task.clone(), working.clone()]),
            (Some("r".into()), Standing::Running)
        );
        assert_eq!(
            standing_of(&[task.clone(), artifact]),
            (Some("r".into()), Standing::Running)
        );
        assert_eq!(
            standing_of(&[task.clone(), working, done]).1,
            Standing::Settled
        );
        assert_eq!(
            standing_of(&[json!({"kind": "message", "parts": []})]).1,
            Standing::Settled
        );
        let failed = json!({"kind": "task", "id": "r", "status": {"state": "failed"}});
        assert_eq!(standing_of(&[failed]), (Some("r".into()), Standing::Failed));
        assert!(stream_standing(&[]).is_none());
    }

    #[test]
    fn answers_read_as_results_or_errors() {
        let error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "task not found"}});
        assert_eq!(
            rpc_result(error),
            Err(Failure::Rpc {
                code: -32001,
                message: "task not found".into()
            })
        );
        let v10 = json!({"task": {"id": "r", "status": {"state": "TASK_STATE_WORKING"}}});
        assert_eq!(task_of(&v10).map(|t| t["id"].clone()), Some(json!("r")));
        let message = json!({"kind": "message", "parts": []});
        assert!(task_of(&message).is_none());
    }
}
