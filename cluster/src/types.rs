//! The openraft type configuration of every Baton group: commands and responses are opaque bytes,
//! node ids are `u64` (the inner value of [`proto::NodeId`]), nodes are [`openraft::BasicNode`], and
//! snapshots are in-memory byte buffers (see [`crate::snapshot`] for their format).

use serde::{Deserialize, Serialize};
use std::io::Cursor;

/// The payload of one normal log entry: a batch of commands (bytes only the state machine
/// understands), applied in order. Batching concurrent proposals into one entry is how a group
/// gets one disk flush for many commands (see [`crate::proposer`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request(pub Vec<Vec<u8>>);

/// The state machine's answers to one applied entry, one per command (none for blank and
/// membership entries).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Response(pub Vec<Vec<u8>>);

openraft::declare_raft_types!(
    /// openraft type configuration shared by the meta group and every partition.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log entry of a Baton group.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id of a Baton group.
pub type LogId = openraft::LogId<u64>;
/// The storage error type openraft expects from the stores.
pub type StorageError = openraft::StorageError<u64>;
/// A membership as stored with its log id.
pub type StoredMembership = openraft::StoredMembership<u64, openraft::BasicNode>;
/// Metadata of a snapshot.
pub type SnapshotMeta = openraft::SnapshotMeta<u64, openraft::BasicNode>;
