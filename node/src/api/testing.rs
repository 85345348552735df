//! Test helpers for the API modules: serve a router on a loopback port and send it one raw
//! HTTP/1.0 request, so extractor and fallback behaviour is checked through real HTTP without a
//! client library. Test-only; not part of the API.

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves `app` on an ephemeral port, sends `request`, and parses the answer.
pub(crate) async fn call(app: axum::Router, request: Request) -> Response {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("request body");
    let target = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    // HTTP/1.0 so the answer is close-delimited, never chunked.
    let mut raw = format!(
        "{} {} HTTP/1.0\r\nHost: test\r\nContent-Length: {}\r\n",
        parts.method,
        target,
        body.len()
    );
    for (name, value) in parts.headers.iter() {
        raw.push_str(&format!(
            "{}: {}\r\n",
            name,
            value.to_str().expect("ascii header")
        ));
    }
    raw.push_str("\r\n");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(raw.as_bytes()).await.expect("write head");
    stream.write_all(&body).await.expect("write body");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    server.abort();

    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of head");
    let head = String::from_utf8(answer[..split].to_vec()).expect("utf-8 head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let code: u16 = status_line
        .split(' ')
        .nth(1)
        .expect("status code")
        .parse()
        .expect("numeric status");
    let mut builder = Response::builder().status(StatusCode::from_u16(code).expect("status"));
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            builder = builder.header(name.trim(), value.trim());
        }
    }
    builder
        .body(Body::from(answer[split + 4..].to_vec()))
        .expect("response")
}

/// Reads a response body as JSON.
pub(crate) async fn body_json(response: Response) -> serde_json::Value {
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    serde_json::from_slice(&bytes).expect("JSON body")
}
