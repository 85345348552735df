//! Every error the HTTP API answers, as Conductor's `ErrorResponse` JSON:
//! `{"status":404,"code":"NOT_FOUND","message":"...","instance":"<host>","retryable":false}`.
//!
//! This is the one place where [`crate::Error`]s become answers (each variant's stable
//! [`proto::ErrorCode`] gives the status and the `code`) and where anything axum itself rejects
//! (unknown path, wrong method, over-size body) is turned into the same JSON shape, so a client never
//! sees a plain-text error.

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use proto::limits::RETRY_AFTER_SECS;
use proto::model::ErrorResponse;
use std::sync::OnceLock;

/// What a handler answers.
pub type ApiResult<T = Response> = Result<T, ApiError>;

/// Longest plain-text error body [`errors_as_json`] reads back to wrap it as JSON.
const WRAPPED_BODY_BYTES_MAX: usize = 16 * 1024;

/// The `instance` field of every error: this host's name, as Conductor reports its server id.
static INSTANCE: OnceLock<String> = OnceLock::new();

/// Reads the host name once (the router calls this at construction).
pub(crate) fn init_instance() {
    INSTANCE.get_or_init(host_name);
}

fn instance() -> &'static str {
    INSTANCE.get_or_init(host_name)
}

fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "baton".to_owned())
}

/// An error answer: a status and a message that says what was wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    /// `ErrorResponse.code`: the error's stable code, or its status's reason phrase.
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code(status),
            message: message.into(),
        }
    }
    /// 400: the request is malformed; nothing was changed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
    /// 413: the body (or a payload inside it) is over its limit.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, message)
    }

    /// The body Conductor's clients parse.
    pub fn body(&self) -> ErrorResponse {
        ErrorResponse {
            status: self.status.as_u16(),
            code: self.code.clone(),
            message: self.message.clone(),
            instance: instance().to_owned(),
            // Only "try again later" is worth a retry; everything else fails the same way twice.
            retryable: self.status == StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// Conductor-style code of a status: its reason phrase in SCREAMING_SNAKE_CASE (`NOT_FOUND`).
pub fn code(status: StatusCode) -> String {
    status
        .canonical_reason()
        .unwrap_or("ERROR")
        .to_ascii_uppercase()
        .replace([' ', '-'], "_")
}

impl From<crate::Error> for ApiError {
    fn from(e: crate::Error) -> Self {
        let code = e.code();
        let status =
            StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self {
            status,
            code: code.name().to_owned(),
            message: e.to_string(),
        }
    }
}

impl From<proto::check::Violation> for ApiError {
    fn from(v: proto::check::Violation) -> Self {
        crate::Error::from(v).into()
    }
}

impl From<proto::ids::BadId> for ApiError {
    fn from(e: proto::ids::BadId) -> Self {
        Self::bad_request(e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = self.status.as_u16(), message = %self.message, "request failed");
        } else {
            tracing::debug!(status = self.status.as_u16(), message = %self.message, "request rejected");
        }
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if matches!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
        ) {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        response
    }
}

/// The 404 for a path no route matches.
pub async fn not_found(request: Request) -> ApiError {
    ApiError::not_found(format!(
        "no such endpoint: {} {}",
        request.method(),
        request.uri().path()
    ))
}

/// The 405 for a known path asked with a method it does not serve.
pub async fn method_not_allowed(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} is not supported on {}",
            request.method(),
            request.uri().path()
        ),
    )
}

/// Safety net: rewrites any error response that is not JSON (an axum rejection this module did not
/// intercept) as an `ErrorResponse` carrying the original text, so clients always parse one shape.
pub async fn errors_as_json(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.starts_with("application/json") || v.starts_with("application/problem+json")
        });
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, WRAPPED_BODY_BYTES_MAX).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let mut wrapped = ApiError::new(status, message).into_response();
    // Keep headers such as `Allow` on a 405.
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            wrapped.headers_mut().insert(name.clone(), value.clone());
        }
    }
    wrapped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::body_json;
    use axum::body::Body;

    #[test]
    fn node_errors_map_to_conductor_statuses() {
        use crate::Error as E;
        let table = [
            (E::NotFound("x".into()), 404, "NOT_FOUND", false),
            (E::Conflict("x".into()), 409, "CONFLICT", false),
            (E::Invalid("x".into()), 400, "BAD_REQUEST", false),
            (E::Unavailable("x".into()), 503, "SERVICE_UNAVAILABLE", true),
            (E::Internal("x".into()), 500, "INTERNAL_SERVER_ERROR", false),
        ];
        for (e, status, code, retryable) in table {
            let body = ApiError::from(e.clone()).body();
            assert_eq!(body.status, status, "{e:?}");
            assert_eq!(body.code, code, "{e:?}");
            assert_eq!(body.retryable, retryable, "{e:?}");
            assert_eq!(body.message, "x");
            assert!(!body.instance.is_empty());
        }
    }

    #[test]
    fn codes_of_http_only_statuses() {
        assert_eq!(code(StatusCode::PAYLOAD_TOO_LARGE), "PAYLOAD_TOO_LARGE");
        assert_eq!(code(StatusCode::METHOD_NOT_ALLOWED), "METHOD_NOT_ALLOWED");
    }

    #[tokio::test]
    async fn error_body_has_conductor_shape() {
        let response = ApiError::not_found("Workflow x not found").into_response();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let json = body_json(response).await;
        let keys: Vec<&str> = json
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["status", "code", "message", "instance", "retryable"]);
        assert_eq!(json["status"], 404);
        assert_eq!(json["code"], "NOT_FOUND");
        assert_eq!(json["message"], "Workflow x not found");
        assert_eq!(json["retryable"], false);
    }

    #[tokio::test]
    async fn plain_text_errors_are_wrapped() {
        let app = axum::Router::new()
            .route(
                "/plain",
                axum::routing::get(|| async { (StatusCode::UNPROCESSABLE_ENTITY, "bad thing") }),
            )
            .route("/ok", axum::routing::get(|| async { "fine" }))
            .layer(axum::middleware::from_fn(errors_as_json));
        let call = |path: &str| {
            let app = app.clone();
            let request = Request::builder()
                .uri(path)
                .body(Body::empty())
                .expect("request");
            async move { crate::api::testing::call(app, request).await }
        };
        let wrapped = call("/plain").await;
        assert_eq!(wrapped.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let json = body_json(wrapped).await;
        assert_eq!(json["message"], "bad thing");
        assert_eq!(json["code"], "UNPROCESSABLE_ENTITY");
        let ok = call("/ok").await;
        assert_eq!(ok.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn fallbacks_answer_json() {
        let app = axum::Router::new()
            .route("/only-get", axum::routing::get(|| async { "x" }))
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed);
        let request = Request::builder()
            .uri("/nope")
            .body(Body::empty())
            .expect("request");
        let response = crate::api::testing::call(app.clone(), request).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(
            body_json(response).await["message"],
            "no such endpoint: GET /nope"
        );
        let request = Request::builder()
            .method("DELETE")
            .uri("/only-get")
            .body(Body::empty())
            .expect("request");
        let response = crate::api::testing::call(app, request).await;
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(body_json(response).await["code"], "METHOD_NOT_ALLOWED");
    }
}
