//! Snapshots of a group's state tree: the byte format, the builder openraft runs, and the
//! metadata kept in `{name}/raft`.
//!
//! A group's snapshot is its state tree itself. The tree is durable up to its last checkpoint
//! (see [`crate::storage::buffered`]), so "building" a snapshot only checkpoints, flushes and
//! records the point the state has reached: its metadata. Nothing is copied, and the cost does
//! not grow with the state. That point is what openraft purges the log up to.
//!
//! The bytes are made only when a snapshot is read ([`crate::state_store::StateStore`]'s
//! `get_current_snapshot`): when a leader sends one to a follower whose log it has purged, and
//! once when a group opens (openraft reads the metadata then). They are a consistent dump of the
//! state tree as it is at that moment, taken on openraft's state machine worker between two
//! applies, so its metadata names the entry applied last rather than the last built point: the
//! state tree holds no older version to read. The state is checkpointed and flushed first, so
//! the log may be purged up to that entry too. The cluster's bookkeeping keys (prefix `0x00`)
//! are not in the dump; the metadata carries the same information and install writes it back.
//!
//! Data layout, version 1: `[version=1][pairs u64 BE]` then per pair `[key len u32 BE][key][value
//! len u32 BE][value]`, keys ascending.

// openraft's trait methods return its `StorageError` (224 bytes); helpers return the same type.
#![allow(clippy::result_large_err)]

use crate::codec::{self, DecodeError, KEY_SNAPSHOT_META, RESERVED_PREFIX};
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

/// The place in `{name}/raft` where the current snapshot's metadata lives, shared by the state
/// store and the builders it hands out.
#[derive(Clone)]
pub struct SnapshotSlot {
    db: Db,
    raft: Tree,
    /// Serializes "compare with the stored metadata, then replace it" between a finishing build
    /// and the state store, so an older point never replaces a newer one.
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

    /// Metadata for a snapshot of the state at `applied`, with a fresh id.
    pub fn new_meta(&self, applied: Option<LogId>, membership: StoredMembership) -> SnapshotMeta {
        let n = self.sequence.fetch_add(1, Ordering::Relaxed);
        let snapshot_id = match applied {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, n),
            None => format!("0-0-{n}"),
        };
        SnapshotMeta {
            last_log_id: applied,
            last_membership: membership,
            snapshot_id,
        }
    }

    /// The stored metadata, if a snapshot was ever built or installed.
    pub fn meta(&self) -> Result<Option<SnapshotMeta>, StorageError> {
        let subject = || ErrorSubject::Snapshot(None);
        self.raft
            .get(KEY_SNAPSHOT_META)
            .map_err(|e| io_error(subject(), ErrorVerb::Read, &e))?
            .map(|v| {
                serde_json::from_slice(&v).map_err(|e| io_error(subject(), ErrorVerb::Read, &e))
            })
            .transpose()
    }

    /// Records `meta` as the current snapshot unless a newer one is already recorded, then
    /// flushes the database. The flush also makes every state write before it durable, which is
    /// what lets the log up to the snapshot be purged: callers checkpoint the state first.
    pub async fn save(&self, meta: &SnapshotMeta) -> Result<(), StorageError> {
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        {
            let _guard = self
                .replace
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let newer = self
                .meta()?
                .is_none_or(|stored| stored.last_log_id < meta.last_log_id);
            if newer {
                let json = serde_json::to_vec(meta)
                    .map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
                self.raft
                    .insert(KEY_SNAPSHOT_META, json)
                    .map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
            }
        }
        self.db
            .flush()
            .await
            .map_err(|e| io_error(subject(), ErrorVerb::Write, &e))
    }
}

/// openraft's snapshot builder: records a point the state store checkpointed between two
/// applies, once the flush has made it durable.
pub struct SnapshotBuilder {
    /// The checkpointed point, or the error that prevented it (reported when openraft asks for
    /// the build).
    pub(crate) meta: Result<SnapshotMeta, StorageError>,
    pub(crate) slot: SnapshotSlot,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    /// The snapshot returned carries no data: openraft 0.9 keeps only the metadata of a built
    /// snapshot (for its log purge and metrics), and asks `get_current_snapshot` for the bytes
    /// when it sends one.
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let meta = std::mem::replace(
            &mut self.meta,
            Err(io_error(
                ErrorSubject::Snapshot(None),
                ErrorVerb::Read,
                &DecodeError {
                    what: "snapshot",
                    why: "builder used twice".into(),
                },
            )),
        )?;
        self.slot.save(&meta).await?;
        tracing::debug!(snapshot = %meta, "snapshot point recorded");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(Vec::new())),
        })
    }
}

/// The state tree's pairs without bookkeeping keys, ascending: what a snapshot holds.
pub fn state_pairs(state: &Tree) -> impl Iterator<Item = StorageResult<(IVec, IVec)>> + '_ {
    state.iter().filter(|item| {
        item.as_ref()
            .map_or(true, |(key, _)| key.first() != Some(&RESERVED_PREFIX))
    })
}

/// Copies the state tree's pairs, without bookkeeping keys.
pub fn dump_pairs(state: &Tree) -> StorageResult<Pairs> {
    state_pairs(state).collect()
}

/// Encodes pairs in the snapshot format, stopping at the first error.
pub fn encode(
    pairs: impl IntoIterator<Item = StorageResult<(IVec, IVec)>>,
) -> StorageResult<Vec<u8>> {
    let mut out = vec![SNAPSHOT_VERSION];
    out.extend_from_slice(&0u64.to_be_bytes());
    let mut count = 0u64;
    for pair in pairs {
        let (key, value) = pair?;
        for part in [&key, &value] {
            // stored values are far below 4 GiB (command_bytes_max bounds what reaches the state).
            out.extend_from_slice(&(part.len() as u32).to_be_bytes());
            out.extend_from_slice(part);
        }
        count += 1;
    }
    out[1..9].copy_from_slice(&count.to_be_bytes());
    Ok(out)
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
        let encoded = encode(pairs.iter().cloned().map(Ok)).expect("encodes");
        assert_eq!(decode(&encoded).expect("decodes"), pairs);
        let empty = encode(std::iter::empty()).expect("encodes");
        assert_eq!(decode(&empty).expect("decodes"), Vec::new());
    }

    #[test]
    fn corrupt_snapshots_are_errors() {
        let pairs: Pairs = vec![(b"a".into(), b"1".into())];
        let bytes = encode(pairs.into_iter().map(Ok)).expect("encodes");
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&[]).is_err());
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(decode(&extra).is_err());
    }
}
