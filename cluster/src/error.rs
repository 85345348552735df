//! `cluster::Error`: what can go wrong when opening a group, proposing to it, changing its
//! membership, or calling a peer over the transport. Each variant says
//! what the caller should do; storage errors inside openraft stop the group (openraft turns them into
//! a fatal error) and surface here as `Raft` or `ShuttingDown`.

use openraft::error::{ClientWriteError, Fatal, InitializeError, RaftError};
use proto::NodeId;

/// Errors of the cluster layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// This node does not lead the group; propose on `leader` instead (unknown while an election runs).
    #[error("this node is not the leader of the group (leader: {leader:?}); retry on the leader")]
    NotLeader { leader: Option<NodeId> },
    /// Storage failed to read or write; the group's durable state is unchanged by the failed
    /// operation.
    #[error("storage error: {0}")]
    Storage(String),
    /// openraft failed in a way the caller cannot fix by retrying elsewhere.
    #[error("raft error: {0}")]
    Raft(String),
    /// The group is stopping or stopped; nothing more is accepted.
    #[error("the group is shutting down")]
    ShuttingDown,
    /// The command is larger than `GroupOptions::command_bytes_max`; nothing was proposed.
    #[error("command of {bytes} bytes exceeds the maximum of {max} bytes")]
    CommandTooLarge { bytes: usize, max: usize },
    /// The command begins with the bytes that mark a packed batch ([`crate::pack::MARKER`]);
    /// nothing was proposed.
    #[error("a command cannot begin with the bytes that mark a packed batch (ff ff 7a 34)")]
    CommandLooksPacked,
    /// The local node did not become leader of its single-voter group in time.
    #[error("group {group} had no local leader after {waited_ms} ms")]
    NoLeader { group: String, waited_ms: u64 },
    /// The options are inconsistent (e.g. election timeout not above the heartbeat).
    #[error("invalid group options: {0}")]
    Options(String),
    /// Certificates or keys could not be made, read or written, or a TLS configuration could not
    /// be built from them; fix the files (see `tls::write_cluster_certs`).
    #[error("tls: {0}")]
    Tls(String),
    /// No connection to `peer` could be made or kept (address unknown, peer down, handshake
    /// refused); retry later or check the peer's address and certificates.
    #[error("node {peer} is unreachable: {reason}")]
    Unreachable { peer: NodeId, reason: String },
    /// `peer` did not answer within the call's timeout; the request may or may not have run there.
    #[error("node {peer} did not answer within {waited_ms} ms")]
    Timeout { peer: NodeId, waited_ms: u64 },
    /// `peer` answered with an error (no handler for the service, handler failure, bad frame).
    #[error("node {peer} answered with an error: {message}")]
    Remote { peer: NodeId, message: String },
    /// A frame is larger than the transport's `frame_bytes_max`; nothing was sent.
    #[error("frame of {bytes} bytes exceeds the maximum of {max} bytes")]
    FrameTooLarge { bytes: usize, max: usize },
    /// The transport could not bind its listening address.
    #[error("cannot listen on {addr}: {reason}")]
    Listen { addr: String, reason: String },
    /// The transport is shut down; nothing more is sent or served.
    #[error("the peer transport is shut down")]
    TransportClosed,
}

impl From<crate::storage::StorageError> for Error {
    fn from(e: crate::storage::StorageError) -> Self {
        Error::Storage(e.0)
    }
}

impl From<Fatal<u64>> for Error {
    fn from(e: Fatal<u64>) -> Self {
        match e {
            Fatal::Stopped => Error::ShuttingDown,
            other => Error::Raft(other.to_string()),
        }
    }
}

impl From<ClientWriteError<u64, openraft::BasicNode>> for Error {
    fn from(e: ClientWriteError<u64, openraft::BasicNode>) -> Self {
        match e {
            ClientWriteError::ForwardToLeader(f) => Error::NotLeader {
                leader: f.leader_id.map(NodeId),
            },
            other => Error::Raft(other.to_string()),
        }
    }
}

impl From<RaftError<u64, ClientWriteError<u64, openraft::BasicNode>>> for Error {
    fn from(e: RaftError<u64, ClientWriteError<u64, openraft::BasicNode>>) -> Self {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => Error::NotLeader {
                leader: f.leader_id.map(NodeId),
            },
            RaftError::APIError(other) => Error::Raft(other.to_string()),
            RaftError::Fatal(f) => f.into(),
        }
    }
}

impl From<RaftError<u64, InitializeError<u64, openraft::BasicNode>>> for Error {
    fn from(e: RaftError<u64, InitializeError<u64, openraft::BasicNode>>) -> Self {
        match e {
            RaftError::APIError(api) => Error::Raft(api.to_string()),
            RaftError::Fatal(f) => f.into(),
        }
    }
}
