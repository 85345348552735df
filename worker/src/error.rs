//! The SDK's error type: configuration and TLS mistakes found when building a worker, and what
//! happens to a running worker (connection failures, a node's refusals, a lease that ended).
//!
//! Errors are `Clone` so that the last one can be kept in [`crate::Status`] and read from any
//! handle; causes from other crates are therefore kept as their messages.

use proto::worker::ErrorCode;
use std::net::SocketAddr;
use std::path::PathBuf;

/// What went wrong, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The builder was given something unusable; fix the configuration.
    #[error("invalid worker configuration: {0}")]
    Config(String),
    /// The certificates or key could not be used; check the PEM files (`baton worker-cert`).
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// A certificate or key file could not be read.
    #[error("cannot read {path}: {message}")]
    Io { path: PathBuf, message: String },
    /// No QUIC connection could be made to a node (unreachable, handshake refused, timeout).
    /// The worker retries on the next node.
    #[error("cannot connect to node {node}: {message}")]
    Connect { node: SocketAddr, message: String },
    /// An established connection failed; the worker reconnects to the next node.
    #[error("connection to node {node} lost: {message}")]
    Connection { node: SocketAddr, message: String },
    /// A node refused the worker (its answer to the hello, or a connection-wide error).
    /// [`ErrorCode::Forbidden`]: the certificate does not grant a subscribed task type;
    /// [`ErrorCode::Version`]: no common protocol version. Both need a change on one side.
    #[error("node {node} refused the worker ({code:?}): {message}")]
    Refused {
        node: SocketAddr,
        code: ErrorCode,
        message: String,
    },
    /// A node sent something the protocol does not allow; the worker reconnects elsewhere.
    #[error("node {node} broke the worker protocol: {message}")]
    Protocol { node: SocketAddr, message: String },
    /// The task's lease ended (timed out, leased again, or the task is finished): stop working
    /// on it; its result will be refused.
    #[error("the task's lease has ended; stop working on it")]
    Stale,
    /// A node refused a result or heartbeat for a reason other than a stale lease.
    #[error("the node refused the report ({code:?}): {message}")]
    Rejected { code: ErrorCode, message: String },
    /// The worker has stopped (or gave up on the report while stopping).
    #[error("the worker has stopped")]
    Closed,
    /// The graceful shutdown's bounded wait ran out: this much work was abandoned (the node will
    /// time the tasks out and retry them).
    #[error(
        "shutdown timed out: {tasks} task(s) still running and {results} result(s) unacknowledged were abandoned"
    )]
    ShutdownTimeout { tasks: usize, results: usize },
}
