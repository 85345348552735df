//! A node served in process over real HTTP (one embedded node, data in a temporary directory),
//! stopped by its shutdown signal while it holds requests. What it promises: from the signal on,
//! a new request is answered at once with 503, `Retry-After` and the API's JSON error, health
//! says the node is not ready, a parked poll ends the same way, and a request held until then
//! still gets its answer before the node stops.

use super::serve;
use crate::options::Options;
use crate::testing::until;
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long the held request waits for its workflow: far longer than the checks take, and
/// shorter than the server's shutdown grace, so it ends by itself while the node drains.
const HELD_WAIT_S: u64 = 8;

/// An answer: its status, its headers (names in lower case) and its body as JSON.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        let found = self.headers.iter().find(|(n, _)| n == name);
        found.map(|(_, v)| v.as_str())
    }
}

/// Sends one HTTP/1.0 request (so the answer is close-delimited) on a new connection; an error
/// when the connection is refused or cut.
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<Answer> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let length = body.len();
    let head = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n\
         Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    );
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    parse(&raw).ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {raw:?}")))
}

/// An HTTP answer's status line, headers and body (as JSON, or a JSON string when it is not).
fn parse(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let body = &raw[split + 4..];
    let body = match body.is_empty() {
        true => Value::Null,
        false => {
            serde_json::from_slice(body).unwrap_or_else(|_| json!(String::from_utf8_lossy(body)))
        }
    };
    Some(Answer {
        status,
        headers,
        body,
    })
}

/// A loopback address no one listens on now.
fn free_addr() -> SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    probe.local_addr().expect("addr")
}

/// Sends a request and waits for it to succeed.
async fn ok(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Value {
    let answer = send(addr, method, path, body).await.expect("answered");
    assert!(
        (200..300).contains(&answer.status),
        "{method} {path}: {answer:?}"
    );
    answer.body
}

/// Registers `held`: one SIMPLE task of type `held_task`, which nothing here polls.
async fn define(addr: SocketAddr) {
    let task = json!([{ "name": "held_task", "retryCount": 0, "ownerEmail": "t@t.io" }]);
    ok(addr, "POST", "/api/metadata/taskdefs", Some(&task)).await;
    let workflow = json!({
        "name": "held", "version": 1, "schemaVersion": 2, "ownerEmail": "t@t.io",
        "tasks": [{ "name": "held_task", "taskReferenceName": "only", "type": "SIMPLE" }],
    });
    ok(addr, "POST", "/api/metadata/workflow", Some(&workflow)).await;
}

/// What waits on the node now: (workflows watched by executes, parked polls).
async fn waits(addr: SocketAddr) -> Option<(u64, u64)> {
    let answer = send(addr, "GET", "/api/admin/waits", None).await.ok()?;
    let w = answer.body;
    Some((w["watchedWorkflows"].as_u64()?, w["parkedPolls"].as_u64()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_shutdown_begins_new_requests_are_refused_at_once_and_held_ones_finish() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let addr = free_addr();
    let options = Options {
        data_dir: dir.path().to_owned(),
        http: addr,
        partitions: 2,
        ..Default::default()
    };
    let (signal, signalled) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(options, async {
        let _ = signalled.await;
    }));
    until("the API to answer", async || {
        let health = send(addr, "GET", "/health", None).await.ok()?;
        (health.status == 200).then_some(())
    })
    .await;
    define(addr).await;
    // Held: an execute that waits for a task no one polls, and a poll parked for a task no one
    // starts.
    let execute = format!("/api/workflow/execute/held/1?waitForSeconds={HELD_WAIT_S}");
    let held = tokio::spawn(async move { send(addr, "POST", &execute, Some(&json!({}))).await });
    let poll = "/api/tasks/poll/batch/other_task?count=1&timeout=60000";
    let parked = tokio::spawn(async move { send(addr, "GET", poll, None).await });
    until("the execute and the poll to wait", async || {
        (waits(addr).await? == (1, 1)).then_some(())
    })
    .await;
    signal.send(()).expect("the server listens for its signal");

    let refused = until("a new request refused", async || {
        let answer = send(addr, "GET", "/api/metadata/taskdefs", None)
            .await
            .ok()?;
        (answer.status != 200).then_some(answer)
    })
    .await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"), "{refused:?}");
    assert_eq!(refused.body["code"], "SERVICE_UNAVAILABLE", "{refused:?}");
    assert_eq!(refused.body["retryable"], true, "{refused:?}");
    let health = send(addr, "GET", "/health", None).await.expect("answered");
    assert_eq!(health.status, 503, "{health:?}");
    assert_eq!(
        (&health.body["healthy"], &health.body["stopping"]),
        (&json!(false), &json!(true)),
        "{health:?}"
    );
    let parked = parked.await.expect("joins").expect("answered");
    assert_eq!(parked.status, 503, "the parked poll ends: {parked:?}");

    let held = held.await.expect("joins").expect("answered");
    assert_eq!(held.status, 200, "{held:?}");
    assert_eq!(held.body["status"], "RUNNING", "{held:?}");
    server.await.expect("joins").expect("stops cleanly");
}
