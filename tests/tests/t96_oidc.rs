//! People signing in through an OpenID Connect issuer. The test plays the issuer (a discovery
//! document and its keys on loopback, an ES256 key of its own); a node started with `--auth`
//! and `--oidc-issuer` takes the issuer's bearer tokens, with the roles their `roles` claim
//! lists, refuses tokens for another audience, expired or signed by another key, and records
//! a person's operations on workflows in the audit log under the person's name.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use harness::upstream::{Answer, Upstream};
use harness::{wait_for, Api, Server};
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const WAIT: Duration = Duration::from_secs(30);
const AUDIENCE: &str = "baton";

/// An issuer: its key, served as a JWKS beside its discovery document.
struct Issuer {
    key: EcdsaKeyPair,
    upstream: Upstream,
}

fn key_pair() -> EcdsaKeyPair {
    let random = SystemRandom::new();
    let pkcs8 =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &random).expect("a key");
    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &random)
        .expect("a key pair")
}

impl Issuer {
    fn start() -> Issuer {
        let key = key_pair();
        let point = key.public_key().as_ref().to_vec();
        let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256", "use": "sig",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65])});
        let base: Arc<OnceLock<String>> = Arc::default();
        let url = base.clone();
        let upstream = Upstream::start(move |seen| {
            let base = url.get().cloned().unwrap_or_default();
            match seen.path.as_str() {
                "/.well-known/openid-configuration" => Answer::new(
                    "200 OK",
                    &json!({"issuer": base, "jwks_uri": format!("{base}/jwks")}).to_string(),
                ),
                "/jwks" => Answer::new("200 OK", &json!({"keys": [jwk]}).to_string()),
                _ => Answer::new("404 Not Found", "{}"),
            }
        });
        base.set(upstream.url("")).expect("set once");
        Issuer { key, upstream }
    }

    fn url(&self) -> String {
        self.upstream.url("")
    }

    /// A token for `sub` with `roles`, for `audience`, expiring `ttl_secs` from now, signed by
    /// `key` (the issuer's own unless another is given).
    fn token(&self, sub: &str, roles: &[&str], audience: &str, ttl_secs: i64) -> String {
        sign(&self.key, &self.url(), sub, roles, audience, ttl_secs)
    }
}

fn sign(
    key: &EcdsaKeyPair,
    issuer: &str,
    sub: &str,
    roles: &[&str],
    audience: &str,
    ttl_secs: i64,
) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs() as i64;
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": "k1"});
    let claims = json!({"iss": issuer, "aud": audience, "sub": sub,
        "email": format!("{sub}@example.com"), "roles": roles, "iat": now, "exp": now + ttl_secs});
    let encode = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let input = format!("{}.{}", encode(&header), encode(&claims));
    let signature = key
        .sign(&SystemRandom::new(), input.as_bytes())
        .expect("signed");
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
}

/// One request with `Authorization: Bearer <token>`: its status and JSON body.
fn call(
    server: &Server,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let bearer = format!("Bearer {token}");
    let api = Api::with_timeout(&server.base_url(), WAIT);
    api.call(&[("Authorization", &bearer)], method, path, body)
}

#[test]
fn people_sign_in_with_an_openid_connect_issuer() {
    let issuer = Issuer::start();
    let server = Server::start_with_args(&[
        "--auth".to_owned(),
        "--oidc-issuer".to_owned(),
        issuer.url(),
        "--oidc-audience".to_owned(),
        AUDIENCE.to_owned(),
    ]);
    let reader = issuer.token("ada", &["READ_ONLY"], AUDIENCE, 600);
    // The node fetches the issuer's keys as it starts.
    wait_for(WAIT, "the issuer's keys", || {
        (call(&server, &reader, "GET", "/api/metadata/taskdefs", None).0 == 200).then_some(())
    });
    let task = json!([{"name": "t96_task"}]);
    let (status, _) = call(
        &server,
        &reader,
        "POST",
        "/api/metadata/taskdefs",
        Some(&task),
    );
    assert_eq!(status, 403, "a reader defines nothing");

    let refused = |token: &str| call(&server, token, "GET", "/api/metadata/taskdefs", None);
    let (status, body) = refused(&issuer.token("ada", &["READ_ONLY"], "another-app", 600));
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("INVALID_TOKEN")),
        "{body}"
    );
    let (status, body) = refused(&issuer.token("ada", &["READ_ONLY"], AUDIENCE, -120));
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("EXPIRED_TOKEN")),
        "{body}"
    );
    let forged = sign(&key_pair(), &issuer.url(), "ada", &["ADMIN"], AUDIENCE, 600);
    assert_eq!(
        refused(&forged).0,
        401,
        "signed by a key that is not the issuer's"
    );

    // An administrator defines and starts a workflow; an operator pauses it, on the record.
    let admin = issuer.token("grace", &["ADMIN"], AUDIENCE, 600);
    let def = json!({"name": "t96_wf", "version": 1, "schemaVersion": 2,
        "tasks": [{"name": "t96_task", "taskReferenceName": "t", "type": "SIMPLE"}]});
    let (status, body) = call(
        &server,
        &admin,
        "POST",
        "/api/metadata/workflow",
        Some(&def),
    );
    assert_eq!(status, 200, "{body}");
    let (status, id) = call(
        &server,
        &admin,
        "POST",
        "/api/workflow/t96_wf",
        Some(&json!({})),
    );
    assert_eq!(status, 200, "{id}");
    let id = id.as_str().expect("an id").to_owned();
    let operator = issuer.token("alan", &["workflow_manager"], AUDIENCE, 600);
    let (status, body) = call(
        &server,
        &operator,
        "PUT",
        &format!("/api/workflow/{id}/pause"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    let (_, audit) = call(&server, &admin, "GET", "/api/admin/audit", None);
    let entries = audit.as_array().expect("entries");
    let paused = entries
        .iter()
        .find(|e| e["action"] == "PauseWorkflow")
        .expect("recorded");
    assert_eq!(paused["by"], "alan@example.com (oidc:alan)", "{audit:#}");
    assert!(
        paused["target"].as_str().is_some_and(|t| t.contains(&id)),
        "{paused}"
    );
    let defined = entries
        .iter()
        .find(|e| e["action"] == "PutWorkflowDef")
        .expect("recorded");
    assert_eq!(defined["by"], "grace@example.com (oidc:grace)", "{audit:#}");
}
