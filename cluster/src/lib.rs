//! Baton's cluster layer: every partition (and the meta group) is an openraft 0.9 Raft group whose
//! log, vote and state machine live in trees of the node's one database ([`storage::Db`]: sled in
//! production, an in-memory disk in the simulator).
//!
//! The layer replicates *opaque* commands (bytes) and knows nothing about workflows: the node crate
//! implements [`StateMachine`] and decides what a command means. A [`Group`] is the cheap cloneable
//! handle to one running group: [`Group::open`] starts it, [`Group::propose`] replicates a command and
//! returns the state machine's answer once it is committed (flushed) and applied.
//!
//! Concurrent proposals are packed into one log entry ([`proposer`]): one Raft round and one disk
//! flush for many commands (group commit).
//!
//! By default a group has a single voter, the local node, and no network: the whole product runs
//! that way on one machine. With [`ClusterOptions`] a group has peers: its Raft messages travel
//! over the node's QUIC [`transport`] (mutual TLS, [`tls`]) through the [`network`] module, which
//! multiplexes every group of the node over one connection per peer and routes incoming
//! messages to the right group ([`network::RaftRouter`]).
//!
//! Running a node of a cluster (what the node crate does): call
//! [`tls::install_crypto_provider`] at start; load the node's [`tls::Identity`]; start one
//! [`Transport`] ([`TransportOptions`]: listen address, peers); make one [`RaftRouter`] on it;
//! open every group with [`GroupOptions::with_cluster`] (the router and the initial voters);
//! register a [`Service::Forward`] handler for requests other nodes forward to this one.
//!
//! Storage layout per group `name`:
//! - log entries: in the node's shared Raft log ([`storage::wal`], entries encoded by [`codec`]),
//! - `{name}/raft`: vote, committed log id, last purged log id, current snapshot's metadata,
//! - `{name}/state`: the state machine's keys (ASCII, written by the node) plus the cluster's own
//!   bookkeeping keys, which start with byte `0x00` and are written in the same atomic batch as the
//!   command's writes.

pub mod codec;
pub mod error;
#[cfg(test)]
mod golden;
pub mod group;
pub mod log_store;
pub mod metrics;
pub mod mutation;
pub mod network;
pub mod options;
pub mod pack;
pub mod proposer;
pub mod runtime;
pub mod snapshot;
pub mod state_machine;
pub mod state_store;
pub mod storage;
pub mod tls;
pub mod transport;
pub mod types;

pub use error::Error;
pub use group::Group;
pub use network::RaftRouter;
pub use options::{ClusterOptions, GroupOptions};
pub use proto::status::GroupStatus;
pub use proto::NodeId;
pub use state_machine::StateMachine;
pub use transport::{PeerVersions, Service, Transport, TransportOptions};
pub use types::{Request, Response, TypeConfig};
