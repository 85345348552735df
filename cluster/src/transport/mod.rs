//! The peer transport: one QUIC endpoint per node, mutual TLS with the cluster CA
//! ([`crate::tls`]), one cached connection per peer, and a request/response call per
//! bidirectional stream, routed on the receiving node to the handler registered for its
//! [`Service`]. Raft RPC of every group ([`crate::network`]) and the node crate's forwarded
//! requests share the connections.
//!
//! Shape: [`TransportOptions`] -> [`Transport::start`] ([`QuicTransport`] behind the [`Link`] seam) (binds, spawns the listener) -> the
//! cloneable [`Transport`] handle; runs until [`Transport::shutdown`]. Everything is bounded:
//! payloads by `frame_bytes_max`, concurrent requests per connection by
//! `streams_per_connection_max`, inbound connections by `connections_max`, dials and calls by
//! timeouts.
//!
//! [`mem`] is an in-process link for tests of the layers above (several nodes in one process).
//!
//! Not here: worker connections (their own ALPN and gateway), retries, or knowledge of what a
//! payload means.

pub mod frame;
pub mod handle;
pub mod handler;
pub(crate) mod hello;
pub mod link;
mod listener;
pub mod mem;
pub mod options;
pub mod service;
mod shared;

pub use handle::{QuicTransport, TransportStats};
pub use handler::{Handler, HandlerFuture};
pub use hello::V1_RANGE;
pub use link::{Link, LinkFuture, Transport};
pub use options::{PeerVersions, TransportOptions};
pub use service::Service;
