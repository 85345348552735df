//! The server side of the peer transport: accepts QUIC connections (at most `connections_max`
//! at once; handshakes beyond it are refused), authenticates each one (the TLS layer checked the
//! client certificate against the cluster CA; the hello's node id is checked against that
//! certificate here, and the peer's binary against the active version: `hello.rs`), then serves every bidirectional stream of the connection as one request:
//! read a frame, run the service's handler, write the answer.
//!
//! Per-connection concurrency is bounded by QUIC's stream limit (`streams_per_connection_max`):
//! a peer cannot open more streams than that, so it cannot make this node run more handlers than
//! that per connection. Not here: calling peers (see [`super::QuicTransport`]).

use super::frame::{self, CODE_HELLO, STATUS_ERROR, STATUS_OK};
use super::hello::{encode_answer, Dialect, Hello, HELLO_BYTES_MAX};
use super::service::Service;
use super::shared::{Shared, CLOSE_REFUSED};
use crate::tls;
use proto::NodeId;
use rustls::pki_types::CertificateDer;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Accepts connections until the endpoint closes.
pub(crate) async fn run(shared: Arc<Shared>) {
    let permits = Arc::new(Semaphore::new(shared.connections_max));
    while let Some(incoming) = shared.endpoint.accept().await {
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(node = %shared.node, remote = %incoming.remote_address(), "too many peer connections; refusing one");
            incoming.refuse();
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            serve_connection(shared, incoming).await;
            drop(permit);
        });
    }
}

/// Authenticates one connection and serves its streams until it closes.
async fn serve_connection(shared: Arc<Shared>, incoming: quinn::Incoming) {
    let remote = incoming.remote_address();
    let conn = match tokio::time::timeout(shared.connect_timeout, incoming).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            // A certificate from another CA ends here: the TLS layer refused it.
            tracing::warn!(node = %shared.node, %remote, error = %e, "peer handshake failed");
            return;
        }
        Err(_) => {
            tracing::warn!(node = %shared.node, %remote, "peer handshake timed out");
            return;
        }
    };
    let peer = match tokio::time::timeout(shared.connect_timeout, hello(&shared, &conn)).await {
        Ok(Ok(peer)) => peer,
        Ok(Err(reason)) => {
            tracing::warn!(node = %shared.node, %remote, %reason, "peer refused");
            conn.close(CLOSE_REFUSED.into(), reason.as_bytes());
            return;
        }
        Err(_) => {
            conn.close(CLOSE_REFUSED.into(), b"no hello in time");
            return;
        }
    };
    tracing::debug!(node = %shared.node, %peer, %remote, "peer connected");
    *lock_inbound(&shared).entry(peer).or_default() += 1;
    while let Ok((send, recv)) = conn.accept_bi().await {
        tokio::spawn(serve_stream(shared.clone(), peer, send, recv));
    }
    let mut inbound = lock_inbound(&shared);
    if let Some(n) = inbound.get_mut(&peer) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            inbound.remove(&peer);
        }
    }
}

fn lock_inbound(
    shared: &Shared,
) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<NodeId, usize>> {
    shared.inbound.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads the hello on the connection's first stream, checks the claimed node id against the
/// client certificate (a node holding node 2's certificate cannot claim to be node 3) and the
/// peer's binary against the active version, and answers with this node's id (and range).
async fn hello(shared: &Shared, conn: &quinn::Connection) -> Result<NodeId, String> {
    let dialect = Dialect::of(conn);
    let (mut send, mut recv) = conn.accept_bi().await.map_err(|e| e.to_string())?;
    let (code, payload) = frame::read(&mut recv, HELLO_BYTES_MAX)
        .await
        .map_err(|e| format!("bad hello: {e}"))?;
    if code != CODE_HELLO {
        return Err(format!("expected a hello, got code {code}"));
    }
    let hello = Hello::decode(dialect, &payload)?;
    let certs = conn
        .peer_identity()
        .and_then(|identity| identity.downcast::<Vec<CertificateDer<'static>>>().ok())
        .ok_or_else(|| "no client certificate".to_string())?;
    let leaf = certs
        .first()
        .ok_or_else(|| "empty client certificate chain".to_string())?;
    tls::verify_node_certificate(hello.node, leaf)
        .map_err(|e| format!("claims node {}: {e}", hello.node))?;
    shared.admit(hello.node, hello.supports)?;
    let answer = encode_answer(dialect, shared.node, shared.versions.supports);
    frame::write(&mut send, STATUS_OK, &answer)
        .await
        .map_err(|e| e.to_string())?;
    shared.peer_booted(hello.node, hello.boot);
    Ok(hello.node)
}

/// Serves one request: one frame in, the handler's answer (or an error message) out.
async fn serve_stream(
    shared: Arc<Shared>,
    peer: NodeId,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) {
    let max = shared.frame_bytes_max;
    let answer = match frame::read(&mut recv, max).await {
        Err(e) => Err(format!("bad request frame: {e}")),
        Ok((code, payload)) => match Service::from_code(code) {
            None => Err(format!("unknown service code {code}")),
            Some(service) => match shared.handler(service) {
                None => Err(format!(
                    "no handler for service {service} on node {}",
                    shared.node
                )),
                Some(handler) => handler.handle(peer, payload).await,
            },
        },
    };
    let (status, body) = match answer {
        Ok(body) if body.len() <= max => (STATUS_OK, body),
        Ok(body) => (
            STATUS_ERROR,
            format!(
                "answer of {} bytes exceeds the maximum of {max} bytes",
                body.len()
            )
            .into_bytes(),
        ),
        Err(message) => (STATUS_ERROR, message.into_bytes()),
    };
    if let Err(e) = frame::write(&mut send, status, &body).await {
        // The caller gave up (timeout) or the connection dropped; nobody is waiting.
        tracing::debug!(node = %shared.node, %peer, error = %e, "could not answer a peer request");
    }
}
