//! `Link`: the seam between a node and its peer network. Everything above it (Raft
//! RPC of every group, forwarded requests, joining) talks to a [`Transport`], the cheap cloneable
//! handle around one `Link`. Production links are QUIC ([`super::QuicTransport`]); the simulator
//! plugs in its own link with seeded loss, delay, duplication, reordering and cuts; tests of the
//! layers above run several nodes in one process over [`super::mem`].
//!
//! The contract every link keeps: a call is one request and at most one answer, within the
//! caller's timeout; a timed-out call may or may not have run on the peer; the handler registered
//! for a service answers requests from authenticated peers only.

use super::handler::Handler;
use super::service::Service;
use super::{QuicTransport, TransportOptions, TransportStats};
use crate::error::Error;
use proto::NodeId;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// What a link's asynchronous methods return.
pub type LinkFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A node's connection to its peers.
pub trait Link: Send + Sync + 'static {
    /// This node.
    fn node(&self) -> NodeId;
    /// Where this node listens.
    fn local_addr(&self) -> Result<SocketAddr, Error>;
    /// Largest payload of a call or an answer.
    fn frame_bytes_max(&self) -> usize;
    /// Records (or changes) where `peer` listens.
    fn set_peer(&self, peer: NodeId, addr: SocketAddr);
    /// Where `peer` listens, if known.
    fn peer_addr(&self, peer: NodeId) -> Option<SocketAddr>;
    /// Registers the handler of `service`, replacing any earlier one.
    fn register(&self, service: Service, handler: Arc<dyn Handler>);
    /// Removes the handler of `service`; its requests are then answered with an error.
    fn unregister(&self, service: Service);
    /// Connection counters.
    fn stats(&self) -> TransportStats;
    /// Sends `payload` to `service` on `peer` and returns its answer within `timeout`.
    fn call(
        &self,
        peer: NodeId,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> LinkFuture<'_, Result<Vec<u8>, Error>>;
    /// Sends one request to whichever member listens at `addr`; returns its id and answer.
    fn introduce(
        &self,
        addr: SocketAddr,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> LinkFuture<'_, Result<(NodeId, Vec<u8>), Error>>;
    /// Stops the link: no new calls; safe to call more than once.
    fn shutdown(&self) -> LinkFuture<'_, ()>;
}

/// Cheap cloneable handle to a node's peer link.
#[derive(Clone)]
pub struct Transport {
    link: Arc<dyn Link>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("node", &self.link.node())
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// Starts the QUIC transport (binds `options.listen`, spawns the listener). Must run inside a
    /// tokio runtime.
    pub fn start(options: TransportOptions) -> Result<Transport, Error> {
        Ok(Transport::over(Arc::new(QuicTransport::start(options)?)))
    }

    /// A handle over any link (the simulator's).
    pub fn over(link: Arc<dyn Link>) -> Transport {
        Transport { link }
    }

    /// This node.
    pub fn node(&self) -> NodeId {
        self.link.node()
    }

    /// The address the link listens on (the real port when `listen` used port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.link.local_addr()
    }

    /// Largest payload of a call or an answer.
    pub fn frame_bytes_max(&self) -> usize {
        self.link.frame_bytes_max()
    }

    /// Records (or changes) where `peer` listens.
    pub fn set_peer(&self, peer: NodeId, addr: SocketAddr) {
        self.link.set_peer(peer, addr)
    }

    /// Where `peer` listens, if known.
    pub fn peer_addr(&self, peer: NodeId) -> Option<SocketAddr> {
        self.link.peer_addr(peer)
    }

    /// Registers the handler of `service`, replacing any earlier one.
    pub fn register(&self, service: Service, handler: impl Handler) {
        self.link.register(service, Arc::new(handler))
    }

    /// Removes the handler of `service`.
    pub fn unregister(&self, service: Service) {
        self.link.unregister(service)
    }

    /// Connection counters.
    pub fn stats(&self) -> TransportStats {
        self.link.stats()
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
        self.link.call(peer, service, payload, timeout).await
    }

    /// Sends one request to whichever cluster member listens at `addr` and returns that member's
    /// id and its answer (see [`QuicTransport::introduce`]).
    pub async fn introduce(
        &self,
        addr: SocketAddr,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<(NodeId, Vec<u8>), Error> {
        self.link.introduce(addr, service, payload, timeout).await
    }

    /// Stops the link: no new calls, every connection closes. Safe to call more than once.
    pub async fn shutdown(&self) {
        self.link.shutdown().await
    }
}
