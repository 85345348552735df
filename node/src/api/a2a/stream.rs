//! Streams: `message/stream` (`SendStreamingMessage`) starts a task and `tasks/resubscribe`
//! (`SubscribeToTask`) follows one; both answer server-sent events, each a JSON-RPC response:
//! the task first, then, once its workflow ends, its output artifact (when completed) and its
//! final status (`final: true` in v0.3). A workflow's A2A state changes only when it ends
//! (running and paused are both `working`), so there is nothing to say in between.
//!
//! The stream waits for the workflow's end the way `POST /api/workflow/execute` does (woken by the
//! workflow's actor, no polling of storage), at most [`STREAM_FOLLOW_MAX`]; then it ends without a
//! final event and the client resubscribes. A refused request answers plain JSON, not a stream.

use super::rpc::{self, Call, Method, RpcError};
use super::wire::{self, Dialect};
use crate::service::a2a::STREAM_FOLLOW_MAX;
use crate::Node;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use proto::model::Workflow;
use serde_json::Value;
use std::collections::VecDeque;
use std::convert::Infallible;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

/// Answers a stream request: events, or a JSON-RPC error when it is refused.
pub async fn serve(node: Node, call: Call) -> Response {
    match begin(&node, &call).await {
        Ok(follow) => {
            let events = futures::stream::unfold(follow, next);
            Sse::new(events)
                .keep_alive(KeepAlive::default())
                .into_response()
        }
        Err(e) => Json(rpc::failure(&call.id, &e)).into_response(),
    }
}

/// A stream in progress: the events to send, then the wait for the task's end.
struct Follow {
    node: Node,
    task: String,
    rpc_id: Value,
    dialect: Dialect,
    deadline: Instant,
    queue: VecDeque<Value>,
    waited: bool,
    /// The node's stream slot, held while the stream lasts.
    _slot: OwnedSemaphorePermit,
}

/// Starts the task (or finds it, to resubscribe) and queues its first event.
async fn begin(node: &Node, call: &Call) -> Result<Follow, RpcError> {
    let slot = node.a2a.stream_slot()?;
    let d = call.dialect;
    let (wf, history) = match call.method {
        Method::Stream => {
            let (wf, message) = super::send(node, &call.params, d, false).await?;
            (wf, vec![message])
        }
        _ => {
            let wf = node.a2a.task(&super::input::task_id(&call.params)?).await?;
            if wf.status.is_terminal() {
                let state = wire::TaskState::of(&wf).spelled(d);
                let m = format!(
                    "task {} is {state}; there is nothing to follow",
                    wf.workflow_id
                );
                return Err(RpcError::new(rpc::UNSUPPORTED_OPERATION, m));
            }
            let history = super::history(&wf, None, d);
            (wf, history)
        }
    };
    let first = wire::task_event(wire::task(&wf, history, d), d);
    Ok(Follow {
        node: node.clone(),
        task: wf.workflow_id.to_string(),
        rpc_id: call.id.clone(),
        dialect: d,
        deadline: Instant::now() + STREAM_FOLLOW_MAX,
        queue: VecDeque::from([rpc::success(&call.id, first)]),
        waited: false,
        _slot: slot,
    })
}

/// The stream's next event: a queued one, else (once) the events of the task's end.
async fn next(mut f: Follow) -> Option<(Result<Event, Infallible>, Follow)> {
    loop {
        if let Some(answer) = f.queue.pop_front() {
            return Some((Ok(Event::default().data(answer.to_string())), f));
        }
        if f.waited {
            return None;
        }
        f.waited = true;
        match f.node.a2a.wait_settled(&f.task, f.deadline).await {
            Ok(wf) if wf.status.is_terminal() || crate::watch::listens(&wf) => {
                let events = end_events(&wf, f.dialect);
                f.queue
                    .extend(events.into_iter().map(|e| rpc::success(&f.rpc_id, e)));
            }
            // The follow's time is over: the stream ends, the task goes on.
            Ok(_) => {}
            Err(e) => f.queue.push_back(rpc::failure(&f.rpc_id, &e.into())),
        }
    }
}

/// What a stream says when the task ended or asks for input: its artifact (when completed),
/// its final status.
pub fn end_events(wf: &Workflow, d: Dialect) -> Vec<Value> {
    let artifact = wire::artifact_event(wf, d);
    artifact
        .into_iter()
        .chain([wire::status_event(wf, true, d)])
        .collect()
}
