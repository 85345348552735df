//! Request extractors of the HTTP API: JSON bodies, plain-text bodies, query strings, path
//! parameters, ids and names. Each turns malformed input into a 400 (or 413) [`ApiError`] that
//! says what was expected, instead of axum's plain-text rejections.
//!
//! Conductor's clients are lenient in what they send (Python writes booleans as `True`/`False`, and
//! sends `Content-Type: application/json` on plain-text bodies), so parsing here is lenient in
//! spelling and strict in meaning: `TRUE` is true, `yes` is an error.

use super::error::{ApiError, ApiResult};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, Uri};
use proto::limits::REQUEST_BYTES_MAX;
use proto::{TaskId, WorkflowId};
use serde::de::DeserializeOwned;
use std::str::FromStr;

// ---- bodies ----

/// A required JSON body of type `T`. Any content type is accepted (curl's `-d` sends form
/// encoding by default); what counts is that the bytes are JSON of the right shape.
#[derive(Debug)]
pub struct Body<T>(pub T);

/// A JSON body of type `T`, or `T::default()` when the body is empty.
#[derive(Debug)]
pub struct BodyOrDefault<T>(pub T);

/// A UTF-8 text body, as sent.
#[derive(Debug)]
pub struct Text(pub String);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> ApiResult<Self> {
        let bytes = read_body(request, state).await?;
        if is_blank(&bytes) {
            return Err(ApiError::bad_request(format!(
                "request body is missing: expected {}",
                describe::<T>()
            )));
        }
        parse_json(&bytes).map(Body)
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for BodyOrDefault<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> ApiResult<Self> {
        let bytes = read_body(request, state).await?;
        if is_blank(&bytes) {
            return Ok(BodyOrDefault(T::default()));
        }
        parse_json(&bytes).map(BodyOrDefault)
    }
}

impl<S: Send + Sync> FromRequest<S> for Text {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> ApiResult<Self> {
        let bytes = read_body(request, state).await?;
        String::from_utf8(bytes.to_vec())
            .map(Text)
            .map_err(|_| ApiError::bad_request("request body is not valid UTF-8 text"))
    }
}

/// A JSON list of `T`, or a single `T` taken as a list of one (Conductor wants lists on
/// `POST /metadata/taskdefs` and `PUT /metadata/workflow`; curl users often send one object).
#[derive(Debug)]
pub struct OneOrMany<T>(pub Vec<T>);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for OneOrMany<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> ApiResult<Self> {
        let bytes = read_body(request, state).await?;
        match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            None => Err(ApiError::bad_request(format!(
                "request body is missing: expected {}",
                describe::<Vec<T>>()
            ))),
            Some(b'[') => parse_json(&bytes).map(OneOrMany),
            Some(_) => parse_json(&bytes).map(|one| OneOrMany(vec![one])),
        }
    }
}

/// Buffers the body within [`REQUEST_BYTES_MAX`] (set by the router's `DefaultBodyLimit`).
async fn read_body<S: Send + Sync>(request: Request, state: &S) -> ApiResult<Bytes> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large(format!(
                    "request body is larger than the limit of {REQUEST_BYTES_MAX} bytes"
                ))
            } else {
                ApiError::bad_request(format!(
                    "could not read the request body: {}",
                    rejection.body_text()
                ))
            }
        })
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

/// Parses a JSON body, saying what was expected and where the input went wrong.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        use serde_json::error::Category;
        let problem = match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => "is not valid JSON",
            Category::Data => "does not have the expected shape",
        };
        ApiError::bad_request(format!(
            "request body {problem} (expected {}): {e}",
            describe::<T>()
        ))
    })
}

/// A reader's name for what a body of type `T` should be: "a JSON list of TaskDef".
pub fn describe<T>() -> String {
    let name = short_type_name(std::any::type_name::<T>());
    if let Some(inner) = name.strip_prefix("Vec<").and_then(|n| n.strip_suffix('>')) {
        format!("a JSON list of {inner}")
    } else if name.starts_with("Map<")
        || name.starts_with("BTreeMap<")
        || name.starts_with("HashMap<")
    {
        "a JSON object".to_owned()
    } else {
        format!("a JSON {name}")
    }
}

/// `alloc::vec::Vec<proto::model::TaskDef>` -> `Vec<TaskDef>`.
fn short_type_name(full: &str) -> String {
    let mut out = String::new();
    let mut segment = String::new();
    for c in full.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            segment.push(c);
        } else {
            out.push_str(segment.rsplit("::").next().unwrap_or(&segment));
            segment.clear();
            out.push(c);
        }
    }
    out.push_str(segment.rsplit("::").next().unwrap_or(&segment));
    out
}

// ---- query strings ----

/// The query string as name/value pairs, in order, percent-decoded. Repeated names are kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> ApiResult<Self> {
        Params::from_uri(&parts.uri)
    }
}

/// Numbers a query parameter may hold, with how to name them in an error.
pub trait Number: FromStr {
    const EXPECTED: &'static str;
}

macro_rules! number {
    ($($t:ty => $e:literal),*) => { $(impl Number for $t { const EXPECTED: &'static str = $e; })* };
}
number!(
    u32 => "a non-negative integer",
    u64 => "a non-negative integer",
    usize => "a non-negative integer",
    i32 => "an integer",
    i64 => "an integer"
);

impl Params {
    pub fn from_uri(uri: &Uri) -> ApiResult<Self> {
        Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map(|Query(pairs)| Params(pairs))
            .map_err(|e| {
                ApiError::bad_request(format!("malformed query string: {}", e.body_text()))
            })
    }

    /// The first non-empty value of a parameter. Empty values count as absent, as Spring treats them
    /// for parameters with defaults.
    pub fn str(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, v)| n == name && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    pub fn string(&self, name: &str) -> Option<String> {
        self.str(name).map(str::to_owned)
    }

    /// Every value of a repeated parameter, with comma-separated values split as Spring does
    /// (`?taskType=a&taskType=b` and `?taskType=a,b` mean the same).
    pub fn list(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// A boolean parameter, `default` when absent.
    pub fn bool(&self, name: &str, default: bool) -> ApiResult<bool> {
        match self.str(name) {
            None => Ok(default),
            Some(v) => parse_bool(name, v),
        }
    }

    /// A numeric parameter, None when absent.
    pub fn num<T: Number>(&self, name: &str) -> ApiResult<Option<T>> {
        match self.str(name) {
            None => Ok(None),
            Some(v) => v.trim().parse::<T>().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "query parameter '{name}' must be {}, got '{v}'",
                    T::EXPECTED
                ))
            }),
        }
    }

    /// A numeric parameter with a default.
    pub fn num_or<T: Number>(&self, name: &str, default: T) -> ApiResult<T> {
        Ok(self.num(name)?.unwrap_or(default))
    }
}

/// Parses a query-string boolean: `true`/`false`/`1`/`0` in any case (Python sends `True`/`False`).
pub fn parse_bool(name: &str, value: &str) -> ApiResult<bool> {
    let v = value.trim();
    if v.eq_ignore_ascii_case("true") || v == "1" {
        Ok(true)
    } else if v.eq_ignore_ascii_case("false") || v == "0" {
        Ok(false)
    } else {
        Err(ApiError::bad_request(format!(
            "query parameter '{name}' must be true or false, got '{value}'"
        )))
    }
}

// ---- paths, ids and names ----

/// Path parameters, with axum's rejection turned into a 400 `ErrorResponse`.
#[derive(Debug)]
pub struct PathArgs<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathArgs<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(t)| PathArgs(t))
            .map_err(|e| ApiError::bad_request(format!("malformed path: {}", e.body_text())))
    }
}

/// Checks that a client-supplied workflow id is a Baton id, and tags the request span with it.
/// A well-formed id that does not exist is the node's 404; a malformed one is a 400 here.
pub fn workflow_id(s: &str) -> ApiResult<WorkflowId> {
    let id = WorkflowId::parse(s)
        .map_err(|e| ApiError::bad_request(format!("invalid workflow id: {e}")))?;
    tracing::Span::current().record("workflow", id.as_str());
    Ok(id)
}

/// As [`workflow_id`], for task ids.
pub fn task_id(s: &str) -> ApiResult<TaskId> {
    let id =
        TaskId::parse(s).map_err(|e| ApiError::bad_request(format!("invalid task id: {e}")))?;
    tracing::Span::current().record("task", id.as_str());
    Ok(id)
}

/// Checks a name (workflow, task type, reference name) given in a path or query with the
/// door's one rule for names ([`proto::check::name`]).
pub fn name<'a>(kind: &str, s: &'a str) -> ApiResult<&'a str> {
    proto::check::name(kind, s)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::{body_json, call};
    use axum::http::header;
    use proto::limits::NAME_LEN_MAX;
    use proto::model::{Json, TaskDef, WorkflowDef};

    #[test]
    fn booleans_accept_python_and_curl_spellings() {
        for v in ["true", "True", "TRUE", "tRuE", "1", " true "] {
            assert_eq!(parse_bool("x", v), Ok(true), "{v}");
        }
        for v in ["false", "False", "FALSE", "0"] {
            assert_eq!(parse_bool("x", v), Ok(false), "{v}");
        }
        for v in ["yes", "no", "2", "t", "", "truee"] {
            let e = parse_bool("includeTasks", v).expect_err(v);
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(
                e.message.contains("'includeTasks' must be true or false"),
                "{}",
                e.message
            );
        }
    }

    fn params(query: &str) -> Params {
        Params::from_uri(&format!("/x?{query}").parse::<Uri>().expect("uri")).expect("params")
    }

    #[test]
    fn params_read_defaults_repeats_and_numbers() {
        let p = params(
            "includeTasks=False&taskType=a&taskType=b,c&version=3&empty=&neg=-1&reason=a%20b",
        );
        assert_eq!(p.bool("includeTasks", true), Ok(false));
        assert_eq!(p.bool("absent", true), Ok(true));
        assert_eq!(p.bool("empty", true), Ok(true));
        assert_eq!(p.list("taskType"), ["a", "b", "c"]);
        assert_eq!(p.num::<u32>("version"), Ok(Some(3)));
        assert_eq!(p.num::<u32>("empty"), Ok(None));
        assert_eq!(p.num_or::<u32>("absent", 7), Ok(7));
        assert_eq!(p.num::<i64>("neg"), Ok(Some(-1)));
        let e = p.num::<u32>("neg").expect_err("negative");
        assert_eq!(
            e.message,
            "query parameter 'neg' must be a non-negative integer, got '-1'"
        );
        assert_eq!(p.str("reason"), Some("a b"));
        assert_eq!(
            Params::from_uri(&"/x".parse::<Uri>().expect("uri")),
            Ok(Params::default())
        );
    }

    #[test]
    fn ids_and_names_are_checked() {
        let id = "01234567-89ab-cdef-0123-456789ab0005";
        assert_eq!(
            workflow_id(id).map(|w| w.as_str().to_owned()),
            Ok(id.to_owned())
        );
        assert_eq!(
            task_id(&id.to_uppercase()).map(|t| t.as_str().to_owned()),
            Ok(id.to_owned())
        );
        let e = workflow_id("not-an-id").expect_err("bad");
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(
            e.message
                .starts_with("invalid workflow id: 'not-an-id' is not a Baton id"),
            "{}",
            e.message
        );
        assert!(name("workflow name", "").is_err());
        assert!(name("workflow name", &"x".repeat(NAME_LEN_MAX + 1)).is_err());
        assert_eq!(name("workflow name", "ok"), Ok("ok"));
    }

    #[test]
    fn type_descriptions_read_well() {
        assert_eq!(describe::<Vec<TaskDef>>(), "a JSON list of TaskDef");
        assert_eq!(describe::<WorkflowDef>(), "a JSON WorkflowDef");
        assert_eq!(describe::<Json>(), "a JSON object");
    }

    #[test]
    fn json_errors_say_what_and_where() {
        let e = parse_json::<WorkflowDef>(b"{\"name\": \"w\", \"version\": \"one\"}")
            .expect_err("type");
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.starts_with(
            "request body does not have the expected shape (expected a JSON WorkflowDef)"
        ));
        assert!(e.message.contains("line 1 column"), "{}", e.message);
        let e = parse_json::<Vec<TaskDef>>(b"[{").expect_err("syntax");
        assert!(e
            .message
            .starts_with("request body is not valid JSON (expected a JSON list of TaskDef)"));
    }

    fn body_app() -> axum::Router {
        use axum::routing::post;
        axum::Router::new()
            .route("/def", post(|Body(def): Body<WorkflowDef>| async move { def.name }))
            .route("/input", post(|BodyOrDefault(input): BodyOrDefault<Json>| async move { input.len().to_string() }))
            .layer(axum::extract::DefaultBodyLimit::max(64))
    }

    fn post(path: &str, body: &str) -> Request {
        Request::builder()
            .method("POST")
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(body.to_owned()))
            .expect("request")
    }

    #[tokio::test]
    async fn bodies_are_rejected_as_error_responses() {
        let ok = call(body_app(), post("/def", r#"{"name":"w"}"#)).await;
        assert_eq!(ok.status(), StatusCode::OK);
        for (body, status, start) in [
            ("{not json", 400, "request body is not valid JSON"),
            (
                r#"{"name": 5}"#,
                400,
                "request body does not have the expected shape",
            ),
            (
                "",
                400,
                "request body is missing: expected a JSON WorkflowDef",
            ),
            (
                &format!(r#"{{"name":"{}"}}"#, "x".repeat(100)),
                413,
                "request body is larger than the limit",
            ),
        ] {
            let response = call(body_app(), post("/def", body)).await;
            assert_eq!(response.status().as_u16(), status, "{body}");
            assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
            let json = body_json(response).await;
            assert_eq!(json["status"], status);
            assert!(
                json["message"]
                    .as_str()
                    .expect("message")
                    .starts_with(start),
                "{json}"
            );
        }
        let empty = call(body_app(), post("/input", "")).await;
        assert_eq!(empty.status(), StatusCode::OK);
    }
}
