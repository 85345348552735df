//! Serving the API's connections over HTTP/1.1 with keep-alive (hyper): each connection from the
//! bounded listener gets the router, with whether it came past the bound as its connect info;
//! a connection that waits longer than its idle limit for the next request's head is closed
//! (hyper's header read timeout, which runs only while no request is being read or answered). At
//! shutdown the connections finish the requests they hold, for at most [`SHUTDOWN_GRACE`], while
//! the listener still takes new ones, one request each, for the app to answer: the node's app
//! refuses them at once with 503 (`super::admission`), so a client learns to go elsewhere instead
//! of waiting, and no request is cut; the listener closes when the held requests are done. With
//! TLS (`super::tls`) each connection first completes its handshake, within the idle limit, on
//! its own task.

use super::listener::{Bounded, Counted, Overflow};
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tower::ServiceExt;

/// Longest the connections may take to finish their requests once shutdown began.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `stop` resolves, over TLS when `tls` is given; closes
/// connections idle for `idle`. Then drains (see the module's documentation).
pub async fn serve(
    mut listener: Bounded,
    app: axum::Router,
    idle: Duration,
    stop: impl Future<Output = ()>,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let connections = Connections {
        app,
        idle,
        acceptor: tls.map(tokio_rustls::TlsAcceptor::from),
    };
    let serving = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            (io, _) = axum::serve::Listener::accept(&mut listener) => {
                connections.spawn(io, serving.watcher(), KeepAlive(true));
            }
            () = &mut stop => break,
        }
    }
    drain(listener, &connections, serving).await;
}

/// The shutdown of [`serve`]: the connections of `serving` finish the requests they hold (idle
/// ones close at once), meanwhile each new connection serves one request; then the listener
/// closes and the last of those finish. At most [`SHUTDOWN_GRACE`] in all.
async fn drain(mut listener: Bounded, connections: &Connections, serving: GracefulShutdown) {
    let grace = tokio::time::sleep(SHUTDOWN_GRACE);
    let held = serving.shutdown();
    let late = GracefulShutdown::new();
    tokio::pin!(grace, held);
    let finished = loop {
        tokio::select! {
            () = &mut held => break true,
            () = &mut grace => break false,
            (io, _) = axum::serve::Listener::accept(&mut listener) => {
                connections.spawn(io, late.watcher(), KeepAlive(false));
            }
        }
    };
    drop(listener);
    let finished = finished
        && tokio::select! {
            () = late.shutdown() => true,
            () = &mut grace => false,
        };
    if !finished {
        tracing::warn!("HTTP connections still open after the shutdown grace; closing them");
    }
}

/// Whether a connection may carry more than one request.
#[derive(Debug, Clone, Copy)]
struct KeepAlive(bool);

/// What each accepted connection is served with.
struct Connections {
    app: axum::Router,
    idle: Duration,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
}

impl Connections {
    /// Serves `io` on its own task (after its TLS handshake, if any), watched by `watcher`.
    fn spawn(&self, io: Counted, watcher: Watcher, keep_alive: KeepAlive) {
        let (overflow, app, idle) = (io.overflow(), self.app.clone(), self.idle);
        let acceptor = self.acceptor.clone();
        tokio::spawn(async move {
            let ended = match acceptor {
                None => {
                    let served = connection(io, overflow, app, idle, keep_alive);
                    watcher.watch(served).await
                }
                Some(acceptor) => match tokio::time::timeout(idle, acceptor.accept(io)).await {
                    Ok(Ok(tls)) => {
                        let served = connection(tls, overflow, app, idle, keep_alive);
                        watcher.watch(served).await
                    }
                    Ok(Err(e)) => return tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => return tracing::debug!("TLS handshake timed out"),
                },
            };
            if let Err(e) = ended {
                tracing::trace!(error = %e, "HTTP connection ended");
            }
        });
    }
}

/// One connection's HTTP/1.1 server.
fn connection<I>(
    io: I,
    overflow: Overflow,
    app: axum::Router,
    idle: Duration,
    keep_alive: KeepAlive,
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
        .keep_alive(keep_alive.0)
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

    #[tokio::test]
    async fn while_held_requests_finish_a_new_connection_is_answered_then_the_listener_closes() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = tcp.local_addr().expect("addr");
        let (entered, mut inside) = tokio::sync::watch::channel(false);
        let (release, released) = tokio::sync::watch::channel(false);
        let entered = Arc::new(entered);
        let app = axum::Router::new()
            .route("/", get(|| async { "ok" }))
            .route(
                "/held",
                get(|| async move {
                    entered.send_replace(true);
                    let _ = released.clone().wait_for(|r| *r).await;
                    "held ok"
                }),
            );
        let (signal, signalled) = tokio::sync::oneshot::channel::<()>();
        let stop = async {
            let _ = signalled.await;
        };
        let server = tokio::spawn(serve(Bounded::new(tcp), app, IDLE, stop, None));
        let mut held = TcpStream::connect(addr).await.expect("connect");
        held.write_all(b"GET /held HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .expect("send");
        inside.wait_for(|e| *e).await.expect("the handler runs");
        signal.send(()).expect("the server listens");
        // The drain takes new connections and answers them (the node's app refuses them).
        let mut late = TcpStream::connect(addr)
            .await
            .expect("connect while draining");
        get_on(&mut late, "/", "ok").await;
        let mut rest = Vec::new();
        late.read_to_end(&mut rest).await.expect("read");
        assert!(
            rest.is_empty(),
            "one request per late connection, then closed"
        );
        release.send_replace(true);
        let mut answer = String::new();
        held.read_to_string(&mut answer).await.expect("read");
        assert!(answer.ends_with("held ok"), "{answer}");
        server
            .await
            .expect("the drain ends once the held request is answered");
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "the listener closed"
        );
    }
}
