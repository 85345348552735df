//! Serverless Workflow secrets from the operator's store (`baton server --secrets-dir`): a
//! document reads the secrets it declares as `$secrets`, a call authenticates with a secret
//! named by its policy's `use` or with `$secrets` in a declared policy, or with an OAuth2
//! access token obtained with client credentials (one per grant), and a document that
//! declares a secret the store lacks is refused at registration with its pointer.

use std::time::Duration;

use harness::upstream::{Answer, Upstream};
use harness::{Api, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

/// A node whose secrets directory holds `greeting` (text), `upstream.json` (basic credentials)
/// and `token` (text).
fn server_with_secrets() -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a directory");
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text);
    write("greeting", "hello\n").expect("greeting");
    write("upstream.json", r#"{"username": "app", "password": "pw"}"#).expect("upstream");
    write("token", "t0k").expect("token");
    let args = vec!["--secrets-dir".to_owned(), dir.path().display().to_string()];
    (Server::start_with_args(&args), dir)
}

fn document(name: &str, body: &str) -> String {
    format!(
        "document:\n  dsl: '1.0.3'\n  namespace: test\n  name: {name}\n  version: '1.0.0'\n{body}"
    )
}

/// Registers and starts `text` (named `name`); answers the instance once it ended.
fn run(api: &Api, name: &str, text: &str) -> Value {
    let (status, body) = api.register_dsl(text);
    assert_eq!(status, 200, "{body}");
    let id = api.start_dsl(&format!("test/{name}/1.0.0"), &json!({}));
    api.wait_dsl_ended(&id, WAIT)
}

#[test]
fn a_document_reads_the_secrets_it_declares() {
    let (server, _dir) = server_with_secrets();
    let api = server.api();
    let text = document(
        "greeter",
        "use:\n  secrets:\n    - greeting\ndo:\n  - say:\n      set:\n        said: ${ $secrets.greeting }\n        undeclared: ${ $secrets.token }\n",
    );
    let done = run(api, "greeter", &text);
    assert_eq!(
        done["output"],
        json!({"said": "hello", "undeclared": null}),
        "{done:#}"
    );
}

#[test]
fn calls_authenticate_with_secrets() {
    let (server, _dir) = server_with_secrets();
    let api = server.api();
    let upstream = Upstream::start(|_| Answer::new("200 OK", r#"{"ok": true}"#));
    let basic = document(
        "basic",
        &format!("do:\n  - call:\n      call: http\n      with:\n        method: get\n        endpoint:\n          uri: {}\n          authentication:\n            basic:\n              use: upstream\n", upstream.url("/basic")),
    );
    let bearer = document(
        "bearer",
        &format!("use:\n  secrets:\n    - token\n  authentications:\n    api:\n      bearer:\n        token: ${{ $secrets.token }}\ndo:\n  - call:\n      call: http\n      with:\n        method: get\n        endpoint:\n          uri: {}\n          authentication:\n            use: api\n", upstream.url("/bearer")),
    );
    for (name, text) in [("basic", &basic), ("bearer", &bearer)] {
        let done = run(api, name, text);
        assert_eq!(done["phase"], "completed", "{done:#}");
    }
    let authorization = |path: &str| {
        let seen = upstream.seen();
        let request = seen.iter().find(|s| s.path == path).expect("the call");
        request.headers.get("authorization").cloned()
    };
    // base64("app:pw")
    assert_eq!(authorization("/basic").as_deref(), Some("Basic YXBwOnB3"));
    assert_eq!(authorization("/bearer").as_deref(), Some("Bearer t0k"));
}

/// `GET /api/{n}` of the upstream, authenticated by the declared policy `idp`.
fn api_call(name: &str, path: &str) -> String {
    format!("  - {name}:\n      call: http\n      with:\n        method: get\n        endpoint:\n          uri: {path}\n          authentication:\n            use: idp\n")
}

#[test]
fn oauth2_client_credentials_get_one_token_for_the_calls_that_share_the_grant() {
    let (server, _dir) = server_with_secrets();
    let api = server.api();
    let upstream = Upstream::start(|seen| match seen.path.as_str() {
        "/oauth2/token" => Answer::new(
            "200 OK",
            r#"{"access_token": "tk-1", "token_type": "Bearer", "expires_in": 3600}"#,
        ),
        _ => Answer::new("200 OK", r#"{"ok": true}"#),
    });
    let policy = format!("use:\n  secrets:\n    - token\n  authentications:\n    idp:\n      oauth2:\n        authority: {}\n        grant: client_credentials\n        client:\n          id: app\n          secret: ${{ $secrets.token }}\n        scopes:\n          - read\n", upstream.url(""));
    let text = document(
        "oauth",
        &format!(
            "{policy}do:\n{}{}",
            api_call("first", &upstream.url("/api/1")),
            api_call("second", &upstream.url("/api/2"))
                + "      output:\n        as: ${ $authorization }\n"
        ),
    );
    let done = run(api, "oauth", &text);
    assert_eq!(done["phase"], "completed", "{done:#}");
    assert_eq!(
        done["output"],
        json!({"scheme": "Bearer", "parameter": "tk-1"}),
        "$authorization shows the token the call sent"
    );
    let seen = upstream.seen();
    let tokens: Vec<_> = seen.iter().filter(|s| s.path == "/oauth2/token").collect();
    assert_eq!(tokens.len(), 1, "one token for both calls: {seen:#?}");
    assert_eq!(tokens[0].method, "POST");
    assert_eq!(
        tokens[0].body,
        "grant_type=client_credentials&client_id=app&client_secret=t0k&scope=read"
    );
    for path in ["/api/1", "/api/2"] {
        let call = seen.iter().find(|s| s.path == path).expect("the call");
        assert_eq!(
            call.headers.get("authorization").map(String::as_str),
            Some("Bearer tk-1")
        );
    }
}

#[test]
fn a_token_endpoint_that_refuses_faults_the_call() {
    let (server, _dir) = server_with_secrets();
    let api = server.api();
    let upstream =
        Upstream::start(|_| Answer::new("401 Unauthorized", r#"{"error": "invalid_client"}"#));
    let policy = format!("use:\n  authentications:\n    idp:\n      oauth2:\n        authority: {}\n        grant: client_credentials\n        client:\n          id: app\n          secret: wrong\n", upstream.url(""));
    let text = document(
        "refused",
        &format!("{policy}do:\n{}", api_call("only", &upstream.url("/api/1"))),
    );
    let done = run(api, "refused", &text);
    assert_eq!(done["phase"], "faulted", "{done:#}");
    assert!(done.to_string().contains("invalid_client"), "{done:#}");
    assert!(
        upstream.seen().iter().all(|s| s.path == "/oauth2/token"),
        "no call without a token"
    );
}

#[test]
fn a_secret_the_store_lacks_is_refused_where_it_is_declared() {
    let (server, _dir) = server_with_secrets();
    let api = server.api();
    let text = document(
        "lacking",
        "use:\n  secrets:\n    - greeting\n    - nowhere\ndo:\n  - say:\n      set:\n        x: 1\n",
    );
    let (status, body) = api.register_dsl(&text);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["instance"], "/use/secrets/1", "{body}");
    let nothing = api.get("/api/dsl/workflows").expect_ok("list").json();
    assert_eq!(nothing, json!([]), "nothing is stored");
}
