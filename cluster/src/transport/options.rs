//! `TransportOptions`: who the node is (its TLS identity), where it listens, where its peers are,
//! and the limits and timings of the peer transport. Every queue and payload has a named maximum
//! here. Not here: group membership (Raft's membership is the source of truth for
//! peer addresses once a group runs; this map seeds the transport before that).

use crate::error::Error;
use crate::tls::Identity;
use proto::version::{ClusterVersion, VersionRange};
use proto::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The cluster versions this node's binary serves, said in every hello, and where the transport
/// reads the version the cluster has activated, against which every peer's range is checked
/// (see `hello.rs`).
#[derive(Clone)]
pub struct PeerVersions {
    pub supports: VersionRange,
    active: Arc<dyn Fn() -> ClusterVersion + Send + Sync>,
}

impl PeerVersions {
    /// `supports`, with the active version read from `active` at each hello.
    pub fn new(
        supports: VersionRange,
        active: impl Fn() -> ClusterVersion + Send + Sync + 'static,
    ) -> Self {
        PeerVersions {
            supports,
            active: Arc::new(active),
        }
    }

    /// The active version now.
    pub fn active(&self) -> ClusterVersion {
        (self.active)()
    }
}

impl Default for PeerVersions {
    /// This build's range in a cluster at the first version.
    fn default() -> Self {
        PeerVersions::new(VersionRange::BUILD, || ClusterVersion::FIRST)
    }
}

impl std::fmt::Debug for PeerVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerVersions")
            .field("supports", &self.supports)
            .field("active", &self.active())
            .finish()
    }
}

/// Options of one node's peer transport.
#[derive(Debug, Clone)]
pub struct TransportOptions {
    /// The node's certificate, key and trusted CA; its `node` is the transport's node id.
    pub identity: Identity,
    /// UDP address to listen on (port 0 picks a free port; see `Transport::local_addr`).
    pub listen: SocketAddr,
    /// Known peers and their addresses; more can be added at run time (`Transport::set_peer`).
    pub peers: BTreeMap<NodeId, SocketAddr>,
    /// Largest request or response payload, either direction. Raft snapshot chunks (openraft's
    /// `snapshot_max_chunk_size`, 3 MiB by default) and AppendEntries batches must fit.
    pub frame_bytes_max: usize,
    /// Concurrent requests a peer may have open on one connection; further calls wait for a
    /// stream (back-pressure), they are not queued without bound.
    pub streams_per_connection_max: u32,
    /// Inbound connections served at once; further handshakes are refused.
    pub connections_max: usize,
    /// How long dialing a peer (QUIC + TLS handshake + hello) may take.
    pub connect_timeout_ms: u64,
    /// A connection with no traffic for this long is closed (keep-alives prevent it while the
    /// peer is up, so this is how a dead peer is noticed).
    pub idle_timeout_ms: u64,
    /// Interval of keep-alive packets on idle connections; below `idle_timeout_ms`.
    pub keep_alive_ms: u64,
    /// The versions this binary serves and the cluster's active one, for the hello.
    pub versions: PeerVersions,
}

impl TransportOptions {
    /// Options with defaults for `identity`, listening on `listen`, with no peers yet.
    pub fn new(identity: Identity, listen: SocketAddr) -> Self {
        TransportOptions {
            identity,
            listen,
            peers: BTreeMap::new(),
            frame_bytes_max: 16 * 1024 * 1024,
            streams_per_connection_max: 256,
            connections_max: 256,
            connect_timeout_ms: 3_000,
            idle_timeout_ms: 4_000,
            keep_alive_ms: 1_000,
            versions: PeerVersions::default(),
        }
    }

    /// Adds known peers (e.g. the initial voters of the cluster).
    pub fn with_peers(mut self, peers: impl IntoIterator<Item = (NodeId, SocketAddr)>) -> Self {
        self.peers.extend(peers);
        self
    }

    /// Says `versions` in hellos and checks peers against its active version.
    pub fn with_versions(mut self, versions: PeerVersions) -> Self {
        self.versions = versions;
        self
    }

    /// The node id of this transport.
    pub fn node(&self) -> NodeId {
        self.identity.node
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.frame_bytes_max == 0 || self.frame_bytes_max > u32::MAX as usize {
            return Err(Error::Options(
                "frame_bytes_max must be positive and below 4 GiB".into(),
            ));
        }
        if self.streams_per_connection_max == 0 || self.connections_max == 0 {
            return Err(Error::Options(
                "streams_per_connection_max and connections_max must be positive".into(),
            ));
        }
        if self.connect_timeout_ms == 0 || self.keep_alive_ms == 0 {
            return Err(Error::Options(
                "connect_timeout_ms and keep_alive_ms must be positive".into(),
            ));
        }
        if self.keep_alive_ms >= self.idle_timeout_ms {
            return Err(Error::Options(
                "keep_alive_ms must be below idle_timeout_ms".into(),
            ));
        }
        Ok(())
    }

    /// QUIC transport parameters for both directions.
    pub(crate) fn quic_transport(&self) -> Result<quinn::TransportConfig, Error> {
        let mut config = quic_config();
        let idle = quinn::IdleTimeout::try_from(Duration::from_millis(self.idle_timeout_ms))
            .map_err(|e| Error::Options(format!("idle_timeout_ms: {e}")))?;
        config
            .max_idle_timeout(Some(idle))
            .keep_alive_interval(Some(Duration::from_millis(self.keep_alive_ms)))
            .max_concurrent_bidi_streams(self.streams_per_connection_max.into())
            // Every exchange is a bidirectional stream; nobody needs unidirectional ones.
            .max_concurrent_uni_streams(0u8.into());
        Ok(config)
    }
}

/// Peers acknowledge every ninth packet they receive (or after their `max_ack_delay`, 25 ms by
/// default) instead of every second one: QUIC's acknowledgement-frequency extension, which
/// every Baton endpoint speaks (quinn's). Requests and their answers carry acknowledgements
/// anyway, so what this saves is the packets that would carry nothing else.
pub const ACK_ELICITING_THRESHOLD: u8 = 8;

/// The QUIC transport settings every Baton connection starts from, peers' and workers' (the
/// worker SDK sets the same): [`ACK_ELICITING_THRESHOLD`].
pub fn quic_config() -> quinn::TransportConfig {
    let mut acks = quinn::AckFrequencyConfig::default();
    acks.ack_eliciting_threshold(ACK_ELICITING_THRESHOLD.into());
    let mut config = quinn::TransportConfig::default();
    config.ack_frequency_config(Some(acks));
    config
}

/// The receive buffer asked of the kernel for every Baton UDP socket, peers' and the worker
/// gateway's (Linux caps it at `net.core.rmem_max`). Linux's default, 208 KiB, overflowed on a
/// busy 2-core machine: a node that did not run for a few milliseconds dropped Raft entries,
/// which QUIC then sent again after a loss timeout.
pub const UDP_RECEIVE_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// Binds the UDP socket of a QUIC endpoint at `addr`, with [`UDP_RECEIVE_BUFFER_BYTES`].
pub fn bind_udp(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_recv_buffer_size(UDP_RECEIVE_BUFFER_BYTES)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// A QUIC endpoint on [`bind_udp`]'s socket: a server when `server` is given, and a client too.
pub fn quic_endpoint(
    addr: SocketAddr,
    server: Option<quinn::ServerConfig>,
) -> std::io::Result<quinn::Endpoint> {
    let runtime = quinn::default_runtime()
        .ok_or_else(|| std::io::Error::other("no async runtime to run a QUIC endpoint on"))?;
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        server,
        bind_udp(addr)?,
        runtime,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_sockets_get_the_larger_receive_buffer() {
        let socket = bind_udp("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let got = socket2::SockRef::from(&socket)
            .recv_buffer_size()
            .expect("SO_RCVBUF");
        // Linux grants twice what is asked (for its bookkeeping), up to twice `rmem_max`.
        let rmem_max = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok());
        let granted = rmem_max.map_or(UDP_RECEIVE_BUFFER_BYTES, |max| {
            UDP_RECEIVE_BUFFER_BYTES.min(max)
        });
        assert!(got >= granted, "SO_RCVBUF {got}, asked {granted}");
    }
}
