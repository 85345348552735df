//! The worker protocol over QUIC: what a worker and a node say to each other on the one
//! bidirectional stream a worker opens per connection.
//!
//! - The worker opens the stream with [`WorkerFrame::Hello`]: its id, the task types it works (each
//!   with an optional domain and a capacity) and the protocol versions it speaks. The node answers
//!   [`NodeFrame::Welcome`] with the version chosen, or [`NodeFrame::Error`] and closes.
//! - Capacity is credit: the node pushes [`NodeFrame::Task`]s of a type while the worker has credit
//!   for it; each task pushed uses one credit, and the worker returns credit with
//!   [`WorkerFrame::Credit`] as it finishes work.
//! - A worker reports with [`WorkerFrame::Result`] (any status: COMPLETED, FAILED,
//!   FAILED_WITH_TERMINAL_ERROR, IN_PROGRESS with `callbackAfterSeconds`, which with 0 is a
//!   heartbeat that extends the response timeout), quoting the [`Lease`] the task came with. The
//!   node answers [`NodeFrame::Ack`] once the result is committed, or [`NodeFrame::Error`] (for
//!   example [`ErrorCode::Stale`] when the lease ended: the attempt timed out, or another worker holds
//!   the task now).
//! - Either side drains: the worker sends [`WorkerFrame::Drain`] (no more tasks; it finishes what it
//!   holds), the node sends [`NodeFrame::Drain`] (it is stopping; reconnect elsewhere).
//!
//! Every frame travels as a four-byte little-endian length, then a versioned record
//! ([`crate::record::encode`]). Frames are plain data: the I/O is the node's and the SDK's.

use crate::model::{Task, TaskResult};
use crate::record::{self, CodecError};
use serde::{Deserialize, Serialize};

/// The server name a worker dials any node with: every node certificate names it (besides the
/// node's own `node-<id>.baton`), so a worker checks it reached a node of its cluster.
pub const NODE_SERVER_NAME: &str = "nodes.baton";
/// ALPN protocol of worker connections.
pub const ALPN_WORKER: &[u8] = b"baton-worker/1";
/// The worker protocol versions this build speaks, oldest first.
pub const PROTOCOL_VERSIONS: &[u16] = &[1];
/// Largest frame accepted, in bytes (a task or result carries at most a 1 MiB payload).
pub const FRAME_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Most task types one worker connection may subscribe to.
pub const SUBSCRIPTIONS_MAX: usize = 64;
/// Most credit a worker may hold per subscription (tasks pushed and not yet finished).
pub const CREDIT_MAX: u32 = 1_000;
/// Longest worker id accepted.
pub const WORKER_ID_LEN_MAX: usize = 256;

/// Prefix of the URI subject alternative names in a worker certificate that grant a task type;
/// `urn:baton:task-type:*` grants every type.
pub const TASK_TYPE_URI_PREFIX: &str = "urn:baton:task-type:";
/// Prefix of the URI subject alternative name in a worker certificate that names the worker.
pub const WORKER_URI_PREFIX: &str = "urn:baton:worker:";

/// The certificate's grant URI for `task_type` (`*` for every type).
pub fn task_type_uri(task_type: &str) -> String {
    format!("{TASK_TYPE_URI_PREFIX}{task_type}")
}

/// The certificate's URI naming worker `id`.
pub fn worker_uri(id: &str) -> String {
    format!("{WORKER_URI_PREFIX}{id}")
}

/// What a worker's certificate allows: its id and the task types it may work.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grant {
    pub worker_id: String,
    /// Granted task types; `None` means every type.
    pub task_types: Option<Vec<String>>,
}

impl Grant {
    /// Reads a grant from a certificate's URI subject alternative names.
    pub fn from_uris<'a>(uris: impl IntoIterator<Item = &'a str>) -> Grant {
        let mut grant = Grant::default();
        let mut types = Vec::new();
        let mut all = false;
        for uri in uris {
            if let Some(id) = uri.strip_prefix(WORKER_URI_PREFIX) {
                grant.worker_id = id.to_owned();
            } else if let Some(t) = uri.strip_prefix(TASK_TYPE_URI_PREFIX) {
                if t == "*" {
                    all = true;
                } else if !t.is_empty() {
                    types.push(t.to_owned());
                }
            }
        }
        grant.task_types = (!all).then_some(types);
        grant
    }

    pub fn allows(&self, task_type: &str) -> bool {
        self.task_types
            .as_ref()
            .is_none_or(|t| t.iter().any(|x| x == task_type))
    }
}

/// One task type a worker works, with the domain it polls (Conductor's task-to-domain) and how
/// many tasks of it the worker takes at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    pub task_type: String,
    #[serde(default)]
    pub domain: Option<String>,
    /// Initial credit: tasks the node may push before the worker returns any.
    pub capacity: u32,
}

/// The fencing token a task is pushed with and its results quote: the task (attempt) id, its type,
/// and how many times it had been leased when this worker got it. A result whose lease is not the
/// task's current one is refused ([`ErrorCode::Stale`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub task_id: String,
    pub task_type: String,
    pub poll_count: u32,
}

impl Lease {
    /// The lease a pushed task carries.
    pub fn of(task: &Task) -> Lease {
        Lease {
            task_id: task.task_id.as_str().to_owned(),
            task_type: task.task_type.clone(),
            poll_count: task.poll_count,
        }
    }
}

/// What a worker sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)] // results are the common frame; boxing would not save a copy
pub enum WorkerFrame {
    Hello {
        worker_id: String,
        subscriptions: Vec<Subscription>,
        /// Protocol versions the worker speaks.
        versions: Vec<u16>,
    },
    /// `n` more tasks of `task_type` (in `domain`) may be pushed.
    Credit {
        task_type: String,
        #[serde(default)]
        domain: Option<String>,
        n: u32,
    },
    /// A result (or heartbeat: IN_PROGRESS) for a leased task; `seq` is echoed by the answer.
    Result {
        seq: u64,
        lease: Lease,
        result: TaskResult,
    },
    /// The worker stops taking tasks; it finishes and reports what it holds.
    Drain,
}

/// Why a node refused something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCode {
    /// Malformed or out of limits; fix the request.
    Invalid,
    /// The worker's certificate does not allow it.
    Forbidden,
    /// The lease ended (timed out, re-leased, or the task is terminal): drop the work.
    Stale,
    /// The task or workflow does not exist.
    NotFound,
    /// Not possible now (no leader, stopping); retry, perhaps on another node.
    Unavailable,
    /// No common protocol version.
    Version,
}

/// What a node sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum NodeFrame {
    Welcome {
        /// The node's id.
        node: u64,
        /// The protocol version chosen.
        version: u16,
        /// The worker id tasks are recorded with: the one the worker's certificate names (a
        /// hello may name the worker otherwise, e.g. by host name; the certificate decides).
        worker_id: String,
    },
    /// A leased task: work it and report with its lease.
    Task { lease: Lease, task: Box<Task> },
    /// The result `seq` is committed.
    Ack { seq: u64 },
    /// The frame `seq` (or the connection, for `None`) was refused.
    Error {
        seq: Option<u64>,
        code: ErrorCode,
        message: String,
    },
    /// The node is stopping: no more tasks; results are still taken for a short while.
    Drain,
}

/// Encodes a frame with its length prefix.
pub fn encode_frame<T: Serialize>(frame: &T) -> Vec<u8> {
    let body = record::encode(frame);
    let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// The body length a frame header announces, refused above [`FRAME_BYTES_MAX`].
pub fn frame_len(header: [u8; 4]) -> Result<usize, FrameError> {
    let len = u32::from_le_bytes(header) as usize;
    if len > FRAME_BYTES_MAX {
        return Err(FrameError::TooLarge(len));
    }
    Ok(len)
}

/// Decodes a frame body (without its length prefix).
pub fn decode_frame<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    Ok(record::decode(body)?)
}

/// The highest version both sides speak.
pub fn choose_version(offered: &[u16]) -> Option<u16> {
    PROTOCOL_VERSIONS
        .iter()
        .rev()
        .find(|v| offered.contains(v))
        .copied()
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes is larger than the {FRAME_BYTES_MAX}-byte limit")]
    TooLarge(usize),
    #[error("malformed frame: {0}")]
    Codec(#[from] CodecError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_with_their_length() {
        let frame = WorkerFrame::Hello {
            worker_id: "w1".into(),
            subscriptions: vec![Subscription {
                task_type: "t".into(),
                domain: None,
                capacity: 4,
            }],
            versions: vec![1],
        };
        let bytes = encode_frame(&frame);
        let len = frame_len([bytes[0], bytes[1], bytes[2], bytes[3]]).expect("len");
        assert_eq!(len, bytes.len() - 4);
        let back: WorkerFrame = decode_frame(&bytes[4..]).expect("decode");
        assert_eq!(back, frame);
        assert!(frame_len((FRAME_BYTES_MAX as u32 + 1).to_le_bytes()).is_err());
        assert!(decode_frame::<WorkerFrame>(&[9, 9, b'{']).is_err());
    }

    #[test]
    fn grants_come_from_certificate_uris() {
        let g = Grant::from_uris([
            "urn:baton:worker:billing-7",
            "urn:baton:task-type:charge",
            "urn:baton:task-type:refund",
            "https://example.com/other",
        ]);
        assert_eq!(g.worker_id, "billing-7");
        assert!(g.allows("charge") && g.allows("refund") && !g.allows("ship"));
        let all = Grant::from_uris(["urn:baton:worker:x", "urn:baton:task-type:*"]);
        assert!(all.allows("anything"));
        assert!(!Grant::from_uris(["urn:baton:worker:x"]).allows("t"));
    }

    #[test]
    fn the_highest_common_version_is_chosen() {
        assert_eq!(choose_version(&[1, 7]), Some(1));
        assert_eq!(choose_version(&[7]), None);
    }
}
