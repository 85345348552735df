//! Conductor OSS's REST API over axum, so that Conductor's own clients (conductor-python, the
//! JavaScript SDK) and plain curl users talk to Baton unchanged.
//!
//! This module is only the HTTP layer: it parses paths, query strings and bodies, calls one
//! [`Node`] method per request and maps the answer (or [`crate::Error`]) to Conductor's status codes
//! and bodies. It holds no state and makes no decisions of its own; validation here is limited to
//! what can be checked without the node (shapes of ids, names, numbers, booleans, sizes), so that
//! malformed input is rejected before anything is proposed.
//!
//! Layout: [`error`] (Conductor's `ErrorResponse` and every status mapping), [`extract`] (the JSON
//! body, query-string and id extractors, the boolean parser), [`search`] (the searches' query
//! language), and one file per Conductor resource: [`metadata`], [`workflow`], [`bulk`] (commands
//! for lists of workflows), [`task`], [`event`] (event handlers, execution records, publishing),
//! [`trigger`] (webhooks, schedules), [`health`], and Baton's own [`dsl`] (Serverless Workflow
//! documents and instances); [`a2a`] serves workflows as an A2A agent. Each resource's file
//! declares its routes (`routes()`), which [`router`] merges.

pub mod a2a;
pub mod access;
pub mod admin;
pub mod admission;
pub mod bulk;
pub mod dead_letters;
pub mod doors;
pub mod dsl;
pub mod error;
pub mod event;
pub mod extract;
pub mod guard;
pub mod health;
pub mod listener;
pub mod metadata;
pub mod schema;
pub mod search;
pub mod secrets;
pub mod server;
pub mod task;
pub mod tls;
pub mod trigger;
pub mod workflow;

#[cfg(test)]
pub(crate) mod testing;

use crate::Node;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, post};
use tracing::Instrument;

pub use error::{ApiError, ApiResult};

/// The API's router: every Conductor route under `/api`, plus `/health`.
///
/// Unknown paths answer 404 and wrong methods 405, both as Conductor's `ErrorResponse`; bodies over
/// [`proto::limits::REQUEST_BYTES_MAX`] answer 413; a request past the node's slots, or once the
/// node's shutdown has begun, answers 503 with `Retry-After` ([`admission`]). Requests from other
/// sites, naming hosts that are not the node's, or with bodies neither JSON nor YAML are refused
/// first ([`doors`]). `exposure`, when set, is what `/health` says of a node served beyond
/// loopback without authentication.
pub fn router(
    node: Node,
    doors: doors::Doors,
    exposure: Option<String>,
    admin: AdminDoor,
) -> axum::Router {
    let routes = match admin {
        AdminDoor::Beside => routes().merge(admin_routes()),
        AdminDoor::Elsewhere => {
            let elsewhere = axum::routing::any(admin::elsewhere);
            routes()
                .route("/api/admin/{*rest}", elsewhere.clone())
                .route("/api/applications", elsewhere.clone())
                .route("/api/applications/{*rest}", elsewhere.clone())
                .route("/api/auth/{*rest}", elsewhere)
        }
    };
    layered(routes, node, doors, exposure)
}

/// `routes` behind the guard (`guard`), which judges each route as declared.
fn guarded(routes: axum::Router<Node>, node: &Node) -> axum::Router<Node> {
    routes.route_layer(middleware::from_fn_with_state(node.clone(), guard::guard))
}

/// `routes` over `node`, behind the guard, the doors, the error bodies, tracing, admission (none
/// once the node's shutdown has begun), metrics and the body limit.
fn layered(
    routes: axum::Router<Node>,
    node: Node,
    doors: doors::Doors,
    exposure: Option<String>,
) -> axum::Router {
    error::init_instance();
    let stopping = node.stopping.clone();
    guarded(routes, &node)
        .with_state(node)
        .layer(axum::Extension(health::Exposure(exposure)))
        .layer(middleware::from_fn_with_state(
            std::sync::Arc::new(doors),
            doors::guard,
        ))
        .layer(middleware::from_fn(error::errors_as_json))
        .layer(middleware::from_fn(trace_request))
        .layer(middleware::from_fn_with_state(
            admission::Admission::default(),
            admission::admit,
        ))
        .layer(middleware::from_fn_with_state(
            stopping,
            admission::refuse_while_stopping,
        ))
        .layer(middleware::from_fn(measure_request))
        .layer(DefaultBodyLimit::max(proto::limits::REQUEST_BYTES_MAX))
}

/// The route table without the administration routes (without state and middleware).
fn routes() -> axum::Router<Node> {
    axum::Router::new()
        .merge(event::routes())
        .merge(trigger::routes())
        .merge(metadata::routes())
        .merge(dsl::routes())
        .merge(schema::routes())
        .merge(secrets::routes())
        .merge(workflow::routes())
        .merge(task::routes())
        // ---- access: tokens (Orkes' exchange) ----
        .route("/api/token", post(access::token))
        // ---- A2A (Agent2Agent): workflows as an agent's skills ----
        .route("/.well-known/agent-card.json", get(a2a::agent_card))
        .route(a2a::card::RPC_PATH, post(a2a::rpc))
        // ---- health ----
        .route("/health", get(health::health))
        .route("/api/health", get(health::health))
        .route("/metrics", get(health::metrics))
        .merge(not_served())
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
}

/// The administration routes (`/api/admin/*`: the groups, the cluster's members, snapshots,
/// dead letters, quarantine; `/api/applications`: identities and their keys), served beside
/// the others or on their own listener.
fn admin_routes() -> axum::Router<Node> {
    axum::Router::new()
        .route("/api/admin/status", get(health::status))
        .route("/api/admin/digest", get(health::digest))
        .route("/api/admin/storage", get(health::storage))
        .route("/api/admin/waits", get(health::waits))
        .route(
            "/api/admin/dead-letters",
            get(dead_letters::list).delete(dead_letters::remove),
        )
        .route(
            "/api/admin/dead-letters/requeue",
            post(dead_letters::requeue),
        )
        .route("/api/admin/cluster", get(admin::cluster))
        .route("/api/admin/nodes", post(admin::add_node))
        .route("/api/admin/nodes/{id}", delete(admin::remove_node))
        .route("/api/admin/nodes/{id}/drain", post(admin::drain))
        .route(
            "/api/admin/partitions/{partition}/transfer",
            post(admin::transfer),
        )
        .route("/api/admin/snapshot", post(admin::snapshot))
        .route("/api/admin/version", get(admin::version))
        .route("/api/admin/version/activate", post(admin::activate))
        .route("/api/admin/quarantine", get(admin::quarantine))
        .route(
            "/api/admin/quarantine/{workflow_id}",
            delete(admin::drop_quarantined),
        )
        // ---- access control: set up, applications and their keys (Orkes' paths) ----
        .route("/api/admin/access", post(access::set_up))
        .route(
            "/api/admin/access/signing-key",
            post(access::rotate_signing_key),
        )
        .route("/api/admin/audit", get(access::audit))
        .route("/api/applications", get(access::list).post(access::create))
        .route(
            "/api/applications/{id}",
            get(access::get).put(access::rename).delete(access::delete),
        )
        .route(
            "/api/applications/{id}/roles/{role}",
            post(access::grant).delete(access::withdraw),
        )
        .route(
            "/api/applications/{id}/accessKeys",
            get(access::keys).post(access::create_key),
        )
        .route(
            "/api/applications/{id}/accessKeys/{key}",
            delete(access::delete_key),
        )
        .route(
            "/api/applications/{id}/accessKeys/{key}/status",
            post(access::toggle_key),
        )
        .route("/api/applications/key/{key}", get(access::of_key))
        .route(
            "/api/auth/authorization",
            post(access::grant_access).delete(access::remove_access),
        )
        .route(
            "/api/auth/authorization/{type}/{id}",
            get(access::permissions),
        )
}

/// Where the administration routes are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminDoor {
    /// Beside the API's other routes.
    Beside,
    /// Not on this listener: each answers 404, naming `--admin-http`.
    Elsewhere,
}

/// The administration routes on their own listener (`--admin-http`), behind the same doors.
pub fn admin_router(node: Node, doors: doors::Doors) -> axum::Router {
    let routes = admin_routes()
        .route("/api/token", post(access::token))
        .route("/health", get(health::health))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed);
    layered(routes, node, doors, None)
}

/// Endpoints of Conductor (and of Orkes, which its clients also call) that Baton does not serve
/// and whose paths a route above would otherwise take for an id or a name: each answers 404 "no
/// such endpoint" for every method, as any other unknown path does, instead of a 400 about a
/// malformed id or a 405. (A fixed segment wins over a `{parameter}` in the same place.)
pub const NOT_SERVED: &[&str] = &[
    "/api/workflow/bulk",
    "/api/workflow/bulk/{*rest}",
    "/api/workflow/test",
    "/api/workflow/search-by-tasks",
    "/api/workflow/search-by-tasks-v2",
    "/api/workflow/externalstoragelocation",
    "/api/workflow/external-storage-location",
    "/api/workflow/execute/{name}",
    "/api/tasks/poll",
    "/api/tasks/queue",
    "/api/tasks/externalstoragelocation",
    "/api/tasks/external-storage-location",
    "/api/tasks/queue/polldata/all",
    "/api/tasks/queue/all/verbose",
    "/api/tasks/queue/requeue/{task_type}",
    "/api/tasks/{id}/{reference}/signal",
    "/api/tasks/{id}/{reference}/signal/sync",
    "/api/metadata/workflow/validate",
    "/api/metadata/workflow/{name}/tags",
];

fn not_served() -> axum::Router<Node> {
    NOT_SERVED.iter().fold(axum::Router::new(), |router, path| {
        router.route(path, axum::routing::any(error::not_found))
    })
}

/// Runs each request inside an `http` span; handlers record `workflow` and `task` into it as they
/// parse ids (see [`extract::workflow_id`]).
async fn trace_request(request: Request, next: Next) -> Response {
    let span = tracing::info_span!(
        "http",
        method = %request.method(),
        path = %request.uri().path(),
        workflow = tracing::field::Empty,
        task = tracing::field::Empty,
        status = tracing::field::Empty,
    );
    let response = next.run(request).instrument(span.clone()).await;
    span.record("status", response.status().as_u16());
    tracing::debug!(parent: &span, "answered");
    response
}

/// Counts each request and times its answer, labelled by its route as declared (not its path,
/// which holds ids) and its method (one of the standard ones, else `OTHER`).
async fn measure_request(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_owned();
    let method = request.method();
    let method = match *method {
        Method::GET | Method::POST | Method::PUT | Method::DELETE | Method::HEAD => method.as_str(),
        Method::PATCH | Method::OPTIONS => method.as_str(),
        _ => "OTHER",
    };
    let method = method.to_owned();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    crate::metrics::http_answered(method, route, status, started.elapsed());
    response
}

#[cfg(test)]
mod tests {
    use crate::api::testing::TestApi;
    use axum::http::StatusCode;

    #[test]
    fn route_table_has_no_conflicts() {
        // axum panics on overlapping routes when they are added; building the table is the check.
        let _ = super::routes();
    }

    /// Paths of Conductor's, Orkes' and nobody's endpoints that Baton does not serve.
    const UNKNOWN: &[(&str, &str)] = &[
        ("GET", "/api/workflow/bulk"),
        ("PUT", "/api/workflow/bulk/skip"),
        ("GET", "/api/workflow/bulk/status"),
        ("PUT", "/api/workflow/bulk/pause/extra"),
        ("POST", "/api/workflow/test"),
        ("GET", "/api/workflow/search-by-tasks?query=x"),
        ("GET", "/api/workflow/search-by-tasks-v2"),
        (
            "GET",
            "/api/workflow/externalstoragelocation?path=p&operation=READ",
        ),
        ("GET", "/api/workflow/external-storage-location"),
        ("POST", "/api/workflow/execute/some_wf"),
        ("GET", "/api/workflow/execute/status"),
        (
            "POST",
            "/api/workflow/01234567-89ab-cdef-0123-456789ab0001/resetcallbacks",
        ),
        (
            "POST",
            "/api/workflow/01234567-89ab-cdef-0123-456789ab0001/jump/ref",
        ),
        (
            "POST",
            "/api/workflow/01234567-89ab-cdef-0123-456789ab0001/variables",
        ),
        (
            "POST",
            "/api/workflow/01234567-89ab-cdef-0123-456789ab0001/state",
        ),
        (
            "POST",
            "/api/workflow/01234567-89ab-cdef-0123-456789ab0001/upgrade",
        ),
        (
            "POST",
            "/api/workflow/01234567-89ab-cdef-0123-456789ab0001/messages",
        ),
        ("GET", "/api/tasks/poll"),
        ("GET", "/api/tasks/queue"),
        ("GET", "/api/tasks/externalstoragelocation?path=p"),
        ("GET", "/api/tasks/external-storage-location"),
        ("GET", "/api/tasks/queue/polldata?taskType=t"),
        ("GET", "/api/tasks/queue/polldata/all"),
        ("GET", "/api/tasks/queue/all/verbose"),
        ("POST", "/api/tasks/queue/requeue/t"),
        (
            "POST",
            "/api/tasks/01234567-89ab-cdef-0123-456789ab0001/COMPLETED/signal",
        ),
        (
            "POST",
            "/api/tasks/01234567-89ab-cdef-0123-456789ab0001/COMPLETED/signal/sync",
        ),
        ("POST", "/api/metadata/workflow/validate"),
        ("GET", "/api/metadata/workflow/w/tags"),
        ("DELETE", "/api/metadata/workflow/w/tags"),
        ("GET", "/api/metadata/tags"),
        ("PUT", "/api/metadata/task/t/tags"),
        ("GET", "/api/metadata/tags/workflow/w"),
        ("GET", "/api/event/queue/config"),
        ("GET", "/api/scheduler/search/executions"),
        ("GET", "/api/scheduler/schedules/s/tags"),
        ("GET", "/api/secrets-v2"),
        ("GET", "/api/integrations/provider"),
        ("GET", "/api/prompts"),
        ("GET", "/api/groups"),
        ("GET", "/api/users"),
        ("GET", "/api/roles"),
        ("GET", "/api/gateway/config/auth"),
        ("GET", "/api/registry/service"),
        ("GET", "/api/agent/x/status"),
        ("GET", "/api/queue/size"),
        ("GET", "/api/admin/config"),
        ("GET", "/api/nothing/here"),
        ("GET", "/nothing"),
    ];

    #[tokio::test]
    async fn unknown_routes_answer_no_such_endpoint() {
        let api = TestApi::start().await;
        for (method, path) in UNKNOWN {
            let (status, json) = api.send(method, path, None).await;
            let bare = path.split('?').next().unwrap_or(path);
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {json}");
            assert_eq!(json["code"], "NOT_FOUND", "{method} {path}: {json}");
            let expected = format!("no such endpoint: {method} {bare}");
            assert_eq!(json["message"], expected.as_str(), "{method} {path}");
        }
        // A route Baton serves, with a malformed id, is still a 400 that says so.
        for (method, path) in [
            ("GET", "/api/workflow/not-an-id"),
            ("PUT", "/api/workflow/bulkx/pause"),
            ("GET", "/api/tasks/not-a-task"),
            ("POST", "/api/tasks/not-an-id/ref/COMPLETED"),
        ] {
            let (status, json) = api.send(method, path, None).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {path}: {json}");
            let message = json["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("is not a Baton id"),
                "{method} {path}: {json}"
            );
        }
        api.stop().await;
    }
}
