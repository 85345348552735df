//! The payload of a [`crate::transport::Service::Raft`] call: which group, which openraft RPC,
//! and the answer. Encoded with bincode 2 (serde) behind a one-byte format version, because
//! log entries carry opaque command bytes that a text format would inflate several times.
//!
//! Decoding is bounded ([`DECODE_BYTES_MAX`]) so a corrupt length cannot make the receiver
//! allocate without limit. Not here: transport framing (the frame has its own version and length)
//! or routing (see [`super::RaftRouter`]).

use crate::types::TypeConfig;
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

/// Format version of Raft payloads, the only one the receiver reads.
pub const WIRE_VERSION: u8 = 1;
/// Most bytes a decoder will claim for one message (above any frame the transport accepts).
pub const DECODE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// An openraft RPC.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftRpc {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<u64>),
    InstallSnapshot(#[serde(with = "snapshot_chunk")] InstallSnapshotRequest<TypeConfig>),
}

/// A snapshot chunk with its data as one byte string: the same bincode bytes as openraft's derive
/// (field for field), written in one call instead of one per byte (a megabyte chunk took seconds in
/// a debug build).
mod snapshot_chunk {
    use crate::types::{SnapshotMeta, TypeConfig};
    use openraft::raft::InstallSnapshotRequest;
    use openraft::Vote;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct Out<'a> {
        vote: &'a Vote<u64>,
        meta: &'a SnapshotMeta,
        offset: u64,
        #[serde(with = "serde_bytes")]
        data: &'a [u8],
        done: bool,
    }

    #[derive(Deserialize)]
    struct In {
        vote: Vote<u64>,
        meta: SnapshotMeta,
        offset: u64,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
        done: bool,
    }

    pub fn serialize<S: Serializer>(
        r: &InstallSnapshotRequest<TypeConfig>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        Out {
            vote: &r.vote,
            meta: &r.meta,
            offset: r.offset,
            data: &r.data,
            done: r.done,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<InstallSnapshotRequest<TypeConfig>, D::Error> {
        let c = In::deserialize(d)?;
        Ok(InstallSnapshotRequest {
            vote: c.vote,
            meta: c.meta,
            offset: c.offset,
            data: c.data,
            done: c.done,
        })
    }
}

impl RaftRpc {
    /// The node the RPC says it comes from: the leader (AppendEntries, InstallSnapshot) or the
    /// candidate (Vote). The router checks it against the authenticated peer.
    pub fn sender(&self) -> u64 {
        let vote = match self {
            RaftRpc::AppendEntries(r) => &r.vote,
            RaftRpc::Vote(r) => &r.vote,
            RaftRpc::InstallSnapshot(r) => &r.vote,
        };
        vote.leader_id().node_id
    }
}

/// A request: an RPC for one named group.
#[derive(Debug, Serialize, Deserialize)]
pub struct RaftRequest {
    /// Group name (`"meta"`, `"p0"`...).
    pub group: String,
    pub rpc: RaftRpc,
}

/// The answer to a [`RaftRequest`].
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftReply {
    AppendEntries(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    InstallSnapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    /// The group is not open on the receiving node (not started yet, or shut down).
    NoGroup,
}

/// Why a payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad raft payload: {0}")]
pub struct WireError(pub String);

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<DECODE_BYTES_MAX>()
}

/// Encodes a message behind the format version.
pub fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, WireError> {
    let mut out = vec![WIRE_VERSION];
    bincode::serde::encode_into_std_write(message, &mut out, config())
        .map_err(|e| WireError(e.to_string()))?;
    Ok(out)
}

/// Decodes a message written by [`encode`]; the whole payload must be consumed.
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, WireError> {
    let (&version, body) = bytes
        .split_first()
        .ok_or_else(|| WireError("empty".into()))?;
    if version != WIRE_VERSION {
        return Err(WireError(format!("unsupported version {version}")));
    }
    let (message, used) =
        bincode::serde::decode_from_slice(body, config()).map_err(|e| WireError(e.to_string()))?;
    if used != body.len() {
        return Err(WireError("trailing bytes".into()));
    }
    Ok(message)
}

/// An upper bound of the bytes `entry` adds to an encoded AppendEntries request, computed
/// without encoding its commands (bincode's varints take at most 9 bytes; the bound assumes 9).
pub fn entry_bytes_bound(entry: &crate::types::Entry) -> usize {
    const VARINT: usize = 9;
    let header = 3 * VARINT + VARINT;
    header
        + match &entry.payload {
            openraft::EntryPayload::Blank => 0,
            openraft::EntryPayload::Normal(request) => {
                VARINT + request.0.iter().map(|c| VARINT + c.len()).sum::<usize>()
            }
            // Rare and small: measure it. Failing to encode here fails the send later too.
            openraft::EntryPayload::Membership(m) => {
                encode(m).map_or(DECODE_BYTES_MAX, |bytes| bytes.len())
            }
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Entry, Request};
    use openraft::{CommittedLeaderId, EntryPayload, LogId, Vote};

    #[test]
    fn snapshot_chunks_travel_as_openraft_encodes_them() {
        let chunk = InstallSnapshotRequest::<TypeConfig> {
            vote: Vote::new_committed(4, 2),
            meta: crate::types::SnapshotMeta {
                last_log_id: Some(LogId::new(CommittedLeaderId::new(4, 2), 90)),
                last_membership: Default::default(),
                snapshot_id: "4-90-0".into(),
            },
            offset: 1024,
            data: vec![7; 300],
            done: false,
        };
        let ours = encode(&RaftRpc::InstallSnapshot(chunk.clone())).expect("encode");
        // What openraft's own derive writes, behind the same variant index (2), one version byte.
        let mut theirs = encode(&2u32).expect("encode");
        theirs.extend(&encode(&chunk).expect("encode")[1..]); // without its version byte
        assert_eq!(ours, theirs);
        match decode::<RaftRpc>(&ours).expect("decode") {
            RaftRpc::InstallSnapshot(back) => assert_eq!(back, chunk),
            other => panic!("decoded {other:?}"),
        }
    }

    #[test]
    fn requests_round_trip() {
        let entry = Entry {
            log_id: LogId::new(CommittedLeaderId::new(3, 1), 7),
            payload: EntryPayload::Normal(Request(vec![b"abc".to_vec(), vec![0; 100]])),
        };
        let request = RaftRequest {
            group: "p3".into(),
            rpc: RaftRpc::AppendEntries(AppendEntriesRequest {
                vote: Vote::new_committed(3, 1),
                prev_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), 6)),
                entries: vec![entry.clone()],
                leader_commit: None,
            }),
        };
        let bytes = encode(&request).expect("encode");
        // Command bytes travel as bytes, not as a list of numbers.
        assert!(bytes.len() < 200, "{} bytes", bytes.len());
        assert!(
            bytes.len()
                <= encode(&RaftRequest {
                    group: "p3".into(),
                    rpc: RaftRpc::Vote(VoteRequest::new(Vote::new(1, 1), None))
                })
                .expect("encode")
                .len()
                    + 40
                    + entry_bytes_bound(&entry)
        );
        let back: RaftRequest = decode(&bytes).expect("decode");
        assert_eq!(back.group, "p3");
        assert_eq!(back.rpc.sender(), 1);
        match back.rpc {
            RaftRpc::AppendEntries(r) => assert_eq!(r.entries, vec![entry]),
            other => panic!("unexpected {other:?}"),
        }
        let reply = RaftReply::Vote(Ok(VoteResponse::new(Vote::new(4, 2), None, true)));
        let back: RaftReply = decode(&encode(&reply).expect("encode")).expect("decode");
        assert!(matches!(back, RaftReply::Vote(Ok(v)) if v.vote_granted));
    }

    #[test]
    fn bad_payloads_are_errors() {
        assert!(decode::<RaftReply>(&[]).is_err());
        assert!(decode::<RaftReply>(&[WIRE_VERSION + 1, 0]).is_err());
        assert!(decode::<RaftReply>(&[0, 0]).is_err());
        let mut bytes = encode(&RaftReply::NoGroup).expect("encode");
        bytes.push(0);
        assert!(decode::<RaftReply>(&bytes).is_err());
        // A length far beyond the limit is refused rather than allocated.
        let huge = [WIRE_VERSION, 0, 252, 0xff, 0xff, 0xff, 0xff];
        assert!(decode::<RaftRequest>(&huge).is_err());
    }
}
