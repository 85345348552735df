//! What the QUIC transport's handle (`handle.rs`), its listener (`listener.rs`) and the tasks
//! serving connections share: this node's endpoint and TLS configurations, the peers' addresses
//! and boot ids, the cached outbound connections, and the registered handlers.

use super::handler::Handler;
use super::options::PeerVersions;
use super::service::Service;
use proto::version::VersionRange;
use proto::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Application close code: the transport shut down.
pub(crate) const CLOSE_SHUTDOWN: u32 = 0;
/// Application close code: the peer was refused (bad hello or identity).
pub(crate) const CLOSE_REFUSED: u32 = 1;

/// One cached outbound connection; the async mutex makes concurrent callers share one dial.
pub(super) type Slot = Arc<tokio::sync::Mutex<Option<quinn::Connection>>>;

/// State shared by the handle, the listener and the tasks serving connections.
pub(crate) struct Shared {
    /// This node.
    pub(crate) node: NodeId,
    pub(crate) endpoint: quinn::Endpoint,
    /// Client side of mutual TLS (with this node's certificate).
    pub(super) client: quinn::ClientConfig,
    /// The same without the server-name check, for [`super::QuicTransport::introduce`].
    pub(super) member_client: quinn::ClientConfig,
    /// Largest payload either way.
    pub(crate) frame_bytes_max: usize,
    /// Bound of a dial (handshake + hello), and of an inbound handshake + hello.
    pub(crate) connect_timeout: Duration,
    /// Inbound connections served at once.
    pub(crate) connections_max: usize,
    /// Where peers are; seeded by the options, updated from Raft membership.
    pub(super) peers: RwLock<BTreeMap<NodeId, SocketAddr>>,
    /// Cached outbound connection per peer and service: Raft heartbeats never wait for stream
    /// credit behind forwarded requests that may take seconds (an election in progress).
    pub(super) slots: Mutex<BTreeMap<(NodeId, Service), Slot>>,
    /// Registered handlers per service.
    pub(super) handlers: RwLock<BTreeMap<Service, Arc<dyn Handler>>>,
    /// Outbound connections established per peer since start (for tests and status).
    pub(super) connects: Mutex<BTreeMap<(NodeId, Service), u64>>,
    /// Authenticated inbound connections open per peer.
    pub(crate) inbound: Mutex<BTreeMap<NodeId, usize>>,
    /// Set by shutdown: no new calls.
    pub(super) closed: AtomicBool,
    /// Random per process start, sent in every hello: a peer that sees a new boot id knows this
    /// node restarted and that its cached connection here is dead.
    pub(crate) boot: u64,
    /// The boot id each peer last said hello with.
    pub(crate) peer_boots: Mutex<BTreeMap<NodeId, u64>>,
    /// This binary's range and the cluster's active version, checked against each peer's.
    pub(crate) versions: PeerVersions,
    /// The last refusal logged per peer, so a refused peer that keeps dialing is logged once.
    pub(crate) refusals: Mutex<BTreeMap<NodeId, String>>,
}

impl Shared {
    /// A peer said hello with boot id `boot`. If it restarted since its last hello, the cached
    /// connection to it points at the dead process (QUIC would notice only at the idle timeout):
    /// drop it, so the next call dials the new process.
    pub(crate) fn peer_booted(&self, peer: NodeId, boot: u64) {
        let previous = lock(&self.peer_boots).insert(peer, boot);
        if previous.is_some_and(|b| b != boot) {
            let mut slots = lock(&self.slots);
            for service in Service::ALL {
                if let Some(slot) = slots.remove(&(peer, service)) {
                    if let Ok(mut cached) = slot.try_lock() {
                        if let Some(conn) = cached.take() {
                            conn.close(0u32.into(), b"peer restarted");
                        }
                    }
                }
            }
            tracing::info!(node = %self.node, %peer, "peer restarted; its old connection is dropped");
        }
    }

    /// Whether `peer`, whose binary serves `supports`, may talk to this node: refused when it
    /// cannot serve the active version. A refusal is logged once per peer and reason.
    pub(crate) fn admit(&self, peer: NodeId, supports: VersionRange) -> Result<(), String> {
        let verdict = super::hello::admit(peer, supports, self.versions.active());
        let mut refusals = lock(&self.refusals);
        match &verdict {
            Ok(()) => {
                refusals.remove(&peer);
            }
            Err(reason) => {
                if refusals.get(&peer) != Some(reason) {
                    tracing::warn!(node = %self.node, %peer, %reason, "peer refused: its binary cannot serve the cluster's version");
                    refusals.insert(peer, reason.clone());
                }
            }
        }
        verdict
    }

    /// The handler registered for `service`, if any.
    pub(crate) fn handler(&self, service: Service) -> Option<Arc<dyn Handler>> {
        read(&self.handlers).get(&service).cloned()
    }
}

/// A poisoned lock only means another thread panicked while holding it; the maps stay valid (every
/// update is a single insert or remove), so keep going.
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
pub(super) fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}
pub(super) fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|p| p.into_inner())
}
