//! Serving the API's connections over HTTP/1.1 with keep-alive (hyper): each connection from the
//! bounded listener gets the router, with whether it came past the bound as its connect info;
//! a connection that waits longer than its idle limit for the next request's head is closed
//! (hyper's header read timeout, which runs only while no request is being read or answered); at
//! shutdown the listener stops and the connections finish the requests they hold, for at most
//! [`SHUTDOWN_GRACE`]. With TLS (`super::tls`) each connection first completes its handshake,
//! within the idle limit, on its own task.

use super::listener::{Bounded, Overflow};
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tower::ServiceExt;

/// Longest the connections may take to finish their requests once shutdown began.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `stop` resolves, over TLS when `tls` is given; closes
/// connections idle for `idle`.
pub async fn serve(
    mut listener: Bounded,
    app: axum::Router,
    idle: Duration,
    stop: impl Future<Output = ()>,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let graceful = GracefulShutdown::new();
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    tokio::pin!(stop);
    loop {
        let io = tokio::select! {
            (io, _) = axum::serve::Listener::accept(&mut listener) => io,
            () = &mut stop => break,
        };
        let (overflow, app, watcher) = (io.overflow(), app.clone(), graceful.watcher());
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let ended = match acceptor {
                None => watcher.watch(connection(io, overflow, app, idle)).await,
                Some(acceptor) => match tokio::time::timeout(idle, acceptor.accept(io)).await {
                    Ok(Ok(tls)) => watcher.watch(connection(tls, overflow, app, idle)).await,
                    Ok(Err(e)) => return tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => return tracing::debug!("TLS handshake timed out"),
                },
            };
            if let Err(e) = ended {
                tracing::trace!(error = %e, "HTTP connection ended");
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::warn!("HTTP connections still open after the shutdown grace; closing them");
        }
    }
}

/// One connection's HTTP/1.1 server.
fn connection<I>(
    io: I,
    overflow: Overflow,
    app: axum::Router,
    idle: Duration,
) -> impl hyper_util::server::graceful::GracefulConnection<Error = hyper::Error>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let app = app.map_request(move |mut request: hyper::Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(ConnectInfo(overflow));
        request.map(axum::body::Body::new)
    });
    hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(idle)
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(app))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    const IDLE: Duration = Duration::from_millis(300);
    /// Longer than [`IDLE`]: an answer that takes this long is not idleness.
    const SLOW: Duration = Duration::from_millis(900);

    async fn server() -> std::net::SocketAddr {
        let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = tcp.local_addr().expect("addr");
        let app = axum::Router::new()
            .route("/", get(|| async { "ok" }))
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(SLOW).await;
                    "slow ok"
                }),
            );
        tokio::spawn(serve(
            Bounded::new(tcp),
            app,
            IDLE,
            std::future::pending(),
            None,
        ));
        addr
    }

    /// Sends a GET on `stream` and reads until the answer's body `body` arrived.
    async fn get_on(stream: &mut TcpStream, path: &str, body: &str) {
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&seen).ends_with(body) {
            let n = stream.read(&mut buf).await.expect("read");
            assert!(
                n > 0,
                "closed before the answer: {}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
        }
    }

    #[tokio::test]
    async fn an_idle_keep_alive_connection_is_closed_but_a_slow_answer_is_not_cut() {
        let addr = server().await;
        let mut idle = TcpStream::connect(addr).await.expect("connect");
        get_on(&mut idle, "/", "ok").await;
        let mut slow = TcpStream::connect(addr).await.expect("connect");
        get_on(&mut slow, "/slow", "slow ok").await;
        // Kept alive: a second request on the same connection is answered.
        get_on(&mut slow, "/", "ok").await;
        // Closed by the server (after a 408 answer, if hyper sends one).
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(10), idle.read_to_end(&mut rest));
        assert!(
            closed.await.is_ok(),
            "an idle connection is closed by the server"
        );
    }
}
