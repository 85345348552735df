//! OAuth2 access tokens for calls that authenticate with them (`engine::OAuth2Grant`, a DSL
//! call's `oauth2` policy): obtained with a token request to the grant's endpoint, made like any
//! call (the allow list, the slots, the timeouts of the call it is for), and kept per grant
//! until shortly before they expire, so calls under one grant share one token.

use super::{HttpCaller, HttpError};
use engine::{HttpRequest, OAuth2Grant};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Tokens kept at once; past it the expired go, then all.
const TOKENS_MAX: usize = 256;
/// How long a token is kept when its answer gives no `expires_in`.
const LIFETIME_DEFAULT_SECS: u64 = 60;
/// How long before its expiry a token is no longer used (at most half its lifetime).
const EARLY_SECS: u64 = 30;

/// The tokens kept, by grant.
#[derive(Default)]
pub(super) struct Tokens(Mutex<BTreeMap<OAuth2Grant, (String, Instant)>>);

impl Tokens {
    fn get(&self, grant: &OAuth2Grant) -> Option<String> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (token, until) = kept.get(grant)?;
        (Instant::now() < *until).then(|| token.clone())
    }

    fn put(&self, grant: &OAuth2Grant, token: String, lifetime_secs: u64) {
        let early = EARLY_SECS.min(lifetime_secs / 2);
        let until = Instant::now() + Duration::from_secs(lifetime_secs - early);
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= TOKENS_MAX {
            let now = Instant::now();
            kept.retain(|_, (_, until)| *until > now);
            if kept.len() >= TOKENS_MAX {
                kept.clear();
            }
        }
        kept.insert(grant.clone(), (token, until));
    }
}

impl HttpCaller {
    /// An access token for `grant`, kept or requested now with `call`'s timeouts.
    pub(super) async fn token(
        &self,
        grant: &OAuth2Grant,
        call: &HttpRequest,
    ) -> Result<String, HttpError> {
        if let Some(token) = self.tokens.get(grant) {
            return Ok(token);
        }
        let answer = self.exchange(&token_request(grant, call)).await?;
        let (token, lifetime) = read_token(&answer).map_err(|why| HttpError::Token {
            uri: grant.token_uri.clone(),
            why,
        })?;
        self.tokens.put(grant, token.clone(), lifetime);
        Ok(token)
    }
}

/// The token request (RFC 6749 §4.3.2, §4.4.2): a form posted to the token endpoint.
fn token_request(grant: &OAuth2Grant, call: &HttpRequest) -> HttpRequest {
    let mut form = Map::new();
    form.insert("grant_type".into(), grant.grant.clone().into());
    let secret = grant.client_secret.clone().unwrap_or_default();
    let mut headers = BTreeMap::new();
    match grant.client_authentication.as_str() {
        "client_secret_basic" => {
            use base64::Engine as _;
            let pair = format!("{}:{}", form_escape(&grant.client_id), form_escape(&secret));
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            headers.insert("Authorization".into(), format!("Basic {encoded}"));
        }
        "none" => {
            form.insert("client_id".into(), grant.client_id.clone().into());
        }
        _ => {
            form.insert("client_id".into(), grant.client_id.clone().into());
            form.insert("client_secret".into(), secret.into());
        }
    }
    if grant.grant == "password" {
        let user = grant.username.clone().unwrap_or_default();
        form.insert("username".into(), user.into());
        form.insert(
            "password".into(),
            grant.password.clone().unwrap_or_default().into(),
        );
    }
    for (key, list) in [("scope", &grant.scopes), ("audience", &grant.audiences)] {
        if !list.is_empty() {
            form.insert(key.into(), list.join(" ").into());
        }
    }
    HttpRequest {
        uri: grant.token_uri.clone(),
        method: "POST".into(),
        headers,
        body: Some(Value::Object(form)),
        accept: "application/json".into(),
        content_type: "application/x-www-form-urlencoded".into(),
        connect_timeout_ms: call.connect_timeout_ms,
        read_timeout_ms: call.read_timeout_ms,
        at_most_once: false,
        oauth2: None,
        show_token: false,
    }
}

/// The client id or secret as `client_secret_basic` sends it: form-encoded (RFC 6749 §2.3.1).
fn form_escape(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The token and its lifetime in seconds from the token endpoint's answer.
fn read_token(answer: &Value) -> Result<(String, u64), String> {
    let response = &answer["response"];
    let status = response["statusCode"].as_u64().unwrap_or_default();
    let body = &response["body"];
    if !(200..300).contains(&status) {
        let error = body.get("error").and_then(Value::as_str).unwrap_or("");
        return Err(format!("the token endpoint answered {status} {error}")
            .trim_end()
            .to_owned());
    }
    let token = body.get("access_token").and_then(Value::as_str);
    let token = token
        .filter(|t| !t.is_empty())
        .ok_or("the answer has no access_token")?;
    let lifetime = body.get("expires_in").and_then(Value::as_u64);
    Ok((
        token.to_owned(),
        lifetime.unwrap_or(LIFETIME_DEFAULT_SECS).max(1),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn grant(authentication: &str) -> OAuth2Grant {
        OAuth2Grant {
            token_uri: "https://auth.example.com/oauth2/token".into(),
            grant: "client_credentials".into(),
            client_id: "app".into(),
            client_secret: Some("s3cret".into()),
            client_authentication: authentication.into(),
            username: None,
            password: None,
            scopes: vec!["read".into(), "write".into()],
            audiences: Vec::new(),
        }
    }

    fn call() -> HttpRequest {
        HttpRequest {
            uri: "https://api.example.com/x".into(),
            method: "GET".into(),
            headers: BTreeMap::new(),
            body: None,
            accept: "application/json".into(),
            content_type: "application/json".into(),
            connect_timeout_ms: 1_000,
            read_timeout_ms: 2_000,
            at_most_once: false,
            oauth2: None,
            show_token: false,
        }
    }

    #[test]
    fn the_client_authenticates_in_the_form_or_in_a_header() {
        let post = token_request(&grant("client_secret_post"), &call());
        assert_eq!(post.method, "POST");
        assert_eq!(
            post.body,
            Some(
                json!({"grant_type": "client_credentials", "client_id": "app",
                        "client_secret": "s3cret", "scope": "read write"})
            )
        );
        assert!(post.headers.is_empty());
        let basic = token_request(&grant("client_secret_basic"), &call());
        // base64("app:s3cret")
        assert_eq!(basic.headers["Authorization"], "Basic YXBwOnMzY3JldA==");
        assert_eq!(
            basic.body.as_ref().expect("a form")["client_secret"],
            Value::Null
        );
        assert_eq!(basic.read_timeout_ms, 2_000, "the call's timeouts");
    }

    #[test]
    fn an_answer_gives_a_token_and_its_lifetime_or_says_why_not() {
        let answer =
            |status: u64, body: Value| json!({"response": {"statusCode": status, "body": body}});
        assert_eq!(
            read_token(&answer(
                200,
                json!({"access_token": "t", "expires_in": 3600})
            )),
            Ok(("t".to_owned(), 3600))
        );
        assert_eq!(
            read_token(&answer(200, json!({"access_token": "t"}))),
            Ok(("t".to_owned(), 60))
        );
        assert!(read_token(&answer(401, json!({"error": "invalid_client"})))
            .is_err_and(|e| e.contains("401 invalid_client")));
        assert!(read_token(&answer(200, json!({}))).is_err());
    }

    #[test]
    fn a_kept_token_serves_until_shortly_before_it_expires() {
        let tokens = Tokens::default();
        tokens.put(&grant("none"), "t".into(), 3600);
        assert_eq!(tokens.get(&grant("none")).as_deref(), Some("t"));
        assert_eq!(tokens.get(&grant("client_secret_post")), None, "per grant");
    }
}
