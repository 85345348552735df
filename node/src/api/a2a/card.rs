//! The agent card (`GET /.well-known/agent-card.json`): one document that v0.3 clients
//! (`protocolVersion`, `url`, `preferredTransport`) and v1.0 clients (`supportedInterfaces`)
//! both read.

use super::input::OUTPUT_MODES;
use crate::service::a2a::Skill;
use axum::http::HeaderMap;
use serde_json::{json, Value};
use std::net::SocketAddr;

/// Where the JSON-RPC endpoint is served.
pub const RPC_PATH: &str = "/a2a";

/// The card of an agent whose JSON-RPC endpoint is `url`.
pub fn card(url: &str, skills: &[Skill]) -> Value {
    let skills: Vec<Value> = skills.iter().map(skill).collect();
    json!({
        "name": "Baton",
        "description": "Baton workflows served as A2A skills: a message starts a workflow run, \
                        which is the task; its output is the task's artifact.",
        "version": env!("CARGO_PKG_VERSION"),
        "protocolVersion": "0.3.0",
        "url": url,
        "preferredTransport": "JSONRPC",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": OUTPUT_MODES,
        "defaultOutputModes": OUTPUT_MODES,
        "skills": skills,
    })
}

fn skill(s: &Skill) -> Value {
    json!({"id": s.id, "name": s.name, "description": s.description, "tags": s.tags})
}

/// The endpoint's URL as the client reached this node (its `Host` header), else at the node's
/// configured HTTP address.
pub fn endpoint(headers: &HeaderMap, http: SocketAddr) -> String {
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| is_host(h))
        .map(str::to_owned);
    let host = host.unwrap_or_else(|| {
        let ip = if http.ip().is_unspecified() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            http.ip()
        };
        SocketAddr::new(ip, http.port()).to_string()
    });
    format!("http://{host}{RPC_PATH}")
}

/// A host name or address with an optional port, nothing else.
fn is_host(h: &str) -> bool {
    !h.is_empty()
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:[]_".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_speaks_both_versions() {
        let skill = Skill {
            id: "sum".into(),
            name: "Sum".into(),
            description: "adds".into(),
            tags: vec!["math".into()],
            workflow: "sum_wf".into(),
            version: 1,
            document: None,
        };
        let card = card("http://h:1/a2a", &[skill]);
        assert_eq!(card["protocolVersion"], "0.3.0");
        assert_eq!(card["url"], "http://h:1/a2a");
        assert_eq!(card["preferredTransport"], "JSONRPC");
        let interface = &card["supportedInterfaces"][0];
        assert_eq!(interface["protocolBinding"], "JSONRPC");
        assert_eq!(interface["protocolVersion"], "1.0");
        assert_eq!(interface["url"], "http://h:1/a2a");
        assert_eq!(
            card["capabilities"],
            json!({"streaming": true, "pushNotifications": false})
        );
        assert_eq!(
            card["defaultOutputModes"],
            json!(["application/json", "text/plain"])
        );
        let want = json!([{"id": "sum", "name": "Sum", "description": "adds", "tags": ["math"]}]);
        assert_eq!(card["skills"], want);
    }

    #[test]
    fn the_endpoint_is_where_the_client_came() {
        let http: SocketAddr = "0.0.0.0:8080".parse().expect("addr");
        let mut headers = HeaderMap::new();
        assert_eq!(endpoint(&headers, http), "http://127.0.0.1:8080/a2a");
        headers.insert("host", "baton.example:9000".parse().expect("header"));
        assert_eq!(endpoint(&headers, http), "http://baton.example:9000/a2a");
        headers.insert("host", "evil\"/x".parse().expect("header"));
        assert_eq!(endpoint(&headers, http), "http://127.0.0.1:8080/a2a");
    }
}
