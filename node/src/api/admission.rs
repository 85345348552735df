//! Admission: how many HTTP requests one node serves at once. A request past the bound is answered
//! at once with 503 and `Retry-After` instead of queueing (memory stays bounded under a flood, and a
//! client learns to back off rather than time out).
//!
//! Two bounds, because two kinds of request hold a slot very differently: ordinary requests for
//! milliseconds ([`HTTP_REQUESTS_MAX`]), and polls and executes, which may wait up to their timeout
//! for a task or a workflow's end ([`HTTP_WAITS_MAX`]). Parked polls therefore never starve starts
//! and updates of slots, and the reverse.
//!
//! Once the node's shutdown has begun ([`crate::service::Stopping`]) no request is admitted: each
//! is answered 503 with `Retry-After` at once ([`refuse_while_stopping`]), so clients go to another
//! node while the requests already running finish; health says the node is not ready.

use super::error::ApiError;
use super::listener::Overflow;
use crate::service::Stopping;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use proto::limits::{HTTP_CONNECTIONS_MAX, HTTP_REQUESTS_MAX, HTTP_WAITS_MAX};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Routes whose requests may wait (for a task, for a workflow's end).
const WAITING_ROUTES: [&str; 4] = [
    "/a2a",
    "/api/tasks/poll/{task_type}",
    "/api/tasks/poll/batch/{task_type}",
    "/api/workflow/execute/{name}/{version}",
];

/// Routes always served, whatever the load: what a supervisor probes (health) and scrapes
/// (metrics) must not fail because the node is busy, or a loaded node would be restarted.
const ALWAYS_ROUTES: [&str; 3] = ["/health", "/api/health", "/metrics"];

/// The node's HTTP slots.
#[derive(Clone)]
pub struct Admission {
    requests: Arc<Semaphore>,
    waits: Arc<Semaphore>,
}

impl Default for Admission {
    fn default() -> Self {
        Self::new(HTTP_REQUESTS_MAX, HTTP_WAITS_MAX)
    }
}

impl Admission {
    pub fn new(requests: usize, waits: usize) -> Self {
        Self {
            requests: Arc::new(Semaphore::new(requests)),
            waits: Arc::new(Semaphore::new(waits)),
        }
    }
}

/// Runs the request in a slot of its kind, or answers 503 when every slot is taken or its
/// connection was accepted past the node's bound ([`super::listener::Overflow`]).
pub async fn admit(State(slots): State<Admission>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>();
    if route.is_some_and(|p| ALWAYS_ROUTES.contains(&p.as_str())) {
        return next.run(request).await;
    }
    let overflow = request
        .extensions()
        .get::<ConnectInfo<Overflow>>()
        .is_some_and(|c| c.0 .0);
    if overflow {
        crate::metrics::http_refused(Refused::Connections.label());
        return refuse(format!(
            "this node holds {HTTP_CONNECTIONS_MAX} connections open, its limit; retry shortly"
        ));
    }
    let waits = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|p| WAITING_ROUTES.contains(&p.as_str()));
    let (semaphore, what, max) = if waits {
        (&slots.waits, "polls and executes", HTTP_WAITS_MAX)
    } else {
        (&slots.requests, "requests", HTTP_REQUESTS_MAX)
    };
    let Ok(_slot) = semaphore.clone().try_acquire_owned() else {
        let refused = if waits {
            Refused::Waits
        } else {
            Refused::Requests
        };
        crate::metrics::http_refused(refused.label());
        return refuse(format!(
            "this node is serving {max} {what} at once, its limit; retry shortly"
        ));
    };
    next.run(request).await
}

/// Answers 503 (with `Retry-After`, and the connection closed) to every request once the node's
/// shutdown has begun, but those of [`ALWAYS_ROUTES`]: health answers that the node is not ready.
pub async fn refuse_while_stopping(
    State(stopping): State<Stopping>,
    request: Request,
    next: Next,
) -> Response {
    let route = request.extensions().get::<MatchedPath>();
    if !stopping.begun() || route.is_some_and(|p| ALWAYS_ROUTES.contains(&p.as_str())) {
        return next.run(request).await;
    }
    crate::metrics::http_refused(Refused::Stopping.label());
    refuse("this node is shutting down; send the request to another node".to_owned())
}

/// Which bound refused a request (the label of `baton_http_refused_total`).
#[derive(Debug, Clone, Copy)]
pub enum Refused {
    Connections,
    Requests,
    Waits,
    /// The node's shutdown has begun.
    Stopping,
}

impl Refused {
    /// The metric's label.
    pub fn label(self) -> &'static str {
        match self {
            Refused::Connections => "connections",
            Refused::Requests => "requests",
            Refused::Waits => "waits",
            Refused::Stopping => "stopping",
        }
    }
}

/// 503 with `Retry-After`; an overloaded or stopping node also gives back the connection.
fn refuse(message: String) -> Response {
    let mut refused = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).into_response();
    refused
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    refused
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use tokio::sync::watch;
    use tower::ServiceExt;

    /// A router whose routes wait until `release` turns true, behind `admit` with `slots`.
    fn held(slots: Admission, release: watch::Receiver<bool>) -> axum::Router {
        let wait = move || {
            let mut release = release.clone();
            async move {
                let _ = release.wait_for(|go| *go).await;
            }
        };
        axum::Router::new()
            .route("/health", get(|| async { "ok" }))
            .route("/api/metadata/taskdefs", get(wait.clone()))
            .route("/api/tasks/poll/{task_type}", get(wait))
            .layer(axum::middleware::from_fn_with_state(slots, admit))
    }

    fn get_req(path: &str) -> Request {
        Request::builder()
            .uri(path)
            .body(Body::empty())
            .expect("request builds")
    }

    async fn until_taken(semaphore: &Semaphore) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while semaphore.available_permits() > 0 {
            assert!(tokio::time::Instant::now() < deadline, "slot never taken");
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_request_past_the_bound_is_refused_with_retry_after_and_waits_have_their_own() {
        let slots = Admission::new(1, 1);
        let (release, released) = watch::channel(false);
        let app = held(slots.clone(), released);
        let first = tokio::spawn(app.clone().oneshot(get_req("/api/metadata/taskdefs")));
        until_taken(&slots.requests).await;
        // The request slot is full; the wait slot is still free.
        let poll = tokio::spawn(app.clone().oneshot(get_req("/api/tasks/poll/t")));
        until_taken(&slots.waits).await;
        for path in ["/api/metadata/taskdefs", "/api/tasks/poll/t"] {
            let refused = app.clone().oneshot(get_req(path)).await.expect("answers");
            assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE, "{path}");
            assert_eq!(
                refused.headers().get("retry-after").map(|v| v.as_bytes()),
                Some(&b"1"[..]),
                "{path}"
            );
        }
        let health = app
            .clone()
            .oneshot(get_req("/health"))
            .await
            .expect("answers");
        assert_eq!(
            health.status(),
            StatusCode::OK,
            "health is served however busy"
        );
        release.send_replace(true);
        for done in [first, poll] {
            let answer = done.await.expect("joins").expect("answers");
            assert_eq!(answer.status(), StatusCode::OK);
        }
        assert_eq!(slots.requests.available_permits(), 1);
    }
}
