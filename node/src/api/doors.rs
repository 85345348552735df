//! The API's doors against browsers and strangers, checked before any route runs:
//!
//! - **Host.** A node told its names (`--host-names`) answers only requests naming one of them
//!   or an IP address in `Host`; a node listening on loopback only answers `localhost` and IP
//!   addresses unless told more. A web page whose name an attacker points at the node (DNS
//!   rebinding) names its own host, and is refused.
//! - **Origin.** A request a browser sends from another site carries its `Origin` (or
//!   `Sec-Fetch-Site: cross-site`): refused unless the origin is the node's own (its scheme,
//!   host and port those of `Host`) or one the operator allowed (`--allow-origin`).
//! - **Bodies.** A request body is JSON (`application/json`, `application/*+json`) or YAML (a
//!   Serverless Workflow document: `application/yaml`, `application/x-yaml`, `text/yaml`), so a
//!   page cannot send one without the browser asking the node first (it never agrees: the API
//!   sends no CORS headers). A webhook's delivery (`/api/webhook/...`) takes any body: its
//!   sender is a third party, authenticated by its signature.
//!
//! Refusals are Conductor's error body: 403 for a host or an origin, 415 for a body.

use super::error::ApiError;
pub use crate::options::Doors;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// The flag that names the node's host names.
pub const HOST_NAMES_FLAG: &str = "--host-names";
/// The flag that names the origins allowed besides the node's own.
pub const ALLOW_ORIGIN_FLAG: &str = "--allow-origin";
/// The routes whose bodies come from third parties, in any content type.
const ANY_BODY_PREFIX: &str = "/api/webhook/";

impl Doors {
    /// Why `headers` (of a request to `path`) may not come in, if they may not.
    fn refusal(&self, path: &str, headers: &HeaderMap) -> Option<ApiError> {
        let host = text(headers, header::HOST).map(str::to_ascii_lowercase);
        if let Some(host) = &host {
            if !self.host_allowed(host) {
                let why = format!(
                    "the Host '{host}' is not one of this node's names ({HOST_NAMES_FLAG})"
                );
                return Some(ApiError::new(StatusCode::FORBIDDEN, why));
            }
        }
        if let Some(why) = self.cross_site(headers, host.as_deref()) {
            return Some(ApiError::new(StatusCode::FORBIDDEN, why));
        }
        if path.starts_with(ANY_BODY_PREFIX) || !has_body(headers) {
            return None;
        }
        let kind = text(headers, header::CONTENT_TYPE).unwrap_or("");
        (!structured(kind)).then(|| {
            let why = format!("a request body must be JSON (Content-Type: application/json) or, for a Serverless Workflow document, YAML (application/yaml); got '{kind}'");
            ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, why)
        })
    }

    /// Whether `Host` (`name[:port]`) names this node.
    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        if name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok()
        {
            return true;
        }
        if !self.host_names.is_empty() {
            return self.host_names.iter().any(|n| n == name);
        }
        !self.loopback_only || name == "localhost"
    }

    /// Why the request comes from another site, if it does: an `Origin` that is neither the
    /// node's own nor allowed, or a browser's `Sec-Fetch-Site: cross-site` without one.
    fn cross_site(&self, headers: &HeaderMap, host: Option<&str>) -> Option<String> {
        let refused = |origin: &str| {
            format!("a cross-site request is refused: the Origin '{origin}' is not this node's (allow it with {ALLOW_ORIGIN_FLAG})")
        };
        if let Some(origin) = text(headers, header::ORIGIN) {
            let origin = origin.to_ascii_lowercase();
            let own = host.is_some_and(|h| origin.split_once("://").is_some_and(|(_, o)| o == h));
            let allowed = self.allowed_origins.contains(&origin);
            return (!own && !allowed).then(|| refused(&origin));
        }
        let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
        (site == Some("cross-site")).then(|| refused("(another site)"))
    }
}

/// The middleware: a request the doors refuse gets its error; the others go on.
pub async fn guard(State(doors): State<Arc<Doors>>, request: Request, next: Next) -> Response {
    match doors.refusal(request.uri().path(), request.headers()) {
        Some(refusal) => refusal.into_response(),
        None => next.run(request).await,
    }
}

fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `Host` without its port (an IPv6 address keeps its brackets).
fn host_name(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !name.ends_with(':') => {
            name
        }
        _ => host,
    }
}

/// Whether the request carries a body (a length over zero, or chunks).
fn has_body(headers: &HeaderMap) -> bool {
    let length = text(headers, header::CONTENT_LENGTH).and_then(|l| l.trim().parse::<u64>().ok());
    length.is_some_and(|l| l > 0) || headers.contains_key(header::TRANSFER_ENCODING)
}

/// Whether a content type is JSON or YAML.
fn structured(kind: &str) -> bool {
    let essence = kind
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "application/json"
            | "application/yaml"
            | "application/x-yaml"
            | "text/yaml"
            | "text/x-yaml"
    ) || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(
                header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                v.parse().expect("value"),
            );
        }
        map
    }

    fn refused(doors: &Doors, path: &str, pairs: &[(&str, &str)]) -> Option<StatusCode> {
        doors.refusal(path, &headers(pairs)).map(|e| e.status)
    }

    #[test]
    fn a_loopback_node_answers_its_loopback_names_and_addresses_only() {
        let doors = Doors::new("127.0.0.1:8080".parse().expect("addr"), vec![], vec![]);
        for host in [
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LOCALHOST",
        ] {
            assert_eq!(refused(&doors, "/api/x", &[("host", host)]), None, "{host}");
        }
        let rebound = refused(&doors, "/api/x", &[("host", "evil.example:8080")]);
        assert_eq!(rebound, Some(StatusCode::FORBIDDEN));
        let open = Doors::new("0.0.0.0:8080".parse().expect("addr"), vec![], vec![]);
        assert_eq!(
            refused(&open, "/api/x", &[("host", "baton.internal")]),
            None
        );
        let named = Doors::new(
            "0.0.0.0:8080".parse().expect("addr"),
            vec!["baton.example".into()],
            vec![],
        );
        assert_eq!(
            refused(&named, "/api/x", &[("host", "baton.example:443")]),
            None
        );
        assert_eq!(refused(&named, "/api/x", &[("host", "10.0.0.7")]), None);
        assert_eq!(
            refused(&named, "/api/x", &[("host", "other.example")]),
            Some(StatusCode::FORBIDDEN)
        );
    }

    #[test]
    fn another_sites_requests_are_refused_unless_allowed() {
        let doors = Doors::new(
            "127.0.0.1:8080".parse().expect("addr"),
            vec![],
            vec!["http://localhost:5000".into()],
        );
        let from = |origin: &str| {
            refused(
                &doors,
                "/api/x",
                &[("host", "localhost:8080"), ("origin", origin)],
            )
        };
        assert_eq!(from("http://evil.example"), Some(StatusCode::FORBIDDEN));
        assert_eq!(from("null"), Some(StatusCode::FORBIDDEN));
        assert_eq!(from("http://localhost:8080"), None, "its own origin");
        assert_eq!(from("http://localhost:5000"), None, "allowed");
        let fetched = [("host", "localhost:8080"), ("sec-fetch-site", "cross-site")];
        assert_eq!(
            refused(&doors, "/api/x", &fetched),
            Some(StatusCode::FORBIDDEN)
        );
        let same = [
            ("host", "localhost:8080"),
            ("sec-fetch-site", "same-origin"),
        ];
        assert_eq!(refused(&doors, "/api/x", &same), None);
    }

    #[test]
    fn bodies_are_json_or_yaml_except_a_webhooks() {
        let doors = Doors::new("127.0.0.1:8080".parse().expect("addr"), vec![], vec![]);
        let body = |kind: &str| {
            refused(
                &doors,
                "/api/workflow/x",
                &[("content-length", "2"), ("content-type", kind)],
            )
        };
        for kind in [
            "application/json",
            "application/json; charset=utf-8",
            "application/cloudevents+json",
            "application/yaml",
            "text/yaml",
        ] {
            assert_eq!(body(kind), None, "{kind}");
        }
        for kind in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "",
        ] {
            assert_eq!(
                body(kind),
                Some(StatusCode::UNSUPPORTED_MEDIA_TYPE),
                "{kind}"
            );
        }
        let hook = [("content-length", "2"), ("content-type", "text/plain")];
        assert_eq!(refused(&doors, "/api/webhook/orders", &hook), None);
        let empty = [("content-length", "0"), ("content-type", "text/plain")];
        assert_eq!(refused(&doors, "/api/workflow/x", &empty), None, "no body");
    }
}
