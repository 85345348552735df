//! `QuicTransport`: the QUIC implementation of a node's peer [`Link`](super::Link). [`QuicTransport::start`] binds
//! one QUIC endpoint (server and client at once) and spawns the listener (`listener.rs`); the handle
//! then makes calls ([`QuicTransport::call`]: one request and one response on a fresh bidirectional
//! stream of the one cached connection to that peer) and registers the handlers that serve
//! incoming calls. The transport runs until [`QuicTransport::shutdown`] (or until the last handle is
//! dropped).
//!
//! Connections: at most one outbound connection per peer is cached; callers to the same peer
//! share it (streams multiplex every group's Raft traffic and forwarded requests). A connection
//! that closed (peer restarted, idle timeout) is dropped and redialled by the next call. Each
//! connection opens with a hello naming the dialing node, which the server checks against the
//! client certificate; the client checks the server by dialing `node-<id>.baton`. Inbound
//! connections are served, not reused for outbound calls, so two nodes that call each other hold
//! one connection in each direction. [`QuicTransport::introduce`] is the exception to addressing by
//! id: it dials an address whose node is not known yet on a fresh, uncached connection, learns the
//! member's id from its hello answer (checked against its certificate), records the address, and
//! closes the connection after one request.
//!
//! Not here: what payloads mean (services), retries (callers such as openraft retry by design).

use super::frame::{self, FrameError, CODE_HELLO, STATUS_OK};
use super::handler::Handler;
use super::hello::{decode_answer, Dialect, Hello, HELLO_BYTES_MAX};
use super::listener;
use super::options::TransportOptions;
use super::service::Service;
use super::shared::{lock, read, write, Shared, CLOSE_REFUSED, CLOSE_SHUTDOWN};
use crate::error::Error;
use crate::tls;
use proto::NodeId;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::pki_types::CertificateDer;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::time::Instant;

/// Application close code: the dialer is done with a one-off connection ([`QuicTransport::introduce`]).
const CLOSE_DONE: u32 = 2;
/// The `peer` of errors of [`QuicTransport::introduce`] raised before the member stated its id.
const UNKNOWN_MEMBER: NodeId = NodeId(0);
/// How long shutdown waits for connections to close cleanly.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(1);

/// Owner of the listener task: when the last handle goes, the listener stops and the endpoint
/// closes.
struct Owner {
    shared: Arc<Shared>,
    listener: tokio::task::AbortHandle,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.listener.abort();
        self.shared
            .endpoint
            .close(CLOSE_SHUTDOWN.into(), b"transport dropped");
    }
}

/// What the transport has done so far, for tests and status pages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Outbound connections established per peer since start (1 per peer means every call
    /// shared one connection).
    pub connects: BTreeMap<NodeId, u64>,
    /// The same, per peer and service (each service has its own connection).
    pub connects_by_service: BTreeMap<(NodeId, Service), u64>,
    /// Authenticated inbound connections open per peer right now.
    pub inbound: BTreeMap<NodeId, usize>,
}

/// A node's QUIC peer transport (the production [`Link`](super::Link)).
#[derive(Clone)]
pub struct QuicTransport {
    owner: Arc<Owner>,
}

impl std::fmt::Debug for QuicTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicTransport")
            .field("node", &self.owner.shared.node)
            .finish_non_exhaustive()
    }
}

impl QuicTransport {
    /// Binds the endpoint on `options.listen` and starts serving. Must run inside a tokio
    /// runtime.
    pub fn start(options: TransportOptions) -> Result<QuicTransport, Error> {
        options.validate()?;
        let quic = Arc::new(options.quic_transport()?);
        let server_tls = QuicServerConfig::try_from(options.identity.server_config()?)
            .map_err(|e| Error::Tls(format!("server config for QUIC: {e}")))?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(server_tls));
        server
            .transport_config(quic.clone())
            // Handshakes in progress are bounded too, not only established connections.
            .max_incoming(options.connections_max);
        let client_tls = QuicClientConfig::try_from(options.identity.client_config()?)
            .map_err(|e| Error::Tls(format!("client config for QUIC: {e}")))?;
        let mut client = quinn::ClientConfig::new(Arc::new(client_tls));
        client.transport_config(quic.clone());
        let member_tls = QuicClientConfig::try_from(options.identity.member_client_config()?)
            .map_err(|e| Error::Tls(format!("member client config for QUIC: {e}")))?;
        let mut member_client = quinn::ClientConfig::new(Arc::new(member_tls));
        member_client.transport_config(quic);
        let endpoint =
            super::options::quic_endpoint(options.listen, Some(server)).map_err(|e| {
                Error::Listen {
                    addr: options.listen.to_string(),
                    reason: e.to_string(),
                }
            })?;
        let shared = Arc::new(Shared {
            node: options.node(),
            endpoint,
            client,
            member_client,
            frame_bytes_max: options.frame_bytes_max,
            connect_timeout: Duration::from_millis(options.connect_timeout_ms),
            connections_max: options.connections_max,
            peers: RwLock::new(options.peers.clone()),
            slots: Mutex::new(BTreeMap::new()),
            handlers: RwLock::new(BTreeMap::new()),
            connects: Mutex::new(BTreeMap::new()),
            inbound: Mutex::new(BTreeMap::new()),
            closed: AtomicBool::new(false),
            boot: rand::random::<u64>(),
            peer_boots: Mutex::new(BTreeMap::new()),
            versions: options.versions.clone(),
            refusals: Mutex::new(BTreeMap::new()),
        });
        let listener = tokio::spawn(listener::run(shared.clone())).abort_handle();
        tracing::info!(node = %shared.node, listen = ?shared.endpoint.local_addr().ok(), "peer transport listening");
        let transport = QuicTransport {
            owner: Arc::new(Owner { shared, listener }),
        };
        transport.greet_peers();
        Ok(transport)
    }

    /// Dials every known peer in the background. Each hello carries this process's boot id, so
    /// peers that cached a connection to a previous run of this node drop it at once instead of
    /// waiting for QUIC's idle timeout.
    fn greet_peers(&self) {
        let peers: Vec<NodeId> = read(&self.shared().peers).keys().copied().collect();
        for peer in peers {
            let this = self.clone();
            tokio::spawn(async move {
                if let Err(e) = this.connection(peer, Service::Raft).await {
                    tracing::debug!(node = %this.node(), %peer, error = %e, "peer not reachable yet");
                }
            });
        }
    }

    fn shared(&self) -> &Shared {
        &self.owner.shared
    }

    /// This node.
    pub fn node(&self) -> NodeId {
        self.shared().node
    }

    /// The address the endpoint is bound to (the real port when `listen` used port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.shared()
            .endpoint
            .local_addr()
            .map_err(|e| Error::Listen {
                addr: "endpoint".into(),
                reason: e.to_string(),
            })
    }

    /// Largest payload of a call or an answer.
    pub fn frame_bytes_max(&self) -> usize {
        self.shared().frame_bytes_max
    }

    /// Records (or changes) where `peer` listens. A changed address drops the cached connection
    /// so the next call dials the new one.
    pub fn set_peer(&self, peer: NodeId, addr: SocketAddr) {
        let changed = write(&self.shared().peers).insert(peer, addr) != Some(addr);
        if changed {
            for service in Service::ALL {
                if let Some(slot) = lock(&self.shared().slots).get(&(peer, service)).cloned() {
                    if let Ok(mut cached) = slot.try_lock() {
                        *cached = None;
                    }
                }
            }
        }
    }

    /// Where `peer` listens, if known.
    pub fn peer_addr(&self, peer: NodeId) -> Option<SocketAddr> {
        read(&self.shared().peers).get(&peer).copied()
    }

    /// Registers the handler of `service`, replacing any earlier one.
    pub fn register(&self, service: Service, handler: Arc<dyn Handler>) {
        write(&self.shared().handlers).insert(service, handler);
    }

    /// Removes the handler of `service`; its requests are then answered with an error.
    pub fn unregister(&self, service: Service) {
        write(&self.shared().handlers).remove(&service);
    }

    /// Connection counters.
    pub fn stats(&self) -> TransportStats {
        TransportStats {
            connects: {
                let mut per_peer = BTreeMap::new();
                for ((peer, _), n) in lock(&self.shared().connects).iter() {
                    *per_peer.entry(*peer).or_default() += n;
                }
                per_peer
            },
            connects_by_service: lock(&self.shared().connects).clone(),
            inbound: lock(&self.shared().inbound).clone(),
        }
    }

    /// Sends `payload` to `service` on `peer` and returns its answer, all within `timeout`
    /// (dialing included). On timeout the request may or may not have run on the peer.
    pub async fn call(
        &self,
        peer: NodeId,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, Error> {
        if self.shared().closed.load(Ordering::Acquire) {
            return Err(Error::TransportClosed);
        }
        let max = self.shared().frame_bytes_max;
        if payload.len() > max {
            return Err(Error::FrameTooLarge {
                bytes: payload.len(),
                max,
            });
        }
        match tokio::time::timeout(timeout, self.exchange(peer, service, &payload)).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout {
                peer,
                waited_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    async fn exchange(
        &self,
        peer: NodeId,
        service: Service,
        payload: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let conn = self.connection(peer, service).await?;
        let result = request(&conn, peer, service, payload, self.shared().frame_bytes_max).await;
        if matches!(result, Err(Error::Unreachable { .. })) {
            self.forget(peer, service, &conn).await;
        }
        result
    }

    /// Sends one request to whichever cluster member listens at `addr` (its node id is not known
    /// yet) and returns that member's id and its answer. This is how a node joining a running
    /// cluster reaches its first peer: it knows an address (`--join`), not who listens there.
    ///
    /// The connection is fresh (never cached, closed after the answer). The member's certificate
    /// must chain to the cluster CA like any peer's, but the dial names no node
    /// ([`tls::Identity::member_client_config`]); after the usual hello the member states its id,
    /// and its certificate must name that id ([`tls::verify_node_certificate`]) or nothing is
    /// sent and the call fails with [`Error::Tls`]. The member's address is then recorded
    /// ([`QuicTransport::set_peer`]) and the request sent on the same connection. Everything, the
    /// dial included, runs within `timeout`; on timeout after the request was sent it may or may
    /// not have run on the member.
    ///
    /// Errors before the member stated its id (nothing answers at `addr`, either side refused the
    /// other's certificate, the hello was refused, no answer in time) are [`Error::Unreachable`]
    /// with `peer` `NodeId(0)` (unknown) and `addr` in the reason; later errors name the member.
    /// An `addr` where this very node answers is refused with [`Error::Unreachable`] naming this
    /// node.
    pub async fn introduce(
        &self,
        addr: SocketAddr,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<(NodeId, Vec<u8>), Error> {
        if self.shared().closed.load(Ordering::Acquire) {
            return Err(Error::TransportClosed);
        }
        let max = self.shared().frame_bytes_max;
        if payload.len() > max {
            return Err(Error::FrameTooLarge {
                bytes: payload.len(),
                max,
            });
        }
        let waited_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let start = Instant::now();
        let deadline = start + timeout;
        // The dial is also bounded by the connect timeout, as every dial is.
        let dial_wait = timeout.min(self.shared().connect_timeout);
        let (conn, member) = match tokio::time::timeout_at(start + dial_wait, self.meet(addr)).await
        {
            Ok(result) => result?,
            Err(_) => {
                return Err(Error::Unreachable {
                    peer: UNKNOWN_MEMBER,
                    reason: format!(
                        "no cluster member at {addr} answered within {} ms",
                        dial_wait.as_millis()
                    ),
                })
            }
        };
        self.set_peer(member, addr);
        tracing::debug!(node = %self.node(), peer = %member, %addr, "introduced to a cluster member");
        let answer =
            match tokio::time::timeout_at(deadline, request(&conn, member, service, &payload, max))
                .await
            {
                Ok(result) => result,
                Err(_) => Err(Error::Timeout {
                    peer: member,
                    waited_ms,
                }),
            };
        conn.close(CLOSE_DONE.into(), b"introduced");
        answer.map(|body| (member, body))
    }

    /// The dialing half of [`QuicTransport::introduce`]: connects to `addr` without naming a node,
    /// says hello, and returns the connection and the member's id once its certificate is known
    /// to name that id. Closes the connection on any refusal.
    async fn meet(&self, addr: SocketAddr) -> Result<(quinn::Connection, NodeId), Error> {
        let unreachable = |reason: String| Error::Unreachable {
            peer: UNKNOWN_MEMBER,
            reason: format!("no cluster member reachable at {addr}: {reason}"),
        };
        let shared = self.shared();
        let connecting = shared
            .endpoint
            .connect_with(shared.member_client.clone(), addr, tls::MEMBER_SERVER_NAME)
            .map_err(|e| unreachable(e.to_string()))?;
        let conn = connecting.await.map_err(|e| unreachable(e.to_string()))?;
        let refuse = |reason: &str| conn.close(CLOSE_REFUSED.into(), reason.as_bytes());
        let member = self.hello(&conn).await.map_err(|reason| {
            refuse("hello failed");
            unreachable(reason)
        })?;
        let leaf = conn
            .peer_identity()
            .and_then(|identity| identity.downcast::<Vec<CertificateDer<'static>>>().ok())
            .and_then(|certs| certs.first().cloned());
        let named = match leaf {
            None => Err("it presented no certificate".to_string()),
            Some(leaf) => tls::verify_node_certificate(member, &leaf).map_err(|e| match e {
                Error::Tls(message) => message,
                other => other.to_string(),
            }),
        };
        if let Err(reason) = named {
            refuse("the certificate does not name the node id stated in the hello");
            return Err(Error::Tls(format!(
                "the member at {addr} says it is node {}, but {reason}",
                member.0
            )));
        }
        if member == shared.node {
            conn.close(CLOSE_DONE.into(), b"introduced to itself");
            return Err(Error::Unreachable {
                peer: member,
                reason: format!("{addr} is this node's own address, not another member's"),
            });
        }
        Ok((conn, member))
    }

    /// The cached connection to `peer`, dialing it if there is none or it closed. The dial runs in
    /// its own task: a caller whose deadline is shorter than a handshake (a Raft heartbeat) may give
    /// up, but the dial completes and the next call finds the connection.
    async fn connection(&self, peer: NodeId, service: Service) -> Result<quinn::Connection, Error> {
        let slot = lock(&self.shared().slots)
            .entry((peer, service))
            .or_default()
            .clone();
        // The usual case: a live connection is cached and nobody is dialing.
        if let Ok(cached) = slot.try_lock() {
            if let Some(conn) = cached.as_ref().filter(|c| c.close_reason().is_none()) {
                return Ok(conn.clone());
            }
        }
        let this = self.clone();
        let dial = tokio::spawn(async move {
            let mut cached = slot.lock_owned().await;
            if let Some(conn) = cached.as_ref() {
                if conn.close_reason().is_none() {
                    return Ok(conn.clone());
                }
            }
            *cached = None;
            let addr = this.peer_addr(peer).ok_or_else(|| Error::Unreachable {
                peer,
                reason: "no address known for this node".into(),
            })?;
            let wait = this.shared().connect_timeout;
            let conn = match tokio::time::timeout(wait, this.dial(peer, addr)).await {
                Ok(result) => result?,
                Err(_) => {
                    return Err(Error::Unreachable {
                        peer,
                        reason: format!("connecting to {addr} took over {} ms", wait.as_millis()),
                    })
                }
            };
            *lock(&this.shared().connects)
                .entry((peer, service))
                .or_default() += 1;
            *cached = Some(conn.clone());
            tracing::debug!(node = %this.node(), %peer, %addr, "connected to peer");
            Ok(conn)
        });
        dial.await.map_err(|e| Error::Unreachable {
            peer,
            reason: format!("dial task: {e}"),
        })?
    }

    /// Dials `peer` at `addr`: QUIC + mutual TLS (the server must hold `node-<peer>.baton`),
    /// then the hello naming this node.
    async fn dial(&self, peer: NodeId, addr: SocketAddr) -> Result<quinn::Connection, Error> {
        let unreachable = |reason: String| Error::Unreachable { peer, reason };
        let shared = self.shared();
        let connecting = shared
            .endpoint
            .connect_with(shared.client.clone(), addr, &tls::node_server_name(peer))
            .map_err(|e| unreachable(e.to_string()))?;
        let conn = connecting.await.map_err(|e| unreachable(e.to_string()))?;
        self.hello(&conn).await.map_err(unreachable)?;
        Ok(conn)
    }

    /// Says hello on a new connection (this node's id, boot id and, in the ranged dialect, the
    /// versions its binary serves) and returns the server's node id once its binary is known to
    /// serve the active version, or why the hello failed. A refused server's connection is closed.
    async fn hello(&self, conn: &quinn::Connection) -> Result<NodeId, String> {
        let shared = self.shared();
        let dialect = Dialect::of(conn);
        let said = Hello {
            node: shared.node,
            boot: shared.boot,
            supports: shared.versions.supports,
        };
        let hello = async {
            let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
            frame::write(&mut send, CODE_HELLO, &said.encode(dialect))
                .await
                .map_err(|e| e.to_string())?;
            frame::read(&mut recv, HELLO_BYTES_MAX)
                .await
                .map_err(|e| e.to_string())
        };
        let body = match hello.await {
            Ok((STATUS_OK, body)) => body,
            Ok((_, body)) => {
                return Err(format!("hello refused: {}", String::from_utf8_lossy(&body)))
            }
            // A refusal closes the connection with the reason: report that, not the stream error.
            Err(e) => {
                return Err(match conn.close_reason() {
                    Some(reason) => reason.to_string(),
                    None => e,
                })
            }
        };
        let (server, supports) = decode_answer(dialect, &body)?;
        if let Err(reason) = shared.admit(server, supports) {
            conn.close(CLOSE_REFUSED.into(), reason.as_bytes());
            return Err(reason);
        }
        Ok(server)
    }

    /// Drops the cached connection to `peer` if it is still `conn`.
    async fn forget(&self, peer: NodeId, service: Service, conn: &quinn::Connection) {
        let slot = lock(&self.shared().slots).get(&(peer, service)).cloned();
        if let Some(slot) = slot {
            let mut cached = slot.lock().await;
            if cached.as_ref().map(|c| c.stable_id()) == Some(conn.stable_id()) {
                *cached = None;
            }
        }
    }

    /// Stops the transport: no new calls, the listener stops, every connection closes. Safe to
    /// call more than once and from any clone. The UDP port is released once every handle is
    /// dropped.
    pub async fn shutdown(&self) {
        let shared = self.shared();
        shared.closed.store(true, Ordering::Release);
        self.owner.listener.abort();
        shared
            .endpoint
            .close(CLOSE_SHUTDOWN.into(), b"transport shut down");
        lock(&shared.slots).clear();
        let _ = tokio::time::timeout(SHUTDOWN_WAIT, shared.endpoint.wait_idle()).await;
        tracing::info!(node = %shared.node, "peer transport stopped");
    }
}

/// One request on a new bidirectional stream of `conn` to `peer`, and its answer. An error that
/// leaves the connection unusable is [`Error::Unreachable`] (the caller drops a cached
/// connection then); an error answer or a broken stream of a live connection is
/// [`Error::Remote`].
async fn request(
    conn: &quinn::Connection,
    peer: NodeId,
    service: Service,
    payload: &[u8],
    max: usize,
) -> Result<Vec<u8>, Error> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| Error::Unreachable {
        peer,
        reason: e.to_string(),
    })?;
    let answer = match frame::write(&mut send, service.code(), payload).await {
        Ok(()) => frame::read(&mut recv, max).await,
        Err(e) => Err(e),
    };
    match answer {
        Ok((STATUS_OK, body)) => Ok(body),
        Ok((_, body)) => Err(Error::Remote {
            peer,
            message: String::from_utf8_lossy(&body).into_owned(),
        }),
        Err(FrameError::TooLarge { bytes, max }) => Err(Error::FrameTooLarge { bytes, max }),
        Err(e) if conn.close_reason().is_some() => Err(Error::Unreachable {
            peer,
            reason: e.to_string(),
        }),
        Err(e) => Err(Error::Remote {
            peer,
            message: e.to_string(),
        }),
    }
}

impl super::Link for QuicTransport {
    fn node(&self) -> NodeId {
        QuicTransport::node(self)
    }
    fn local_addr(&self) -> Result<SocketAddr, Error> {
        QuicTransport::local_addr(self)
    }
    fn frame_bytes_max(&self) -> usize {
        QuicTransport::frame_bytes_max(self)
    }
    fn set_peer(&self, peer: NodeId, addr: SocketAddr) {
        QuicTransport::set_peer(self, peer, addr)
    }
    fn peer_addr(&self, peer: NodeId) -> Option<SocketAddr> {
        QuicTransport::peer_addr(self, peer)
    }
    fn register(&self, service: Service, handler: Arc<dyn Handler>) {
        QuicTransport::register(self, service, handler)
    }
    fn unregister(&self, service: Service) {
        QuicTransport::unregister(self, service)
    }
    fn stats(&self) -> TransportStats {
        QuicTransport::stats(self)
    }
    fn call(
        &self,
        peer: NodeId,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> super::LinkFuture<'_, Result<Vec<u8>, Error>> {
        Box::pin(QuicTransport::call(self, peer, service, payload, timeout))
    }
    fn introduce(
        &self,
        addr: SocketAddr,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> super::LinkFuture<'_, Result<(NodeId, Vec<u8>), Error>> {
        Box::pin(QuicTransport::introduce(
            self, addr, service, payload, timeout,
        ))
    }
    fn shutdown(&self) -> super::LinkFuture<'_, ()> {
        Box::pin(QuicTransport::shutdown(self))
    }
}
