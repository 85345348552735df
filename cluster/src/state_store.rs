//! `StateStore`: openraft's storage-v2 state machine (`RaftStateMachine`) over the tree
//! `{name}/state`. It hands each committed command to the node's [`StateMachine`] and writes the
//! command's writes together with the cluster's bookkeeping (last applied log id, progress inside a
//! batched entry, membership; keys prefixed `0x00`) in one atomic batch, so a replay after a
//! crash resumes exactly after the last command whose writes survived.
//!
//! Apply does not flush: the log is durable and openraft re-applies it from the last applied id.
//! Building, reading and installing a snapshot checkpoint and flush, because each allows the log
//! to be purged up to the snapshot (see [`crate::snapshot`]).

// openraft's trait methods return its `StorageError` (224 bytes); helpers return the same type.
#![allow(clippy::result_large_err)]

use crate::codec::{self, KEY_APPLIED, KEY_MEMBERSHIP, KEY_PARTIAL};
use crate::log_store::io_error;
use crate::metrics;
use crate::snapshot::{self, SnapshotBuilder, SnapshotSlot};
use crate::state_machine::StateMachine;
use crate::storage::buffered::Buffered;
use crate::storage::{Batch, Db, StorageResult, Tree};
use crate::types::{
    Entry, LogId, Response, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, Snapshot};
use std::io::Cursor;
use std::sync::Arc;

/// The state machine side of one group.
pub struct StateStore {
    /// `{name}/state`: the node's keys plus bookkeeping, read and written through `buffered`
    /// (see [`crate::storage::buffered`]).
    state: Tree,
    buffered: Arc<Buffered>,
    /// Entries applied since the last checkpoint.
    unchecked: u64,
    /// Checkpoint after this many (at least one).
    checkpoint_entries: u64,
    /// Where the current snapshot is kept.
    slot: SnapshotSlot,
    /// The node's state machine.
    sm: Arc<dyn StateMachine>,
    /// The group's name, the label of its metrics.
    group: String,
}

impl StateStore {
    /// Opens (or creates) the state and raft trees of group `name`.
    pub fn open(
        db: &Db,
        name: &str,
        checkpoint_entries: u64,
        sm: Arc<dyn StateMachine>,
    ) -> StorageResult<Self> {
        let buffered = Arc::new(Buffered::new(
            db.open_tree(format!("{name}/state"))?.backend(),
        ));
        Ok(StateStore {
            state: Tree::new(buffered.clone()),
            buffered,
            unchecked: 0,
            checkpoint_entries: checkpoint_entries.max(1),
            slot: SnapshotSlot::new(db, db.open_tree(format!("{name}/raft"))?),
            sm,
            group: name.to_owned(),
        })
    }

    /// The state tree.
    pub fn state(&self) -> &Tree {
        &self.state
    }

    fn read_applied(&self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let subject = || ErrorSubject::StateMachine;
        let applied = self
            .state
            .get(KEY_APPLIED)
            .map_err(|e| io_error(subject(), ErrorVerb::Read, &e))?
            .map(|v| codec::decode_log_id(&v).map_err(|e| io_error(subject(), ErrorVerb::Read, &e)))
            .transpose()?;
        let membership = self
            .state
            .get(KEY_MEMBERSHIP)
            .map_err(|e| io_error(subject(), ErrorVerb::Read, &e))?
            .map(|v| {
                serde_json::from_slice(&v).map_err(|e| io_error(subject(), ErrorVerb::Read, &e))
            })
            .transpose()?
            .unwrap_or_default();
        Ok((applied, membership))
    }
}

/// A state store writes its buffered state to the backend once this many bytes are buffered,
/// or after `GroupOptions::state_checkpoint_entries` applied entries, whichever comes first.
const CHECKPOINT_BYTES: usize = 4 << 20;

impl StateStore {
    /// Writes the buffered state to the backend tree (see [`crate::storage::buffered`]).
    fn checkpoint(&mut self) -> Result<(), StorageError> {
        self.unchecked = 0;
        self.buffered
            .checkpoint()
            .map_err(|e| io_error(ErrorSubject::StateMachine, ErrorVerb::Write, &e))
    }

    /// Applies the commands of one normal entry, each in its own atomic batch so that the next
    /// command sees its writes. Progress inside the entry is recorded with each batch, so a replay
    /// after a crash skips the commands already applied (their answers went to nobody: the
    /// proposer was not told before the whole entry applied).
    fn apply_commands(
        &self,
        log_id: &LogId,
        commands: Vec<Vec<u8>>,
    ) -> Result<Vec<Vec<u8>>, StorageError> {
        let subject = || ErrorSubject::Apply(*log_id);
        let done = match self
            .state
            .get(KEY_PARTIAL)
            .map_err(|e| io_error(subject(), ErrorVerb::Read, &e))?
        {
            Some(bytes) => {
                let (partial_id, applied) = codec::decode_partial(&bytes)
                    .map_err(|e| io_error(subject(), ErrorVerb::Read, &e))?;
                if partial_id == *log_id {
                    applied as usize
                } else {
                    0
                }
            }
            None => 0,
        };
        let total = commands.len();
        let mut responses = vec![Vec::new(); done.min(total)];
        if total == 0 || done >= total {
            self.finish_entry(log_id, Batch::default())?;
            return Ok(responses);
        }
        for (position, command) in commands.into_iter().enumerate().skip(done) {
            let mut batch = Batch::default();
            responses.push(self.sm.apply(&self.state, &mut batch, &command));
            if position + 1 == total {
                self.finish_entry(log_id, batch)?;
            } else {
                // `total` fits in u32: batch_commands_max is checked against it.
                batch.insert(
                    KEY_PARTIAL,
                    codec::encode_partial(log_id, (position + 1) as u32),
                );
                self.state
                    .apply_batch(batch)
                    .map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
            }
        }
        Ok(responses)
    }

    /// Applies `batch` together with "entry `log_id` is applied". Inserted last so that the
    /// bookkeeping wins over anything a state machine put under the reserved prefix.
    fn finish_entry(&self, log_id: &LogId, mut batch: Batch) -> Result<(), StorageError> {
        batch.remove(KEY_PARTIAL);
        batch.insert(KEY_APPLIED, &codec::encode_log_id(log_id)[..]);
        self.state
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Apply(*log_id), ErrorVerb::Write, &e))
    }
}

impl RaftStateMachine<TypeConfig> for StateStore {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        self.read_applied()
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let started = std::time::Instant::now();
        let mut responses = Vec::new();
        for entry in entries {
            let log_id = entry.log_id;
            let subject = || ErrorSubject::Apply(log_id);
            let response = match entry.payload {
                EntryPayload::Normal(request) => {
                    let commands = crate::pack::unpack(request.0)
                        .map_err(|e| io_error(subject(), ErrorVerb::Read, &e))?;
                    self.apply_commands(&log_id, commands)?
                }
                EntryPayload::Membership(membership) => {
                    let stored = StoredMembership::new(Some(log_id), membership);
                    let json = serde_json::to_vec(&stored)
                        .map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
                    let mut batch = Batch::default();
                    batch.insert(KEY_MEMBERSHIP, json);
                    self.finish_entry(&log_id, batch)?;
                    Vec::new()
                }
                EntryPayload::Blank => {
                    self.finish_entry(&log_id, Batch::default())?;
                    Vec::new()
                }
            };
            responses.push(Response(response));
            self.unchecked += 1;
        }
        if self.unchecked >= self.checkpoint_entries
            || self.buffered.pending_bytes() >= CHECKPOINT_BYTES
        {
            self.checkpoint()?;
        }
        metrics::timed(metrics::APPLY_SECONDS, &self.group, started.elapsed());
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // Runs on openraft's state machine worker, between two applies. The log is purged up to
        // the point recorded: the state up to it must be in the backend first (the builder's
        // save flushes it). A failed checkpoint fails the build.
        metrics::count(metrics::SNAPSHOT_BUILDS, &self.group);
        let meta = self.checkpoint().and_then(|()| self.read_applied());
        SnapshotBuilder {
            meta: meta.map(|(applied, membership)| self.slot.new_meta(applied, membership)),
            slot: self.slot.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        data: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        metrics::count(metrics::SNAPSHOT_INSTALLS, &self.group);
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        let bytes = data.into_inner();
        let pairs =
            snapshot::decode(&bytes).map_err(|e| io_error(subject(), ErrorVerb::Read, &e))?;
        // One batch: every old key goes, the snapshot's keys and bookkeeping come, atomically.
        let mut batch = Batch::default();
        for kv in self.state.iter() {
            let (key, _) = kv.map_err(|e| io_error(subject(), ErrorVerb::Read, &e))?;
            batch.remove(key);
        }
        for (key, value) in pairs {
            batch.insert(key, value);
        }
        snapshot::bookkeeping(&mut batch, meta.last_log_id.as_ref(), &meta.last_membership)
            .map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
        self.state
            .apply_batch(batch)
            .map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
        self.checkpoint()?;
        self.slot.save(meta).await?;
        tracing::info!(snapshot = %meta, "snapshot installed");
        self.sm.restored(&self.state);
        Ok(())
    }

    /// The state as it is now, once a snapshot has been built or installed (before that there
    /// is none, and no purged log to stand in for). See [`crate::snapshot`] for why it is the
    /// present state rather than the last recorded point.
    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let Some(stored) = self.slot.meta()? else {
            return Ok(None);
        };
        self.checkpoint()?;
        let (applied, membership) = self.read_applied()?;
        if applied < stored.last_log_id {
            // Every recorded point was flushed with the state at or after it: this is damage.
            return Err(io_error(
                ErrorSubject::Snapshot(Some(stored.signature())),
                ErrorVerb::Read,
                &crate::codec::DecodeError {
                    what: "state",
                    why: format!("applied {applied:?} is behind the recorded snapshot"),
                },
            ));
        }
        let meta = if stored.last_log_id == applied {
            stored
        } else {
            self.slot.new_meta(applied, membership)
        };
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        let data = snapshot::encode(snapshot::state_pairs(&self.state))
            .map_err(|e| io_error(subject(), ErrorVerb::Read, &e))?;
        self.slot.save(&meta).await?;
        tracing::debug!(snapshot = %meta, bytes = data.len(), "snapshot read");
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
