//! Baton's cluster layer: every partition (and the meta group) is an openraft 0.9 Raft group whose
//! log, vote and state machine live in sled trees of the node's one sled database.
//!
//! The layer replicates *opaque* commands (bytes) and knows nothing about workflows: the node crate
//! implements [`StateMachine`] and decides what a command means. A [`Group`] is the cheap cloneable
//! handle to one running group: [`Group::open`] starts it, [`Group::propose`] replicates a command and
//! returns the state machine's answer once it is committed (flushed) and applied.
//!
//! Concurrent proposals are packed into one log entry ([`proposer`]): one Raft round and one disk
//! flush for many commands (group commit, DESIGN §11).
//!
//! In this slice every group has a single voter, the local node; the network ([`network`]) answers
//! "unreachable" for any peer. Adding peers means implementing that network over QUIC and changing
//! membership; storage and the apply path already follow the multi-voter rules.
//!
//! Storage layout per group `name` (DESIGN §3, §8):
//! - `{name}/log`: log entries keyed by big-endian index ([`codec`]),
//! - `{name}/raft`: vote, committed log id, last purged log id, current snapshot (meta and data),
//! - `{name}/state`: the state machine's keys (ASCII, written by the node) plus the cluster's own
//!   bookkeeping keys, which start with byte `0x00` and are written in the same atomic batch as the
//!   command's writes.

pub mod codec;
pub mod error;
pub mod group;
pub mod log_store;
pub mod network;
pub mod options;
pub mod proposer;
pub mod snapshot;
pub mod state_machine;
pub mod state_store;
pub mod status;
pub mod types;

pub use error::Error;
pub use group::Group;
pub use options::GroupOptions;
pub use proto::NodeId;
pub use state_machine::StateMachine;
pub use status::GroupStatus;
pub use types::{Request, Response, TypeConfig};
