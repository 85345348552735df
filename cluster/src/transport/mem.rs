//! An in-process peer network, for tests of the layers above the transport (Raft groups, routing,
//! membership) with several nodes in one process. Production uses QUIC ([`super::QuicTransport`]);
//! the simulator has its own link with seeded faults. This one carries the same bytes to the
//! same handlers with none of that: a call runs the peer's handler for the service at once, on
//! its own task (a slow handler holds up only its caller), within the caller's timeout.
//!
//! Shape: one shared [`MemNet`]; [`MemNet::link`] gives each node its [`MemLink`], which a node
//! uses through [`super::Transport::over`]. [`MemNet::cut`] isolates a node both ways until
//! [`MemNet::heal`].
//!
//! Outcomes, as the other links report them: the handler's error is [`Error::Remote`], and so is
//! a service the peer does not serve; a peer whose address is unknown or wrong, that serves
//! nothing (not started, or shut down), or that is cut off (before or while the call runs) is
//! [`Error::Unreachable`]; no answer within the timeout is [`Error::Timeout`] (the handler may
//! still run to its end, as on a real network).

use super::handler::Handler;
use super::service::Service;
use super::{Link, LinkFuture, TransportStats};
use crate::error::Error;
use proto::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Largest payload of a call or an answer (the QUIC transport's default).
const FRAME_BYTES_MAX: usize = 16 * 1024 * 1024;

/// The nodes of one process and what connects them.
#[derive(Default)]
pub struct MemNet {
    state: Mutex<NetState>,
}

#[derive(Default)]
struct NetState {
    /// Each serving node's handlers; a node is listed from its first registration until its link
    /// shuts down.
    handlers: BTreeMap<NodeId, BTreeMap<Service, Arc<dyn Handler>>>,
    /// Who listens where.
    addrs: BTreeMap<SocketAddr, NodeId>,
    /// Nodes cut off from every other.
    cut: BTreeSet<NodeId>,
}

impl MemNet {
    /// An empty network.
    pub fn new() -> Arc<MemNet> {
        Arc::new(MemNet::default())
    }

    /// The link of `node`, which listens at `addr`.
    pub fn link(self: &Arc<Self>, node: NodeId, addr: SocketAddr) -> Arc<MemLink> {
        self.lock().addrs.insert(addr, node);
        Arc::new(MemLink {
            node,
            addr,
            net: self.clone(),
            peers: Mutex::new(BTreeMap::new()),
            closed: AtomicBool::new(false),
        })
    }

    /// Cuts `node` off: calls to and from it fail as unreachable, calls under way too (their
    /// answers are lost).
    pub fn cut(&self, node: NodeId) {
        self.lock().cut.insert(node);
    }

    /// Ends the cut of `node`.
    pub fn heal(&self, node: NodeId) {
        self.lock().cut.remove(&node);
    }

    fn lock(&self) -> MutexGuard<'_, NetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The handler of `service` on `to`, reached from `from` at `addr`.
    fn route(
        &self,
        from: NodeId,
        to: NodeId,
        addr: SocketAddr,
        service: Service,
    ) -> Result<Arc<dyn Handler>, Error> {
        let s = self.lock();
        let unreachable = |reason: String| Error::Unreachable { peer: to, reason };
        if s.cut.contains(&from) || s.cut.contains(&to) {
            return Err(unreachable("cut off (in-process network)".into()));
        }
        if s.addrs.get(&addr) != Some(&to) {
            return Err(unreachable(format!("node {to} does not listen at {addr}")));
        }
        let serving = s
            .handlers
            .get(&to)
            .ok_or_else(|| unreachable("connection refused (in-process network)".into()))?;
        serving.get(&service).cloned().ok_or_else(|| Error::Remote {
            peer: to,
            message: format!("no handler for service {service} on node {to}"),
        })
    }

    fn is_cut(&self, a: NodeId, b: NodeId) -> bool {
        let s = self.lock();
        s.cut.contains(&a) || s.cut.contains(&b)
    }

    fn node_at(&self, addr: SocketAddr) -> Option<NodeId> {
        self.lock().addrs.get(&addr).copied()
    }
}

/// A node's [`Link`] over a [`MemNet`].
pub struct MemLink {
    node: NodeId,
    addr: SocketAddr,
    net: Arc<MemNet>,
    peers: Mutex<BTreeMap<NodeId, SocketAddr>>,
    closed: AtomicBool,
}

impl MemLink {
    fn peers(&self) -> MutexGuard<'_, BTreeMap<NodeId, SocketAddr>> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn exchange(
        &self,
        peer: NodeId,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::TransportClosed);
        }
        if payload.len() > FRAME_BYTES_MAX {
            return Err(Error::FrameTooLarge {
                bytes: payload.len(),
                max: FRAME_BYTES_MAX,
            });
        }
        let addr = self.peer_addr(peer).ok_or_else(|| Error::Unreachable {
            peer,
            reason: "address unknown".into(),
        })?;
        let handler = self.net.route(self.node, peer, addr, service)?;
        let from = self.node;
        let running = tokio::spawn(async move { handler.handle(from, payload).await });
        let answer = match tokio::time::timeout(timeout, running).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => Err(format!("the handler failed: {e}")),
            Err(_) => {
                return Err(Error::Timeout {
                    peer,
                    waited_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                })
            }
        };
        if self.net.is_cut(from, peer) {
            return Err(Error::Unreachable {
                peer,
                reason: "cut off while the call ran (in-process network)".into(),
            });
        }
        match answer {
            Ok(body) if body.len() <= FRAME_BYTES_MAX => Ok(body),
            Ok(body) => Err(Error::Remote {
                peer,
                message: format!(
                    "answer of {} bytes exceeds the maximum of {FRAME_BYTES_MAX} bytes",
                    body.len()
                ),
            }),
            Err(message) => Err(Error::Remote { peer, message }),
        }
    }
}

impl Link for MemLink {
    fn node(&self) -> NodeId {
        self.node
    }

    fn local_addr(&self) -> Result<SocketAddr, Error> {
        Ok(self.addr)
    }

    fn frame_bytes_max(&self) -> usize {
        FRAME_BYTES_MAX
    }

    fn set_peer(&self, peer: NodeId, addr: SocketAddr) {
        self.peers().insert(peer, addr);
    }

    fn peer_addr(&self, peer: NodeId) -> Option<SocketAddr> {
        self.peers().get(&peer).copied()
    }

    fn register(&self, service: Service, handler: Arc<dyn Handler>) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.net.lock();
        s.handlers
            .entry(self.node)
            .or_default()
            .insert(service, handler);
    }

    fn unregister(&self, service: Service) {
        if let Some(serving) = self.net.lock().handlers.get_mut(&self.node) {
            serving.remove(&service);
        }
    }

    fn stats(&self) -> TransportStats {
        TransportStats::default()
    }

    fn call(
        &self,
        peer: NodeId,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> LinkFuture<'_, Result<Vec<u8>, Error>> {
        Box::pin(self.exchange(peer, service, payload, timeout))
    }

    fn introduce(
        &self,
        addr: SocketAddr,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> LinkFuture<'_, Result<(NodeId, Vec<u8>), Error>> {
        Box::pin(async move {
            let peer = self
                .net
                .node_at(addr)
                .filter(|p| *p != self.node)
                .ok_or_else(|| Error::Unreachable {
                    peer: NodeId(0),
                    reason: format!("no other member listens at {addr}"),
                })?;
            self.set_peer(peer, addr);
            let body = self.exchange(peer, service, payload, timeout).await?;
            Ok((peer, body))
        })
    }

    fn shutdown(&self) -> LinkFuture<'_, ()> {
        self.closed.store(true, Ordering::Release);
        self.net.lock().handlers.remove(&self.node);
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Transport;

    fn addr(n: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], n))
    }

    /// Two nodes that know each other; node 2 echoes Forward requests, prefixed with the caller.
    fn pair() -> (Arc<MemNet>, Transport, Transport) {
        let net = MemNet::new();
        let (one, two) = (
            Transport::over(net.link(NodeId(1), addr(1))),
            Transport::over(net.link(NodeId(2), addr(2))),
        );
        one.set_peer(NodeId(2), addr(2));
        two.set_peer(NodeId(1), addr(1));
        two.register(Service::Forward, |from: NodeId, body: Vec<u8>| async move {
            match body.as_slice() {
                b"fail" => Err("refused".to_owned()),
                b"hang" => std::future::pending().await,
                _ => Ok([from.0.to_be_bytes().as_slice(), &body].concat()),
            }
        });
        (net, one, two)
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn a_call_reaches_the_peers_handler_and_brings_its_answer_back() {
        let (_net, one, _two) = pair();
        let answer = one.call(NodeId(2), Service::Forward, b"hi".to_vec(), SECOND);
        assert_eq!(answer.await, Ok([&1u64.to_be_bytes()[..], b"hi"].concat()));
        let refused = one.call(NodeId(2), Service::Forward, b"fail".to_vec(), SECOND);
        assert!(
            matches!(refused.await, Err(Error::Remote { message, .. }) if message == "refused")
        );
        let unserved = one.call(NodeId(2), Service::Raft, b"hi".to_vec(), SECOND);
        assert!(matches!(unserved.await, Err(Error::Remote { .. })));
        let introduced = one.introduce(addr(2), Service::Forward, b"x".to_vec(), SECOND);
        assert_eq!(introduced.await.map(|(peer, _)| peer), Ok(NodeId(2)));
    }

    #[tokio::test]
    async fn a_cut_node_is_unreachable_both_ways_until_healed() {
        let (net, one, two) = pair();
        one.register(Service::Forward, |_: NodeId, _: Vec<u8>| async {
            Ok(Vec::new())
        });
        net.cut(NodeId(2));
        let to = one.call(NodeId(2), Service::Forward, b"hi".to_vec(), SECOND);
        assert!(matches!(
            to.await,
            Err(Error::Unreachable {
                peer: NodeId(2),
                ..
            })
        ));
        let from = two.call(NodeId(1), Service::Forward, Vec::new(), SECOND);
        assert!(matches!(
            from.await,
            Err(Error::Unreachable {
                peer: NodeId(1),
                ..
            })
        ));
        net.heal(NodeId(2));
        let healed = one.call(NodeId(2), Service::Forward, b"hi".to_vec(), SECOND);
        assert!(healed.await.is_ok());
        two.shutdown().await;
        let down = one.call(NodeId(2), Service::Forward, b"hi".to_vec(), SECOND);
        assert!(matches!(down.await, Err(Error::Unreachable { .. })));
        let closed = two.call(NodeId(1), Service::Forward, Vec::new(), SECOND);
        assert_eq!(closed.await, Err(Error::TransportClosed));
    }

    #[tokio::test]
    async fn a_call_without_an_answer_in_time_times_out() {
        let (_net, one, _two) = pair();
        let started = tokio::time::Instant::now();
        let within = Duration::from_millis(50);
        let hung = one.call(NodeId(2), Service::Forward, b"hang".to_vec(), within);
        assert_eq!(
            hung.await,
            Err(Error::Timeout {
                peer: NodeId(2),
                waited_ms: 50
            })
        );
        assert!(started.elapsed() >= within);
        let unknown = one.call(NodeId(3), Service::Forward, Vec::new(), within);
        assert!(matches!(unknown.await, Err(Error::Unreachable { .. })));
    }
}
