//! A2A (Agent2Agent): the agent card at `GET /.well-known/agent-card.json` and JSON-RPC 2.0 at
//! `POST /a2a`, in v0.3's method names (`message/send`...) and v1.0's (`SendMessage`...); each
//! answer is spelled in the version its method name was ([`wire::Dialect`]).
//!
//! A message starts a workflow that is a skill (`crate::service::a2a`); the task is the workflow
//! run. Every answer is HTTP 200 with a JSON-RPC result or error, except a stream's, which is
//! server-sent events ([`stream`]). A refused request changes nothing stored.
//!
//! Layout: [`rpc`] (envelope, method names, error codes), [`input`] (what requests carry),
//! [`wire`] (tasks and events as JSON), [`card`], [`stream`].

pub mod card;
pub mod input;
pub mod rpc;
pub mod stream;
pub mod wire;

use crate::service::a2a::{FollowUp, ListQuery, SendRequest, SEND_WAIT_MAX};
use crate::Node;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use proto::model::Workflow;
use rpc::{Call, Method, RpcError};
use serde_json::{json, Map, Value};
use wire::Dialect;

/// How many tasks a `tasks/list` page holds when the request does not say.
pub const LIST_PAGE_DEFAULT: usize = 50;

/// `GET /.well-known/agent-card.json`.
pub async fn agent_card(State(node): State<Node>, headers: HeaderMap) -> Json<Value> {
    let url = card::endpoint(&headers, node.a2a.http);
    Json(card::card(&url, &node.a2a.skills()))
}

/// `POST /a2a`: one JSON-RPC request.
pub async fn rpc(State(node): State<Node>, headers: HeaderMap, body: Bytes) -> Response {
    let call = match rpc::parse(&body) {
        Ok(call) => call,
        Err((id, e)) => return Json(rpc::failure(&id, &e)).into_response(),
    };
    let version = headers.get("a2a-version").and_then(|v| v.to_str().ok());
    if let Err(e) = rpc::version_supported(version) {
        return Json(rpc::failure(&call.id, &e)).into_response();
    }
    if matches!(call.method, Method::Stream | Method::Resubscribe) {
        return stream::serve(node, call).await;
    }
    let answer = match answer(&node, &call).await {
        Ok(result) => rpc::success(&call.id, result),
        Err(e) => rpc::failure(&call.id, &e),
    };
    Json(answer).into_response()
}

/// The result of a call that is not a stream.
async fn answer(node: &Node, call: &Call) -> Result<Value, RpcError> {
    let (params, d) = (&call.params, call.dialect);
    match call.method {
        Method::Send => {
            let (wf, message) = send(node, params, d, true).await?;
            Ok(wire::send_result(wire::task(&wf, vec![message], d), d))
        }
        Method::Get => {
            let wf = node.a2a.task(&input::task_id(params)?).await?;
            Ok(wire::task(
                &wf,
                history(&wf, input::history_length(params)?, d),
                d,
            ))
        }
        Method::Cancel => {
            let wf = node.a2a.cancel(&input::task_id(params)?).await?;
            Ok(wire::task(&wf, history(&wf, None, d), d))
        }
        Method::List => list(node, params, d).await,
        Method::Stream | Method::Resubscribe => Err(RpcError::new(
            rpc::INTERNAL_ERROR,
            "a stream is answered as events",
        )),
    }
}

/// Starts the task a sent message asks for; answers its workflow (once ended or the wait is over
/// when the sender waits and `may_wait`) and the message as the task's history holds it.
pub(crate) async fn send(
    node: &Node,
    params: &Map<String, Value>,
    d: Dialect,
    may_wait: bool,
) -> Result<(Workflow, Value), RpcError> {
    let sent = input::sent(params, d)?;
    if let Some(task_id) = sent.task_id.clone() {
        let follow_up = FollowUp {
            task_id,
            message_id: sent.message_id,
            input: sent.input,
            wait: (sent.wait && may_wait).then_some(SEND_WAIT_MAX),
        };
        let wf = node.a2a.follow_up(follow_up).await?;
        let mut message = sent.message;
        message["contextId"] = json!(wire::context_id(&wf));
        return Ok((wf, message));
    }
    let skill = node.a2a.skill(sent.skill.as_deref())?;
    let request = SendRequest {
        skill,
        input: sent.input,
        context_id: sent.context_id.unwrap_or_else(new_context_id),
        message_id: sent.message_id,
        wait: (sent.wait && may_wait).then_some(SEND_WAIT_MAX),
    };
    let wf = node.a2a.send(request).await?;
    let mut message = sent.message;
    message["taskId"] = json!(wf.workflow_id.to_string());
    message["contextId"] = json!(wire::context_id(&wf));
    Ok((wf, message))
}

/// A task's history: the request as the workflow received it, the last `length` messages.
pub(crate) fn history(wf: &Workflow, length: Option<usize>, d: Dialect) -> Vec<Value> {
    let mut history = vec![wire::request_message(wf, d)];
    if let Some(n) = length {
        history.drain(..history.len().saturating_sub(n));
    }
    history
}

/// `tasks/list`: a page of the skills' tasks, newest first (`pageToken` is the offset).
async fn list(node: &Node, params: &Map<String, Value>, d: Dialect) -> Result<Value, RpcError> {
    let text = |f: &str| {
        params
            .get(f)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let statuses = match text("status") {
        Some(s) => wire::TaskState::parse(s)
            .ok_or_else(|| RpcError::invalid_params(format!("no task state '{s}'")))?,
        None => Vec::new(),
    };
    let start = match text("pageToken") {
        Some(t) => t
            .parse()
            .map_err(|_| RpcError::invalid_params("bad pageToken"))?,
        None => 0,
    };
    let size = match params.get("pageSize").and_then(Value::as_u64) {
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => LIST_PAGE_DEFAULT,
    };
    let query = ListQuery {
        context_id: text("contextId").map(str::to_owned),
        statuses,
        start,
        size,
    };
    let (wfs, total) = node.a2a.list(&query).await?;
    let length = input::history_length(params)?;
    let artifacts = params.get("includeArtifacts") == Some(&json!(true)) || d == Dialect::V03;
    let tasks: Vec<Value> = wfs
        .iter()
        .map(|wf| listed(wf, length, artifacts, d))
        .collect();
    let next = start + tasks.len();
    let next = if next < total {
        next.to_string()
    } else {
        String::new()
    };
    Ok(json!({"tasks": tasks, "nextPageToken": next, "pageSize": tasks.len(), "totalSize": total}))
}

fn listed(wf: &Workflow, length: Option<usize>, artifacts: bool, d: Dialect) -> Value {
    let mut task = wire::task(wf, history(wf, length, d), d);
    if !artifacts {
        task["artifacts"] = json!([]);
    }
    task
}

/// A new context id (UUID-shaped, random).
fn new_context_id() -> String {
    let b = rand::random::<u128>().to_be_bytes();
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}
