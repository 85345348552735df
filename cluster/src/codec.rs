//! Byte layouts of what the cluster stores: log keys, log entries, log ids and the reserved
//! bookkeeping keys of the state tree. Hand-written rather than serde so that a command's bytes are
//! stored as they are (no JSON array of numbers) and decoding a log entry costs one copy.
//!
//! Log id layout: `[term u64 BE][leader node u64 BE][index u64 BE]` (openraft 0.9's default leader id
//! names the node that led the term).
//!
//! Entry layout, version 1: `[version=1][tag][log id, 24 bytes][payload]` where tag 0 is a
//! blank entry (no payload), 1 a normal entry (payload = `[commands u32 BE]` then per command
//! `[length u32 BE][bytes]`) and 2 a membership entry
//! (payload = serde JSON of the membership, rare and small). Decoding rejects other versions and tags.

use crate::types::{Entry, LogId, Request};
use openraft::{CommittedLeaderId, EntryPayload, Membership};

/// Key of the last applied log id in the state tree (bookkeeping, prefix 0x00).
pub const KEY_APPLIED: &[u8] = b"\x00applied";
/// Key of the progress inside a partly applied entry: `[log id][commands applied u32 BE]`
/// (bookkeeping, prefix 0x00). Present only between the commands of one entry.
pub const KEY_PARTIAL: &[u8] = b"\x00partial";
/// Key of the last applied membership in the state tree (bookkeeping, prefix 0x00).
pub const KEY_MEMBERSHIP: &[u8] = b"\x00membership";
/// Prefix byte of every bookkeeping key in the state tree; the node's keys never start with it.
pub const RESERVED_PREFIX: u8 = 0x00;

/// Key of the vote in the raft tree.
pub const KEY_VOTE: &[u8] = b"vote";
/// Key of the last committed log id in the raft tree.
pub const KEY_COMMITTED: &[u8] = b"committed";
/// Key of the last purged log id in the raft tree.
pub const KEY_PURGED: &[u8] = b"purged";
/// Key of the current snapshot's metadata in the raft tree.
pub const KEY_SNAPSHOT_META: &[u8] = b"snapshot_meta";

const ENTRY_VERSION: u8 = 1;
const TAG_BLANK: u8 = 0;
const TAG_NORMAL: u8 = 1;
const TAG_MEMBERSHIP: u8 = 2;
const LOG_ID_LEN: usize = 24;
const HEADER_LEN: usize = 2 + LOG_ID_LEN;

/// A stored record that cannot be decoded: the store is corrupt or written by an unknown version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot decode stored {what}: {why}")]
pub struct DecodeError {
    pub what: &'static str,
    pub why: String,
}

fn decode_error(what: &'static str, why: impl Into<String>) -> DecodeError {
    DecodeError {
        what,
        why: why.into(),
    }
}

/// Encodes a log id as `[term u64 BE][leader node u64 BE][index u64 BE]`.
pub fn encode_log_id(log_id: &LogId) -> [u8; LOG_ID_LEN] {
    let mut out = [0u8; LOG_ID_LEN];
    out[..8].copy_from_slice(&log_id.leader_id.term.to_be_bytes());
    out[8..16].copy_from_slice(&log_id.leader_id.node_id.to_be_bytes());
    out[16..].copy_from_slice(&log_id.index.to_be_bytes());
    out
}

/// Decodes a log id written by [`encode_log_id`].
pub fn decode_log_id(bytes: &[u8]) -> Result<LogId, DecodeError> {
    if bytes.len() != LOG_ID_LEN {
        return Err(decode_error(
            "log id",
            format!("{} bytes, expected {LOG_ID_LEN}", bytes.len()),
        ));
    }
    let term = read_u64(&bytes[..8]);
    let node = read_u64(&bytes[8..16]);
    let index = read_u64(&bytes[16..]);
    Ok(LogId::new(CommittedLeaderId::new(term, node), index))
}

/// Encodes a log entry (see the module docs for the layout).
pub fn encode_entry(entry: &Entry) -> Result<Vec<u8>, DecodeError> {
    let (tag, payload) = match &entry.payload {
        EntryPayload::Blank => (TAG_BLANK, Vec::new()),
        EntryPayload::Normal(request) => (TAG_NORMAL, encode_commands(&request.0)),
        EntryPayload::Membership(m) => (
            TAG_MEMBERSHIP,
            serde_json::to_vec(m).map_err(|e| decode_error("membership", e.to_string()))?,
        ),
    };
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.push(ENTRY_VERSION);
    out.push(tag);
    out.extend_from_slice(&encode_log_id(&entry.log_id));
    out.extend_from_slice(&payload);
    Ok(out)
}

/// Decodes a log entry written by [`encode_entry`].
pub fn decode_entry(bytes: &[u8]) -> Result<Entry, DecodeError> {
    if bytes.len() < HEADER_LEN {
        return Err(decode_error(
            "log entry",
            format!("{} bytes, shorter than the header", bytes.len()),
        ));
    }
    if bytes[0] != ENTRY_VERSION {
        return Err(decode_error(
            "log entry",
            format!("unknown version {}", bytes[0]),
        ));
    }
    let log_id = decode_log_id(&bytes[2..HEADER_LEN])?;
    let body = &bytes[HEADER_LEN..];
    let payload = match bytes[1] {
        TAG_BLANK => EntryPayload::Blank,
        TAG_NORMAL => EntryPayload::Normal(Request(decode_commands(body)?)),
        TAG_MEMBERSHIP => {
            let m: Membership<u64, openraft::BasicNode> = serde_json::from_slice(body)
                .map_err(|e| decode_error("membership", e.to_string()))?;
            EntryPayload::Membership(m)
        }
        tag => return Err(decode_error("log entry", format!("unknown tag {tag}"))),
    };
    Ok(Entry { log_id, payload })
}

/// Decodes only the log id of an encoded entry (cheap: no payload copy).
pub fn decode_entry_log_id(bytes: &[u8]) -> Result<LogId, DecodeError> {
    if bytes.len() < HEADER_LEN || bytes[0] != ENTRY_VERSION {
        return Err(decode_error("log entry", "bad header"));
    }
    decode_log_id(&bytes[2..HEADER_LEN])
}

/// Encodes a batch of commands: `[count u32 BE]` then `[length u32 BE][bytes]` each. Lengths fit:
/// options cap commands per batch and bytes per command below `u32::MAX`.
pub fn encode_commands(commands: &[Vec<u8>]) -> Vec<u8> {
    let size: usize = commands.iter().map(|c| 4 + c.len()).sum();
    let mut out = Vec::with_capacity(4 + size);
    out.extend_from_slice(&(commands.len() as u32).to_be_bytes());
    for command in commands {
        out.extend_from_slice(&(command.len() as u32).to_be_bytes());
        out.extend_from_slice(command);
    }
    out
}

/// Decodes a batch written by [`encode_commands`], checking every length against the buffer.
pub fn decode_commands(bytes: &[u8]) -> Result<Vec<Vec<u8>>, DecodeError> {
    let mut rest = bytes;
    let mut take = |n: usize| -> Result<&[u8], DecodeError> {
        if rest.len() < n {
            return Err(decode_error("command batch", "truncated"));
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    let count = read_u32(take(4)?) as usize;
    let mut commands = Vec::with_capacity(count.min(bytes.len() / 4));
    for _ in 0..count {
        let len = read_u32(take(4)?) as usize;
        commands.push(take(len)?.to_vec());
    }
    if !rest.is_empty() {
        return Err(decode_error("command batch", "trailing bytes"));
    }
    Ok(commands)
}

/// Encodes the progress inside a partly applied entry.
pub fn encode_partial(log_id: &LogId, applied: u32) -> Vec<u8> {
    let mut out = encode_log_id(log_id).to_vec();
    out.extend_from_slice(&applied.to_be_bytes());
    out
}

/// Decodes what [`encode_partial`] wrote.
pub fn decode_partial(bytes: &[u8]) -> Result<(LogId, u32), DecodeError> {
    if bytes.len() != LOG_ID_LEN + 4 {
        return Err(decode_error("partial apply marker", "bad length"));
    }
    Ok((
        decode_log_id(&bytes[..LOG_ID_LEN])?,
        read_u32(&bytes[LOG_ID_LEN..]),
    ))
}

fn read_u32(bytes: &[u8]) -> u32 {
    let mut buf = [0u8; 4];
    buf.copy_from_slice(bytes);
    u32::from_be_bytes(buf)
}

fn read_u64(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf.copy_from_slice(bytes);
    u64::from_be_bytes(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 7), index)
    }

    #[test]
    fn entries_round_trip() {
        let membership = Membership::new(
            vec![BTreeSet::from([1u64])],
            BTreeMap::from([(1u64, openraft::BasicNode::default())]),
        );
        let entries = [
            Entry {
                log_id: log_id(1, 1),
                payload: EntryPayload::Blank,
            },
            Entry {
                log_id: log_id(2, 7),
                payload: EntryPayload::Normal(Request(vec![b"hello".to_vec(), Vec::new()])),
            },
            Entry {
                log_id: log_id(3, u64::MAX),
                payload: EntryPayload::Membership(membership),
            },
        ];
        for entry in entries {
            let bytes = encode_entry(&entry).expect("encodes");
            assert_eq!(decode_entry(&bytes).expect("decodes"), entry);
            assert_eq!(decode_entry_log_id(&bytes).expect("decodes"), entry.log_id);
        }
    }

    #[test]
    fn corrupt_entries_are_errors() {
        assert!(decode_entry(&[]).is_err());
        assert!(decode_entry(&[9; 20]).is_err());
        let mut bytes = encode_entry(&Entry {
            log_id: log_id(1, 1),
            payload: EntryPayload::Blank,
        })
        .expect("encodes");
        bytes[1] = 42;
        assert!(decode_entry(&bytes).is_err());
    }

    #[test]
    fn command_batches_round_trip_and_reject_corruption() {
        let commands = vec![b"a".to_vec(), Vec::new(), vec![7u8; 300]];
        let bytes = encode_commands(&commands);
        assert_eq!(decode_commands(&bytes).expect("decodes"), commands);
        assert!(decode_commands(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_commands(&[0, 0, 0, 9]).is_err());
        let (id, n) = decode_partial(&encode_partial(&log_id(4, 9), 3)).expect("decodes");
        assert_eq!((id, n), (log_id(4, 9), 3));
    }
}
