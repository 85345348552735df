//! `LogStore`: openraft's storage-v2 log storage (`RaftLogStorage`) of one group. The entries
//! live in the node's shared Raft log ([`crate::storage::wal`]); the vote, the committed log id
//! and the last purged log id live in the tree `{name}/raft`.
//!
//! Durability: `append` writes everything openraft hands over, syncs the log once (shared with
//! every other group's appends, see [`crate::storage::wal::Wal::sync`]) and only then completes
//! openraft's callback; `save_vote` flushes the trees before it returns. Nothing is acknowledged
//! before it is durable. (openraft 0.9 hands over one client write per `append` and waits for its
//! callback before the next, so batching within a group happens one level up: the
//! [`crate::proposer`] packs concurrent proposals into one entry.) The committed log id is not
//! flushed: losing it in a crash only means re-applying committed entries (which the state
//! machine's own applied log id makes idempotent). A purge records its marker in the trees and
//! forgets the entries; their segment is deleted only after the trees are flushed.

// openraft's trait methods return its `StorageError` (224 bytes); helpers return the same type.
#![allow(clippy::result_large_err)]

use crate::codec::{self, KEY_COMMITTED, KEY_PURGED, KEY_VOTE};
use crate::storage::wal::Wal;
use crate::storage::{Db, StorageResult, Tree};
use crate::types::{Entry, LogId, StorageError, TypeConfig};
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, ErrorSubject, ErrorVerb, LogState, OptionalSend, RaftLogReader, StorageIOError, Vote,
};
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::Arc;

/// Log and vote storage of one group. Cloning is cheap (storage handles); the clone is also the log
/// reader openraft's replication tasks use.
#[derive(Clone)]
pub struct LogStore {
    /// The node's storage (tree flushes are per database).
    db: Db,
    /// The node's Raft log, shared by every group.
    wal: Arc<Wal>,
    /// The group's name in the log.
    name: Arc<str>,
    /// `{name}/raft`: vote, committed, purged, snapshot.
    raft: Tree,
}

impl LogStore {
    /// Opens the log of group `name` and forgets what its purge marker covers.
    pub async fn open(db: &Db, name: &str) -> StorageResult<Self> {
        let store = LogStore {
            db: db.clone(),
            wal: db.raft_log().clone(),
            name: Arc::from(name),
            raft: db.open_tree(format!("{name}/raft"))?,
        };
        if let Some(purged) = store.raft.get(KEY_PURGED)? {
            let purged = codec::decode_log_id(&purged)?;
            store.wal.purge(name, purged.index);
        }
        Ok(store)
    }

    fn read_log_id(
        &self,
        key: &[u8],
        subject: ErrorSubject<u64>,
    ) -> Result<Option<LogId>, StorageError> {
        let value = self
            .raft
            .get(key)
            .map_err(|e| io_error(subject.clone(), ErrorVerb::Read, &e))?;
        value
            .map(|v| codec::decode_log_id(&v).map_err(|e| io_error(subject, ErrorVerb::Read, &e)))
            .transpose()
    }

    async fn flush(&self, subject: ErrorSubject<u64>) -> Result<(), StorageError> {
        self.db
            .flush()
            .await
            .map_err(|e| io_error(subject, ErrorVerb::Write, &e))
    }
}

/// Wraps an error as openraft's storage error.
pub(crate) fn io_error(
    subject: ErrorSubject<u64>,
    verb: ErrorVerb,
    e: &(impl std::error::Error + 'static),
) -> StorageError {
    StorageIOError::new(subject, verb, AnyError::new(e)).into()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let encoded = self
            .wal
            .read(&self.name, range)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, &e))?;
        encoded
            .iter()
            .map(|bytes| {
                codec::decode_entry(bytes)
                    .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, &e))
            })
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id = self.read_log_id(KEY_PURGED, ErrorSubject::Store)?;
        let last_log_id = self.wal.last(&self.name).or(last_purged_log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError> {
        let bytes = serde_json::to_vec(vote)
            .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, &e))?;
        self.raft
            .insert(KEY_VOTE, bytes)
            .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, &e))?;
        self.flush(ErrorSubject::Vote).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError> {
        let value = self
            .raft
            .get(KEY_VOTE)
            .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Read, &e))?;
        value
            .map(|v| {
                serde_json::from_slice(&v)
                    .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Read, &e))
            })
            .transpose()
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let result = match committed {
            Some(log_id) => self
                .raft
                .insert(KEY_COMMITTED, &codec::encode_log_id(&log_id)[..]),
            None => self.raft.remove(KEY_COMMITTED),
        };
        result
            .map(|_| ())
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, &e))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        // The committed log id goes to the trees and the entries to the Raft log, and the two
        // reach the disk independently (sled also flushes on its own): after a crash the trees
        // may name an entry this node had not synced yet, which openraft would fail to re-apply
        // at start-up. Claim no more than the log holds; the leader sends the rest again.
        let committed = self.read_log_id(KEY_COMMITTED, ErrorSubject::Store)?;
        let purged = self.read_log_id(KEY_PURGED, ErrorSubject::Store)?;
        let held = self.wal.last(&self.name).max(purged);
        Ok(committed.min(held))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut encoded = Vec::new();
        for entry in entries {
            let bytes = codec::encode_entry(&entry)
                .map_err(|e| io_error(ErrorSubject::Log(entry.log_id), ErrorVerb::Write, &e))?;
            encoded.push((entry.log_id, bytes));
        }
        let count = encoded.len();
        if let Err(e) = self.wal.append(&self.name, encoded) {
            callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
            return Err(io_error(ErrorSubject::Logs, ErrorVerb::Write, &e));
        }
        if crate::mutation::active(crate::mutation::Mutation::AckBeforeFlush) {
            // The deliberate bug: acknowledged at once, made durable some time later.
            callback.log_io_completed(Ok(()));
            let wal = self.wal.clone();
            tokio::spawn(async move { wal.sync().await });
            return Ok(());
        }
        // One sync for everything openraft handed over, and only then the acknowledgement.
        match self.wal.sync().await {
            Ok(_) => {
                tracing::trace!(entries = count, "log entries appended and flushed");
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(io_error(ErrorSubject::Logs, ErrorVerb::Write, &e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Removes every entry from `log_id.index` on (conflicting entries of a former leader).
        self.wal
            .truncate(&self.name, log_id.index)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, &e))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // The marker goes to the trees and the entries are forgotten; the log deletes a segment
        // only after flushing the trees, so the entries never go before their marker is durable
        // (after a crash in between, the entries come back and are purged again).
        self.raft
            .insert(KEY_PURGED, &codec::encode_log_id(&log_id)[..])
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, &e))?;
        self.wal.purge(&self.name, log_id.index);
        // Deleting segments waits for a tree flush, which can take a while on a big state;
        // openraft calls `purge` on the group's core task, so that happens beside it. A failed
        // compaction only leaves segments behind, and the next purge tries again.
        let (wal, db) = (self.wal.clone(), self.db.clone());
        tokio::spawn(async move {
            if let Err(e) = wal.compact(async move { db.flush().await }).await {
                tracing::warn!(error = %e, "raft log compaction failed; the next purge retries");
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Request;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(Request(vec![format!("c{index}").into_bytes()])),
        }
    }

    #[tokio::test]
    async fn a_committed_id_beyond_the_log_reads_back_as_its_last_entry() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open_sled(dir.path()).expect("opens");
        let mut store = LogStore::open(&db, "p0").await.expect("opens");
        assert_eq!(store.read_committed().await.expect("reads"), None);
        let encoded = (1..=5)
            .map(|i| {
                (
                    entry(i).log_id,
                    codec::encode_entry(&entry(i)).expect("encodes"),
                )
            })
            .collect();
        db.raft_log().append("p0", encoded).expect("appends");
        db.raft_log().sync().await.expect("syncs");
        // A committed id beyond what the log holds (the trees reached the disk, the log's
        // last entries did not) is read back as the last entry held.
        store
            .save_committed(Some(LogId::new(CommittedLeaderId::new(1, 1), 9)))
            .await
            .expect("saves");
        assert_eq!(
            store.read_committed().await.expect("reads"),
            Some(entry(5).log_id)
        );
        store
            .save_committed(Some(entry(4).log_id))
            .await
            .expect("saves");
        assert_eq!(
            store.read_committed().await.expect("reads"),
            Some(entry(4).log_id)
        );
    }
}
