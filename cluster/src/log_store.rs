//! `LogStore`: openraft's storage-v2 log storage (`RaftLogStorage`) over [`crate::storage`]. The
//! log lives in the tree `{name}/log` keyed by big-endian index; the vote, the committed log id and
//! the last purged log id live in `{name}/raft`.
//!
//! Durability: `append` writes everything openraft hands over in one batch, flushes the
//! database once, and only then completes openraft's callback; `save_vote` flushes before it
//! returns. Nothing is acknowledged before its flush. (openraft 0.9 hands over one client write per
//! `append` and waits for its callback before the next, so group commit happens one level up: the
//! [`crate::proposer`] packs concurrent proposals into one entry.) The committed log id and purges
//! are not flushed: losing them in a crash only means re-applying committed entries (which the state
//! machine's own applied log id makes idempotent) or purging again.

// openraft's trait methods return its `StorageError` (224 bytes); helpers return the same type.
#![allow(clippy::result_large_err)]

use crate::codec::{self, KEY_COMMITTED, KEY_PURGED, KEY_VOTE};
use crate::storage::{Batch, Db, StorageResult, Tree};
use crate::types::{Entry, LogId, StorageError, TypeConfig};
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, ErrorSubject, ErrorVerb, LogState, OptionalSend, RaftLogReader, StorageIOError, Vote,
};
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

/// Log and vote storage of one group. Cloning is cheap (storage handles); the clone is also the log
/// reader openraft's replication tasks use.
#[derive(Clone)]
pub struct LogStore {
    /// The whole database: storage flushes per database, so a flush also covers the other groups'
    /// pending writes (harmless).
    db: Db,
    /// `{name}/log`: index (u64 BE) -> encoded entry.
    log: Tree,
    /// `{name}/raft`: vote, committed, purged, snapshot.
    raft: Tree,
}

impl LogStore {
    /// Opens (or creates) the log trees of group `name`.
    pub fn open(db: &Db, name: &str) -> StorageResult<Self> {
        Ok(LogStore {
            db: db.clone(),
            log: db.open_tree(format!("{name}/log"))?,
            raft: db.open_tree(format!("{name}/raft"))?,
        })
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

/// Turns a range of indexes into log key bounds.
fn key_bounds<RB: RangeBounds<u64>>(range: &RB) -> (Bound<[u8; 8]>, Bound<[u8; 8]>) {
    let map = |b: Bound<&u64>| match b {
        Bound::Included(i) => Bound::Included(codec::log_key(*i)),
        Bound::Excluded(i) => Bound::Excluded(codec::log_key(*i)),
        Bound::Unbounded => Bound::Unbounded,
    };
    (map(range.start_bound()), map(range.end_bound()))
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let mut entries = Vec::new();
        for item in self.log.range(key_bounds(&range)) {
            let (key, value) =
                item.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, &e))?;
            let entry = codec::decode_entry(&value).map_err(|e| {
                let index = codec::log_index(&key).unwrap_or_default();
                io_error(ErrorSubject::LogIndex(index), ErrorVerb::Read, &e)
            })?;
            entries.push(entry);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id = self.read_log_id(KEY_PURGED, ErrorSubject::Store)?;
        let last = self
            .log
            .last()
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, &e))?;
        let last_log_id = match last {
            Some((_, value)) => Some(
                codec::decode_entry_log_id(&value)
                    .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, &e))?,
            ),
            None => last_purged_log_id,
        };
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
        self.read_log_id(KEY_COMMITTED, ErrorSubject::Store)
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
        let mut batch = Batch::default();
        let mut count = 0usize;
        for entry in entries {
            count += 1;
            let bytes = codec::encode_entry(&entry)
                .map_err(|e| io_error(ErrorSubject::Log(entry.log_id), ErrorVerb::Write, &e))?;
            batch.insert(&codec::log_key(entry.log_id.index)[..], bytes);
        }
        if let Err(e) = self.log.apply_batch(batch) {
            callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
            return Err(io_error(ErrorSubject::Logs, ErrorVerb::Write, &e));
        }
        if crate::mutation::active(crate::mutation::Mutation::AckBeforeFlush) {
            // The deliberate bug: acknowledged at once, made durable some time later.
            callback.log_io_completed(Ok(()));
            let db = self.db.clone();
            tokio::spawn(async move { db.flush().await });
            return Ok(());
        }
        // One flush for everything openraft handed over, and only then the acknowledgement.
        match self.db.flush().await {
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
        let mut batch = Batch::default();
        for item in self.log.range(codec::log_key(log_id.index)..) {
            let (key, _) = item.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, &e))?;
            batch.remove(key);
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, &e))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // The purge marker is written before the entries go, so a crash in between leaves a
        // consistent view (storage recovers a prefix of its writes): entries at or below the marker
        // are ignored by openraft and purged again.
        self.raft
            .insert(KEY_PURGED, &codec::encode_log_id(&log_id)[..])
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, &e))?;
        let mut batch = Batch::default();
        for item in self.log.range(..=codec::log_key(log_id.index)) {
            let (key, _) = item.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, &e))?;
            batch.remove(key);
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, &e))
    }
}
