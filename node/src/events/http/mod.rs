//! Conductor's HTTP task: the call an `engine::HttpRequest` describes, made by the partition's
//! leader after the commit that left it pending (`service::events` performs it and reports the
//! outcome).
//!
//! Any answer is an outcome — `{"response": {statusCode, headers, body, reasonPhrase}}`, the
//! engine fails the attempt for a status outside 2xx — and no answer (refused, timed out, a
//! host not allowed, a body past [`RESPONSE_BYTES_MAX`]) is an [`HttpError`]. At most
//! `HttpOptions::concurrency` calls are in flight on a node; the others wait for a slot. Which
//! hosts may be reached is [`allow`]'s rule, applied to the URI's host, to every redirect's, and
//! to every address a name resolves to. `connectionTimeOut` bounds connecting;
//! `readTimeOut` bounds the whole call, from sending the request to the last byte of the body.
//!
//! A call can be made twice: the leader that made it may die before its outcome committed, and
//! the next leader makes it again. Calls should be idempotent, or tolerate repeats.

pub mod allow;
mod answer;
mod oauth2;

pub use allow::AllowList;

use engine::HttpRequest;
use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::{Client, Method, RequestBuilder, Url};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// HTTP calls in flight at once on a node when `--http-concurrency` is not given.
pub const HTTP_CONCURRENCY: usize = 64;
/// The most `--http-concurrency` may ask for.
pub const HTTP_CONCURRENCY_MAX: usize = 4_096;
/// The largest response body a call takes (the payload limit of a task's output); a longer
/// one fails the attempt, and is never read further.
pub const RESPONSE_BYTES_MAX: usize = proto::limits::PAYLOAD_BYTES_MAX;
/// Redirects followed for one call, each checked against the allow list.
pub const REDIRECTS_MAX: usize = 10;
/// Clients kept, one per connection timeout tasks ask for (each with its own pool of
/// connections); past it a call builds its own.
const CLIENTS_MAX: usize = 16;

/// How a node makes HTTP tasks' calls (`--http-concurrency`, `--http-allow`).
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Calls in flight at once (at least 1).
    pub concurrency: usize,
    /// The hosts calls may reach; `None`: every host (see [`allow`]).
    pub allow: Option<AllowList>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            concurrency: HTTP_CONCURRENCY,
            allow: None,
        }
    }
}

/// Why a call has no answer; the text is the task's `reasonForIncompletion`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("HTTP task: no uri given (http_request.uri)")]
    NoUri,
    #[error("HTTP task: invalid uri '{uri}': {why}")]
    BadUri { uri: String, why: String },
    #[error("HTTP task: invalid method '{0}'")]
    BadMethod(String),
    #[error("HTTP task: invalid header '{0}'")]
    BadHeader(String),
    #[error("HTTP task: host '{host}' (port {port}) is not allowed by this node's {flag} list", flag = allow::ALLOW_FLAG)]
    NotAllowed { host: String, port: u16 },
    #[error("HTTP task: {}, a link-local or cloud metadata address, is refused unless {flag} names it", guarded(host, ip), flag = allow::ALLOW_FLAG)]
    Guarded { host: String, ip: IpAddr },
    #[error("HTTP task: {target} timed out after {ms} ms (connectionTimeOut) connecting")]
    ConnectTimedOut { target: String, ms: u64 },
    #[error(
        "HTTP task: {target} timed out after {ms} ms (readTimeOut) waiting for the whole response"
    )]
    TimedOut { target: String, ms: u64 },
    #[error("HTTP task: {target}: the response body is larger than {max} bytes")]
    TooLarge { target: String, max: usize },
    #[error("HTTP task: {target} failed: {why}")]
    Transport { target: String, why: String },
    #[error("HTTP task: this node cannot make calls: {0}")]
    Setup(String),
    #[error("HTTP task: no OAuth2 access token from {uri}: {why}")]
    Token { uri: String, why: String },
}

/// `'host' (ip)`, or the address alone when the URI gives it.
fn guarded(host: &str, ip: &IpAddr) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<IpAddr>().ok() == Some(*ip) {
        return format!("address {ip}");
    }
    format!("host '{host}' at {ip}")
}

/// How host names are resolved: the system's resolver (tests give their own).
type Lookup = fn(String) -> BoxFuture<'static, std::io::Result<Vec<SocketAddr>>>;

fn system_lookup(host: String) -> BoxFuture<'static, std::io::Result<Vec<SocketAddr>>> {
    Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.collect()) })
}

/// The node's HTTP caller: its clients, the allow list and the slots of calls in flight.
pub struct HttpCaller {
    allow: Arc<Option<AllowList>>,
    slots: Semaphore,
    clients: Mutex<BTreeMap<u64, Client>>,
    lookup: Lookup,
    /// Every client's TLS, or why there is none.
    tls: Result<rustls::ClientConfig, String>,
    /// OAuth2 access tokens, by grant.
    tokens: oauth2::Tokens,
}

impl HttpCaller {
    pub fn new(options: &HttpOptions) -> Self {
        Self::with_lookup(options, system_lookup)
    }

    fn with_lookup(options: &HttpOptions, lookup: Lookup) -> Self {
        let concurrency = options.concurrency.clamp(1, HTTP_CONCURRENCY_MAX);
        Self {
            allow: Arc::new(options.allow.clone()),
            slots: Semaphore::new(concurrency),
            clients: Mutex::default(),
            lookup,
            tls: tls_config(),
            tokens: oauth2::Tokens::default(),
        }
    }

    /// Makes the call `request` describes, once a slot is free, first obtaining the OAuth2
    /// access token it sends if it asks for one: the answer as the HTTP task's output (with the
    /// token as `authorization: {scheme, parameter}` when the request asks to show it), or why
    /// there is none.
    pub async fn call(&self, request: &HttpRequest) -> Result<Value, HttpError> {
        let Some(grant) = &request.oauth2 else {
            return self.exchange(request).await;
        };
        let token = self.token(grant, request).await?;
        let mut authorized = request.clone();
        authorized.oauth2 = None;
        let bearer = format!("Bearer {token}");
        authorized.headers.insert("Authorization".into(), bearer);
        let mut answer = self.exchange(&authorized).await?;
        if request.show_token {
            answer["authorization"] = serde_json::json!({"scheme": "Bearer", "parameter": token});
        }
        Ok(answer)
    }

    /// One request and its answer.
    async fn exchange(&self, request: &HttpRequest) -> Result<Value, HttpError> {
        let url = parse_uri(&request.uri)?;
        let method = Method::from_bytes(request.method.as_bytes())
            .map_err(|_| HttpError::BadMethod(request.method.clone()))?;
        check_url(self.allow.as_ref().as_ref(), &url)?;
        let headers = headers_of(request)?;
        let client = self.client(request.connect_timeout_ms)?;
        let target = format!("{method} {url}");
        let builder = client
            .request(method, url)
            .headers(headers)
            .timeout(Duration::from_millis(request.read_timeout_ms));
        let builder = with_body(builder, request);
        let _slot = self.slots.acquire().await;
        let response = builder
            .send()
            .await
            .map_err(|e| transport_error(e, &target, request))?;
        answer::read(response, RESPONSE_BYTES_MAX)
            .await
            .map_err(|e| match e {
                answer::Failure::TooLarge => HttpError::TooLarge {
                    target: target.clone(),
                    max: RESPONSE_BYTES_MAX,
                },
                answer::Failure::Read(e) => transport_error(e, &target, request),
            })
    }

    /// The client for calls that connect within `connect_ms`.
    fn client(&self, connect_ms: u64) -> Result<Client, HttpError> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = clients.get(&connect_ms) {
            return Ok(c.clone());
        }
        let resolver = Resolver {
            allow: self.allow.clone(),
            lookup: self.lookup,
        };
        let tls = self.tls.clone().map_err(HttpError::Setup)?;
        let client = build_client(resolver, tls, connect_ms)?;
        if clients.len() < CLIENTS_MAX {
            clients.insert(connect_ms, client.clone());
        }
        Ok(client)
    }
}

/// The task's `uri`, an absolute `http` or `https` URL.
fn parse_uri(uri: &str) -> Result<Url, HttpError> {
    if uri.trim().is_empty() {
        return Err(HttpError::NoUri);
    }
    let bad = |why: String| HttpError::BadUri {
        uri: uri.to_owned(),
        why,
    };
    let url = Url::parse(uri.trim()).map_err(|e| bad(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https".into()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host".into()));
    }
    Ok(url)
}

/// Whether `url`'s host may be reached: the allow list, and the address rule for an IP host
/// (names are checked when they resolve, see [`Resolver`]).
fn check_url(allow: Option<&AllowList>, url: &Url) -> Result<(), HttpError> {
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(0);
    if allow.is_some_and(|a| !a.allows(host, port)) {
        return Err(HttpError::NotAllowed {
            host: host.to_owned(),
            port,
        });
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse() {
        Ok(ip) if !allow::address_allowed(allow, ip) => Err(HttpError::Guarded {
            host: host.to_owned(),
            ip,
        }),
        _ => Ok(()),
    }
}

/// The request's headers: `Accept`, `Content-Type` when there is a body, then the task's own.
fn headers_of(request: &HttpRequest) -> Result<HeaderMap, HttpError> {
    let value = |v: &str, name: &str| {
        HeaderValue::from_str(v).map_err(|_| HttpError::BadHeader(name.to_owned()))
    };
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, value(&request.accept, "Accept")?);
    if request.body.is_some() {
        headers.insert(CONTENT_TYPE, value(&request.content_type, "Content-Type")?);
    }
    for (name, v) in &request.headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| HttpError::BadHeader(name.clone()))?;
        headers.insert(header, value(v, name)?);
    }
    Ok(headers)
}

/// The body: a string as it is; an object as form fields when the content type is
/// `application/x-www-form-urlencoded`; any other value as JSON.
fn with_body(builder: RequestBuilder, request: &HttpRequest) -> RequestBuilder {
    let form = request
        .content_type
        .to_ascii_lowercase()
        .starts_with("application/x-www-form-urlencoded");
    match &request.body {
        None => builder,
        Some(Value::String(text)) => builder.body(text.clone()),
        Some(Value::Object(fields)) if form => {
            let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            let pairs: Vec<(&str, String)> =
                fields.iter().map(|(k, v)| (k.as_str(), text(v))).collect();
            builder.form(&pairs)
        }
        Some(json) => builder.body(json.to_string()),
    }
}

/// What a failed exchange says: a refusal of the allow rule (from the resolver or a
/// redirect), a timeout, or the transport's own error with its causes.
fn transport_error(e: reqwest::Error, target: &str, request: &HttpRequest) -> HttpError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(s) = source {
        if let Some(refusal) = s.downcast_ref::<HttpError>() {
            return refusal.clone();
        }
        source = s.source();
    }
    let target = target.to_owned();
    match (e.is_timeout(), e.is_connect()) {
        (true, true) => HttpError::ConnectTimedOut {
            target,
            ms: request.connect_timeout_ms,
        },
        (true, false) => HttpError::TimedOut {
            target,
            ms: request.read_timeout_ms,
        },
        _ => HttpError::Transport {
            target,
            why: causes(&e.without_url()),
        },
    }
}

/// An error and its causes, `: `-separated.
fn causes(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// TLS with ring and the system's root certificates (an unreadable one is skipped and logged;
/// without any, https calls fail to verify their servers and http calls still work).
pub(crate) fn tls_config() -> Result<rustls::ClientConfig, String> {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::warn!(error = %e, "HTTP tasks: system root certificates not read");
    }
    let mut roots = rustls::RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    tracing::debug!(added, ignored, "HTTP tasks: system root certificates");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    Ok(config.with_root_certificates(roots).with_no_client_auth())
}

/// A client that connects within `connect_ms`, resolves names through the allow rule, checks
/// every redirect against it, and uses no proxy (the rule is about where calls go).
fn build_client(
    resolver: Resolver,
    tls: rustls::ClientConfig,
    connect_ms: u64,
) -> Result<Client, HttpError> {
    let allow = resolver.allow.clone();
    Client::builder()
        .use_preconfigured_tls(tls)
        .connect_timeout(Duration::from_millis(connect_ms))
        .dns_resolver(Arc::new(resolver))
        .redirect(redirects(allow))
        .no_proxy()
        .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| HttpError::Setup(causes(&e)))
}

/// Follows at most [`REDIRECTS_MAX`] redirects, each to a URL the allow rule lets through.
fn redirects(allow: Arc<Option<AllowList>>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > REDIRECTS_MAX {
            return attempt.error(format!("more than {REDIRECTS_MAX} redirects"));
        }
        match check_url(allow.as_ref().as_ref(), attempt.url()) {
            Ok(()) => attempt.follow(),
            Err(refusal) => attempt.error(refusal),
        }
    })
}

/// Resolves names and refuses a name with an address the allow rule refuses; the connection
/// uses exactly the addresses checked.
struct Resolver {
    allow: Arc<Option<AllowList>>,
    lookup: Lookup,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow = self.allow.clone();
        let host = name.as_str().to_owned();
        let lookup = (self.lookup)(host.clone());
        Box::pin(async move {
            let addrs = lookup.await?;
            if let Some(a) = addrs
                .iter()
                .find(|a| !allow::address_allowed(allow.as_ref().as_ref(), a.ip()))
            {
                return Err(Box::new(HttpError::Guarded { host, ip: a.ip() }) as _);
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests;
