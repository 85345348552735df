//! The openraft type configuration of every Baton group: commands and responses are opaque bytes,
//! node ids are `u64` (the inner value of [`proto::NodeId`]), nodes are [`openraft::BasicNode`], and
//! snapshots are in-memory byte buffers (see [`crate::snapshot`] for their format).

use serde::{Deserialize, Serialize};
use std::io::Cursor;

/// The payload of one normal log entry: a batch of commands (bytes only the state machine
/// understands), applied in order. Batching concurrent proposals into one entry is how a group
/// gets one disk flush for many commands (see [`crate::proposer`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request(#[serde(with = "byte_strings")] pub Vec<Vec<u8>>);

/// The state machine's answers to one applied entry, one per command (none for blank and
/// membership entries).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Response(#[serde(with = "byte_strings")] pub Vec<Vec<u8>>);

/// Serialises a list of byte strings as byte strings rather than as sequences of `u8`: the same
/// bincode bytes (a length, then the bytes), written in one call instead of one per byte. Per-byte
/// encoding made a large AppendEntries take longer than openraft's RPC timeout (the heartbeat
/// interval) on a busy debug build, and followers never caught up.
mod byte_strings {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_bytes::{ByteBuf, Bytes};

    pub fn serialize<S: Serializer>(list: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<&Bytes> = list.iter().map(|b| Bytes::new(b)).collect();
        bytes.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        let bufs = Vec::<ByteBuf>::deserialize(d)?;
        Ok(bufs.into_iter().map(ByteBuf::into_vec).collect())
    }
}

openraft::declare_raft_types!(
    /// openraft type configuration shared by the meta group and every partition.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = crate::runtime::SeededRuntime,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_strings_encode_as_plain_byte_vectors() {
        // The same bytes as bincode's encoding of a plain `Vec<Vec<u8>>`.
        let commands = vec![b"start".to_vec(), Vec::new(), vec![0, 255, 7]];
        let new = crate::network::wire::encode(&Request(commands.clone())).expect("encode");
        let old = crate::network::wire::encode(&commands).expect("encode");
        assert_eq!(new, old);
        let back: Request = crate::network::wire::decode(&old).expect("decode");
        assert_eq!(back.0, commands);
    }
}
