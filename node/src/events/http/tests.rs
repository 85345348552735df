//! The caller against servers on loopback: refusals before any connection, redirects checked,
//! bodies bounded, the concurrency bound held.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn request(uri: &str) -> HttpRequest {
    HttpRequest {
        uri: uri.to_owned(),
        method: "GET".into(),
        headers: Default::default(),
        body: None,
        accept: "application/json".into(),
        content_type: "application/json".into(),
        connect_timeout_ms: 2_000,
        read_timeout_ms: 5_000,
        at_most_once: false,
        oauth2: None,
        show_token: false,
    }
}

fn caller(allow: Option<&str>, concurrency: usize) -> HttpCaller {
    HttpCaller::new(&HttpOptions {
        concurrency,
        allow: allow.map(|a| a.parse().expect("a valid list")),
    })
}

/// A server on 127.0.0.1 answering every request with `answer(port)` after reading its head.
async fn serve(answer: impl Fn(u16) -> Vec<u8> + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                read_head(&mut conn).await;
                let _ = conn.write_all(&answer(port)).await;
            });
        }
    });
    port
}

async fn read_head(conn: &mut tokio::net::TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

fn response(head: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

#[tokio::test]
async fn an_answer_becomes_conductors_response_output() {
    let port = serve(|_| response("201 Created\r\nx-id: 7", br#"{"ok": true}"#)).await;
    let out = caller(None, 4)
        .call(&request(&format!("http://127.0.0.1:{port}/x")))
        .await
        .expect("an answer");
    let r = &out["response"];
    assert_eq!(r["statusCode"], 201);
    assert_eq!(r["reasonPhrase"], "Created");
    assert_eq!(r["body"], serde_json::json!({"ok": true}));
    assert_eq!(r["headers"]["X-Id"], serde_json::json!(["7"]));
}

#[tokio::test]
async fn bad_requests_and_refused_hosts_fail_before_any_connection() {
    let c = caller(Some("example.com"), 4);
    let fails = |r: Result<Value, HttpError>| r.expect_err("refused").to_string();
    assert!(fails(c.call(&request("")).await).contains("no uri"));
    assert!(fails(c.call(&request("ftp://example.com/")).await).contains("http or https"));
    let mut bad_method = request("http://example.com/");
    bad_method.method = "GE T".into();
    assert!(fails(c.call(&bad_method).await).contains("invalid method"));
    let refused = fails(c.call(&request("http://127.0.0.1:9/")).await);
    assert!(
        refused.contains("'127.0.0.1'") && refused.contains("--http-allow"),
        "{refused}"
    );
    let open = caller(None, 4);
    let metadata = fails(open.call(&request("http://169.254.169.254/latest")).await);
    assert!(metadata.contains("cloud metadata"), "{metadata}");
    let mapped = fails(
        open.call(&request("http://[::ffff:169.254.169.254]/"))
            .await,
    );
    assert!(mapped.contains("cloud metadata"), "{mapped}");
}

#[tokio::test]
async fn a_redirect_to_a_host_outside_the_list_is_refused() {
    let port = serve(|port| {
        let to = format!("302 Found\r\nlocation: http://localhost:{port}/next");
        response(&to, b"")
    })
    .await;
    let err = caller(Some("127.0.0.1"), 4)
        .call(&request(&format!("http://127.0.0.1:{port}/")))
        .await
        .expect_err("refused");
    assert_eq!(
        err,
        HttpError::NotAllowed {
            host: "localhost".into(),
            port
        }
    );
}

#[tokio::test]
async fn a_body_past_the_limit_fails_the_call() {
    let big = vec![b'x'; RESPONSE_BYTES_MAX + 1];
    let declared = serve(move |_| response("200 OK", &big)).await;
    let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, "y".repeat(64 * 1024));
    let chunked = serve(move |_| {
        let mut out = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..(RESPONSE_BYTES_MAX / (64 * 1024) + 1) {
            out.extend_from_slice(chunk.as_bytes());
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    })
    .await;
    let c = caller(None, 4);
    for port in [declared, chunked] {
        let err = c
            .call(&request(&format!("http://127.0.0.1:{port}/")))
            .await
            .expect_err("too large");
        assert!(matches!(err, HttpError::TooLarge { .. }), "{err}");
    }
}

#[tokio::test]
async fn a_refused_connection_is_a_transport_failure() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let err = caller(None, 4)
        .call(&request(&format!("http://127.0.0.1:{port}/")))
        .await
        .expect_err("refused");
    assert!(matches!(err, HttpError::Transport { .. }), "{err}");
    assert!(err.to_string().to_lowercase().contains("refused"), "{err}");
}

#[tokio::test]
async fn no_more_calls_than_the_bound_are_in_flight() {
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (n, m) = (now.clone(), most.clone());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let (n, m) = (n.clone(), m.clone());
            tokio::spawn(async move {
                read_head(&mut conn).await;
                m.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                n.fetch_sub(1, Ordering::SeqCst);
                let _ = conn.write_all(&response("200 OK", b"{}")).await;
            });
        }
    });
    let c = Arc::new(caller(None, 2));
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(
                async move { c.call(&request(&format!("http://127.0.0.1:{port}/"))).await },
            )
        })
        .collect();
    for call in calls {
        call.await.expect("joined").expect("an answer");
    }
    assert_eq!(most.load(Ordering::SeqCst), 2);
}

/// A resolver that puts `metadata.test` at the cloud metadata address.
fn test_lookup(host: String) -> BoxFuture<'static, std::io::Result<Vec<SocketAddr>>> {
    let ip: IpAddr = match host.as_str() {
        "metadata.test" => [169, 254, 169, 254].into(),
        _ => [127, 0, 0, 1].into(),
    };
    Box::pin(async move { Ok(vec![SocketAddr::new(ip, 0)]) })
}

#[tokio::test]
async fn a_name_at_a_guarded_address_is_refused_when_it_resolves() {
    let port = serve(|_| response("200 OK", b"{}")).await;
    let c = HttpCaller::with_lookup(&HttpOptions::default(), test_lookup);
    let err = c
        .call(&request("http://metadata.test/computeMetadata/v1/"))
        .await
        .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "HTTP task: host 'metadata.test' at 169.254.169.254, a link-local or cloud metadata \
         address, is refused unless --http-allow names it"
    );
    let named = c
        .call(&request(&format!("http://upstream.test:{port}/")))
        .await;
    assert_eq!(named.expect("an answer")["response"]["statusCode"], 200);
}

#[tokio::test]
async fn a_stream_is_read_to_its_end_or_until_the_read_timeout() {
    const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
    let ended = serve(|_| [HEAD, b"data: {\"n\": 1}\n\ndata: {\"n\": 2}\n\n"].concat()).await;
    let out = caller(None, 4)
        .call(&request(&format!("http://127.0.0.1:{ended}/s")))
        .await
        .expect("an answer");
    let events = serde_json::json!([{"n": 1}, {"n": 2}]);
    assert_eq!(out["response"]["body"], events);

    // A stream that stays open is read until the read timeout; its last event was cut off.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let open = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.expect("a connection");
        read_head(&mut conn).await;
        let sent = [
            HEAD,
            b"data: {\"n\": 1}\n\ndata: {\"n\": 2}\n\ndata: {\"n\"",
        ]
        .concat();
        conn.write_all(&sent).await.expect("written");
        std::future::pending::<()>().await;
    });
    let mut held = request(&format!("http://127.0.0.1:{open}/s"));
    held.read_timeout_ms = 300;
    let out = caller(None, 4).call(&held).await.expect("the events read");
    assert_eq!(out["response"]["body"], events);
}
