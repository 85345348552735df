//! Snapshots of a group's state tree: the byte format, the builder openraft runs, and how the
//! current snapshot is kept in `{name}/raft`.
//!
//! A snapshot is a consistent dump of the state tree: the builder copies every key/value while
//! openraft's state machine worker is inside `get_snapshot_builder`, i.e. between two applies, so no
//! command is half-visible. The cluster's bookkeeping keys (prefix `0x00`) are not in the dump; the
//! snapshot's metadata carries the same information and install writes it back.
//!
//! Data layout, version 1: `[version=1][pairs u64 BE]` then per pair `[key len u32 BE][key][value
//! len u32 BE][value]`, keys ascending.
//!
//! The current snapshot (meta as JSON, data as bytes) is stored whole in the raft tree. That doubles
//! the state on disk while a snapshot exists; streaming snapshots from a storage checkpoint is the
//! next step when states grow large.

// openraft's trait methods return its `StorageError` (224 bytes); helpers return the same type.
#![allow(clippy::result_large_err)]

use crate::codec::{self, DecodeError, KEY_SNAPSHOT_DATA, KEY_SNAPSHOT_META, RESERVED_PREFIX};
use crate::log_store::io_error;
use crate::storage::{Batch, Db, IVec, StorageResult, Tree};
use crate::types::{LogId, SnapshotMeta, StorageError, StoredMembership, TypeConfig};
use openraft::{ErrorSubject, ErrorVerb, RaftSnapshotBuilder, Snapshot};
use std::io::Cursor;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const SNAPSHOT_VERSION: u8 = 1;

/// The key/value pairs of a state tree, without bookkeeping keys, ascending.
pub type Pairs = Vec<(IVec, IVec)>;

/// The place in `{name}/raft` where the current snapshot lives, shared by the state store and the
/// builders it hands out.
#[derive(Clone)]
pub struct SnapshotSlot {
    db: Db,
    raft: Tree,
    /// Serializes "compare with the stored snapshot, then replace it" between a finishing build and
    /// an install, so an older snapshot never replaces a newer one.
    replace: Arc<Mutex<()>>,
    /// Makes snapshot ids unique within a process (ids also carry the last log id).
    sequence: Arc<AtomicU64>,
}

impl SnapshotSlot {
    /// The slot in the given raft tree.
    pub fn new(db: &Db, raft: Tree) -> Self {
        SnapshotSlot {
            db: db.clone(),
            raft,
            replace: Arc::new(Mutex::new(())),
            sequence: Arc::new(AtomicU64::new(0)),
        }
    }

    /// A fresh snapshot id for a snapshot ending at `last`.
    pub fn next_id(&self, last: Option<&LogId>) -> String {
        let n = self.sequence.fetch_add(1, Ordering::Relaxed);
        match last {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, n),
            None => format!("0-0-{n}"),
        }
    }

    /// The stored snapshot, if any.
    pub fn load(&self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let read = |key: &[u8]| {
            self.raft
                .get(key)
                .map_err(|e| io_error(ErrorSubject::Snapshot(None), ErrorVerb::Read, &e))
        };
        let (Some(meta), Some(data)) = (read(KEY_SNAPSHOT_META)?, read(KEY_SNAPSHOT_DATA)?) else {
            return Ok(None);
        };
        let meta: SnapshotMeta = serde_json::from_slice(&meta)
            .map_err(|e| io_error(ErrorSubject::Snapshot(None), ErrorVerb::Read, &e))?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data.to_vec())),
        }))
    }

    /// Stores `meta` and `data` as the current snapshot unless a newer one is already stored, then
    /// flushes the database (which also makes every state write before it durable, so the log up to
    /// the snapshot may be purged).
    pub async fn save(&self, meta: &SnapshotMeta, data: &[u8]) -> Result<(), StorageError> {
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        {
            let _guard = self
                .replace
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let stored = self
                .raft
                .get(KEY_SNAPSHOT_META)
                .map_err(|e| io_error(subject(), ErrorVerb::Read, &e))?;
            let stored: Option<SnapshotMeta> = stored
                .map(|v| {
                    serde_json::from_slice(&v).map_err(|e| io_error(subject(), ErrorVerb::Read, &e))
                })
                .transpose()?;
            let newer = stored.is_none_or(|s| s.last_log_id < meta.last_log_id);
            if newer {
                let json = serde_json::to_vec(meta)
                    .map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
                let mut batch = Batch::default();
                batch.insert(KEY_SNAPSHOT_META, json);
                batch.insert(KEY_SNAPSHOT_DATA, data);
                self.raft
                    .apply_batch(batch)
                    .map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
            }
        }
        self.db
            .flush()
            .await
            .map_err(|e| io_error(subject(), ErrorVerb::Write, &e))
    }
}

/// What the state store captured for a snapshot: taken synchronously, encoded later.
pub struct Dump {
    /// The state's key/value pairs (bookkeeping excluded).
    pub pairs: Pairs,
    /// Last applied log id at the dump.
    pub applied: Option<LogId>,
    /// Last applied membership at the dump.
    pub membership: StoredMembership,
}

/// openraft's snapshot builder: encodes a dump captured between two applies and stores it.
pub struct SnapshotBuilder {
    /// The dump, or the error that prevented it (reported when openraft asks for the build).
    pub(crate) dump: Result<Dump, StorageError>,
    pub(crate) slot: SnapshotSlot,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let dump = std::mem::replace(
            &mut self.dump,
            Err(io_error(
                ErrorSubject::Snapshot(None),
                ErrorVerb::Read,
                &DecodeError {
                    what: "snapshot",
                    why: "builder used twice".into(),
                },
            )),
        )?;
        let data = encode(&dump.pairs);
        let meta = SnapshotMeta {
            last_log_id: dump.applied,
            last_membership: dump.membership,
            snapshot_id: self.slot.next_id(dump.applied.as_ref()),
        };
        self.slot.save(&meta, &data).await?;
        tracing::debug!(snapshot = %meta, bytes = data.len(), "snapshot built");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

/// Copies the state tree's pairs, without bookkeeping keys.
pub fn dump_pairs(state: &Tree) -> StorageResult<Pairs> {
    let mut pairs = Vec::new();
    for item in state.iter() {
        let (key, value) = item?;
        if key.first() != Some(&RESERVED_PREFIX) {
            pairs.push((key, value));
        }
    }
    Ok(pairs)
}

/// Encodes pairs in the snapshot format.
pub fn encode(pairs: &[(IVec, IVec)]) -> Vec<u8> {
    let size: usize = pairs.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
    let mut out = Vec::with_capacity(9 + size);
    out.push(SNAPSHOT_VERSION);
    out.extend_from_slice(&(pairs.len() as u64).to_be_bytes());
    for (key, value) in pairs {
        for part in [key, value] {
            // stored values are far below 4 GiB (command_bytes_max bounds what reaches the state).
            out.extend_from_slice(&(part.len() as u32).to_be_bytes());
            out.extend_from_slice(part);
        }
    }
    out
}

/// Decodes pairs written by [`encode`], checking every length against the buffer.
pub fn decode(bytes: &[u8]) -> Result<Pairs, DecodeError> {
    let bad = |why: &str| DecodeError {
        what: "snapshot",
        why: why.to_string(),
    };
    let mut rest = bytes;
    let mut take = |n: usize| -> Result<&[u8], DecodeError> {
        if rest.len() < n {
            return Err(bad("truncated"));
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    if take(1)?[0] != SNAPSHOT_VERSION {
        return Err(bad("unknown version"));
    }
    let count = u64::from_be_bytes(take(8)?.try_into().map_err(|_| bad("count"))?);
    let mut pairs = Vec::new();
    for _ in 0..count {
        let klen = u32::from_be_bytes(take(4)?.try_into().map_err(|_| bad("key length"))?) as usize;
        let key = IVec::from(take(klen)?);
        let vlen =
            u32::from_be_bytes(take(4)?.try_into().map_err(|_| bad("value length"))?) as usize;
        let value = IVec::from(take(vlen)?);
        if key.first() == Some(&RESERVED_PREFIX) {
            return Err(bad("bookkeeping key inside snapshot data"));
        }
        pairs.push((key, value));
    }
    if !rest.is_empty() {
        return Err(bad("trailing bytes"));
    }
    Ok(pairs)
}

/// Writes `applied` and `membership` as the state tree's bookkeeping into `batch`.
pub fn bookkeeping(
    batch: &mut Batch,
    applied: Option<&LogId>,
    membership: &StoredMembership,
) -> Result<(), serde_json::Error> {
    match applied {
        Some(log_id) => batch.insert(codec::KEY_APPLIED, &codec::encode_log_id(log_id)[..]),
        None => batch.remove(codec::KEY_APPLIED),
    }
    batch.insert(codec::KEY_MEMBERSHIP, serde_json::to_vec(membership)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip() {
        let pairs: Pairs = vec![
            (b"a".into(), b"".into()),
            (b"b".into(), vec![0u8; 1000].into()),
        ];
        assert_eq!(decode(&encode(&pairs)).expect("decodes"), pairs);
        assert_eq!(decode(&encode(&[])).expect("decodes"), Vec::new());
    }

    #[test]
    fn corrupt_snapshots_are_errors() {
        let pairs: Pairs = vec![(b"a".into(), b"1".into())];
        let bytes = encode(&pairs);
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&[]).is_err());
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(decode(&extra).is_err());
    }
}
