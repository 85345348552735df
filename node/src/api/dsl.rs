//! `/api/dsl`: Serverless Workflow (DSL 1.0) documents and their instances. A document is sent
//! as YAML or JSON text (any content type); one that is refused answers 400 as RFC 7807 problem
//! details (`application/problem+json`) naming each problem by its JSON pointer. Every other
//! error is the API's usual `ErrorResponse`; writes and commands answer 200.

use super::error::ApiResult;
use super::extract::{name, parse_json, workflow_id, Params, PathArgs, Text};
use super::ApiError;
use crate::service::PutDslError;
use crate::Node;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing;
use axum::Json;
use engine::dsl::Header;
use proto::model::{DslWorkflow, EpochMs};
use serde::Serialize;
use serde_json::{json, Value};

/// A registered version in a listing: its header and when it was registered and replaced.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    #[serde(flatten)]
    header: Option<Header>,
    create_time: EpochMs,
    update_time: EpochMs,
}

impl From<DslWorkflow> for Listed {
    fn from(d: DslWorkflow) -> Self {
        Self {
            header: serde_json::from_value(d.document["document"].clone()).ok(),
            create_time: d.create_time,
            update_time: d.update_time,
        }
    }
}

/// The path's namespace, name and version, each checked as a name.
type Key = (String, String, String);

fn key(k: &Key) -> ApiResult<(&str, &str, &str)> {
    Ok((
        name("namespace", &k.0)?,
        name("workflow name", &k.1)?,
        name("workflow version", &k.2)?,
    ))
}

/// A refused document: 400 with its problem details, or 413 when it is over the size limit.
fn refused(e: PutDslError) -> Response {
    match e {
        PutDslError::Document(e @ engine::dsl::Error::TooLarge { .. }) => {
            ApiError::too_large(e.to_string()).into_response()
        }
        PutDslError::Document(e) => {
            let body = serde_json::to_vec(&e.problem_details()).unwrap_or_default();
            let mut response = (StatusCode::BAD_REQUEST, body).into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/problem+json"),
            );
            response
        }
        PutDslError::Node(e) => ApiError::from(e).into_response(),
    }
}

/// `POST /api/dsl/workflows?overwrite=`: registers a document; answers its header.
pub async fn put(State(node): State<Node>, params: Params, Text(text): Text) -> Response {
    let overwrite = match params.bool("overwrite", false) {
        Ok(o) => o,
        Err(e) => return e.into_response(),
    };
    match node.definitions.put_dsl(&text, overwrite).await {
        Ok(header) => Json(header).into_response(),
        Err(e) => refused(e),
    }
}

/// `POST /api/dsl/validate`: checks a document as registering it would; stores nothing.
pub async fn validate(State(node): State<Node>, Text(text): Text) -> Response {
    match node.definitions.validate_dsl(&text).await {
        Ok(validated) => Json(validated).into_response(),
        Err(e) => refused(e),
    }
}

/// `GET /api/dsl/workflows`: every registered version.
pub async fn all(State(node): State<Node>) -> Json<Vec<Listed>> {
    Json(
        node.definitions
            .dsl_list(None)
            .into_iter()
            .map(Listed::from)
            .collect(),
    )
}

/// `GET /api/dsl/workflows/{namespace}/{name}`: its versions (404 when it has none).
pub async fn versions(
    State(node): State<Node>,
    PathArgs((namespace, workflow)): PathArgs<(String, String)>,
) -> ApiResult<Json<Vec<Listed>>> {
    let of = (
        name("namespace", &namespace)?,
        name("workflow name", &workflow)?,
    );
    let list = node.definitions.dsl_list(Some(of));
    if list.is_empty() {
        return Err(ApiError::not_found(format!(
            "No such workflow document: {namespace}/{workflow}"
        )));
    }
    Ok(Json(list.into_iter().map(Listed::from).collect()))
}

/// Whether the request's `Accept` asks for YAML.
fn wants_yaml(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/yaml") || v.contains("application/x-yaml"))
}

/// `GET /api/dsl/workflows/{namespace}/{name}/{version}`: the document, as JSON or YAML.
pub async fn get(
    State(node): State<Node>,
    headers: HeaderMap,
    PathArgs(path): PathArgs<Key>,
) -> ApiResult<Response> {
    let (namespace, workflow, version) = key(&path)?;
    let document = node.definitions.dsl(namespace, workflow, version)?.document;
    if !wants_yaml(&headers) {
        return Ok(Json(document).into_response());
    }
    let yaml = serde_yaml_ng::to_string(&document)
        .map_err(|e| ApiError::from(crate::Error::Internal(e.to_string())))?;
    Ok(([(header::CONTENT_TYPE, "application/yaml")], yaml).into_response())
}

/// `DELETE /api/dsl/workflows/{namespace}/{name}/{version}`.
pub async fn delete(
    State(node): State<Node>,
    PathArgs(path): PathArgs<Key>,
) -> ApiResult<StatusCode> {
    let (namespace, workflow, version) = key(&path)?;
    node.definitions
        .delete_dsl(namespace, workflow, version)
        .await?;
    Ok(StatusCode::OK)
}

/// `POST /api/dsl/workflows/{namespace}/{name}/{version}/instances`: starts an instance with the
/// body as its input (an empty body is `{}`); answers `{"id": ...}`.
pub async fn start(
    State(node): State<Node>,
    PathArgs(path): PathArgs<Key>,
    Text(body): Text,
) -> ApiResult<Json<Value>> {
    let input = if body.trim().is_empty() {
        json!({})
    } else {
        parse_json(body.as_bytes())?
    };
    let id = node.workflows.start_dsl(key(&path)?, input).await?;
    Ok(Json(json!({ "id": id })))
}

/// `GET /api/dsl/instances/{id}`: the instance in the DSL's terms.
pub async fn instance(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<Json<Value>> {
    let id = workflow_id(&id)?;
    Ok(Json(node.workflows.dsl_instance(id.as_str()).await?))
}

/// `POST /api/dsl/instances/{id}/events`: offers the body, a CloudEvent, to the instance's
/// running `listen` tasks.
pub async fn event(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
    Text(body): Text,
) -> ApiResult<StatusCode> {
    let id = workflow_id(&id)?;
    let event: Value = parse_json(body.as_bytes())?;
    node.workflows.deliver_dsl_event(id.as_str(), event).await?;
    Ok(StatusCode::OK)
}

/// `POST /api/dsl/instances/{id}/suspend`.
pub async fn suspend(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.workflows
        .suspend_dsl(workflow_id(&id)?.as_str())
        .await?;
    Ok(StatusCode::OK)
}

/// `POST /api/dsl/instances/{id}/resume`.
pub async fn resume(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.workflows
        .resume_dsl(workflow_id(&id)?.as_str())
        .await?;
    Ok(StatusCode::OK)
}

/// `POST /api/dsl/instances/{id}/cancel`.
pub async fn cancel(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.workflows
        .cancel_dsl(workflow_id(&id)?.as_str())
        .await?;
    Ok(StatusCode::OK)
}

/// The routes of this file's handlers (Serverless Workflow (DSL 1.0) documents and instances), merged into the API's router.
pub(super) fn routes() -> axum::Router<Node> {
    axum::Router::new()
        .route("/api/dsl/validate", routing::post(validate))
        .route("/api/dsl/workflows", routing::post(put).get(all))
        .route(
            "/api/dsl/workflows/{namespace}/{name}",
            routing::get(versions),
        )
        .route(
            "/api/dsl/workflows/{namespace}/{name}/{version}",
            routing::get(get).delete(delete),
        )
        .route(
            "/api/dsl/workflows/{namespace}/{name}/{version}/instances",
            routing::post(start),
        )
        .route("/api/dsl/instances/{id}", routing::get(instance))
        .route("/api/dsl/instances/{id}/suspend", routing::post(suspend))
        .route("/api/dsl/instances/{id}/resume", routing::post(resume))
        .route("/api/dsl/instances/{id}/cancel", routing::post(cancel))
        .route("/api/dsl/instances/{id}/events", routing::post(event))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_is_answered_only_when_asked_for() {
        let mut headers = HeaderMap::new();
        assert!(!wants_yaml(&headers));
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!wants_yaml(&headers));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/yaml, */*;q=0.1"),
        );
        assert!(wants_yaml(&headers));
    }

    #[test]
    fn a_refused_document_is_problem_json_and_an_oversized_one_a_413() {
        let e = engine::dsl::load("document: [").expect_err("not YAML");
        let response = refused(PutDslError::Document(e));
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        let big = "#".repeat(proto::limits::DSL_DOCUMENT_BYTES_MAX + 1);
        let e = engine::dsl::load(&big).expect_err("too large");
        let response = refused(PutDslError::Document(e));
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
}
