//! An in-memory [`LogDir`] that keeps what was synced apart from what was only written, so a
//! test (or the simulator, which wraps it) can crash it and lose a chosen part of the unsynced
//! bytes of each file, as a real file system may. It also keeps the logs its synced bytes hold,
//! so a checker can ask what a crash now would keep ([`MemLogDir::durable_last`]).

use super::format::{self, Logs};
use super::LogDir;
use crate::storage::{StorageError, StorageResult};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

#[derive(Default)]
struct MemFile {
    data: Vec<u8>,
    synced: usize,
}

#[derive(Default)]
struct State {
    files: BTreeMap<u64, MemFile>,
    /// The logs the synced bytes hold, replayed as syncs come in.
    durable: Logs,
}

/// Segment files in memory.
#[derive(Default)]
pub struct MemLogDir {
    state: Mutex<State>,
}

impl MemLogDir {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A crash: each file keeps its synced bytes and `keep(unsynced)` of the bytes written
    /// after them. Returns how many bytes were lost.
    pub fn crash(&self, mut keep: impl FnMut(usize) -> usize) -> u64 {
        let mut state = self.state();
        let mut lost = 0;
        for file in state.files.values_mut() {
            let unsynced = file.data.len() - file.synced;
            let kept = keep(unsynced).min(unsynced);
            lost += (unsynced - kept) as u64;
            file.data.truncate(file.synced + kept);
            file.synced = file.data.len();
        }
        // Everything left is durable now: what the next open replays.
        let files = state
            .files
            .iter()
            .map(|(id, f)| (*id, f.data.clone()))
            .collect();
        state.durable = format::replay(files).map(|r| r.logs).unwrap_or_default();
        lost
    }

    /// The index of `group`'s last entry that a crash now would keep for sure (0: none).
    pub fn durable_last(&self, group: &str) -> u64 {
        self.state()
            .durable
            .get(group)
            .and_then(|log| log.keys().next_back().copied())
            .unwrap_or(0)
    }

    /// How many bytes `segment` holds (0 if it does not exist).
    pub fn len(&self, segment: u64) -> usize {
        self.state().files.get(&segment).map_or(0, |f| f.data.len())
    }

    /// Marks the first `upto` bytes of `segment` synced (`upto` is a record boundary: the
    /// length when a sync began).
    pub fn mark_synced(&self, segment: u64, upto: usize) {
        let mut state = self.state();
        let State { files, durable } = &mut *state;
        let Some(f) = files.get_mut(&segment) else {
            return;
        };
        let upto = upto.min(f.data.len());
        if upto <= f.synced {
            return;
        }
        let from = f.synced.max(format::HEADER_LEN);
        if upto > from {
            let (records, _) = format::records_from(&f.data[..upto], from);
            for record in &records {
                // Bytes this store wrote decode; a checker must not panic on them anyway.
                let _ = format::apply(durable, segment, record);
            }
        }
        f.synced = upto;
    }

    fn missing(segment: u64) -> StorageError {
        StorageError(format!("raft log: no segment {segment}"))
    }
}

impl LogDir for MemLogDir {
    fn list(&self) -> StorageResult<Vec<u64>> {
        Ok(self.state().files.keys().copied().collect())
    }

    fn read(&self, segment: u64) -> StorageResult<Vec<u8>> {
        self.state()
            .files
            .get(&segment)
            .map(|f| f.data.clone())
            .ok_or_else(|| Self::missing(segment))
    }

    fn read_at(&self, segment: u64, offset: u64, len: usize) -> StorageResult<Vec<u8>> {
        let state = self.state();
        let file = state
            .files
            .get(&segment)
            .ok_or_else(|| Self::missing(segment))?;
        let start = offset as usize;
        file.data
            .get(start..start + len)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| StorageError(format!("raft log: read past the end of {segment}")))
    }

    fn create(&self, segment: u64) -> StorageResult<()> {
        match self.state().files.entry(segment) {
            std::collections::btree_map::Entry::Occupied(_) => {
                Err(StorageError(format!("raft log: segment {segment} exists")))
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(MemFile::default());
                Ok(())
            }
        }
    }

    fn append(&self, segment: u64, bytes: &[u8]) -> StorageResult<()> {
        let mut state = self.state();
        let file = state
            .files
            .get_mut(&segment)
            .ok_or_else(|| Self::missing(segment))?;
        file.data.extend_from_slice(bytes);
        Ok(())
    }

    fn cut(&self, segment: u64, len: u64) -> StorageResult<()> {
        let mut state = self.state();
        let file = state
            .files
            .get_mut(&segment)
            .ok_or_else(|| Self::missing(segment))?;
        file.data.truncate(len as usize);
        file.synced = file.data.len();
        Ok(())
    }

    fn sync(&self, segment: u64) -> BoxFuture<'static, StorageResult<()>> {
        let len = self.len(segment);
        self.mark_synced(segment, len);
        Box::pin(async { Ok(()) })
    }

    fn remove(&self, segment: u64) -> StorageResult<()> {
        self.state().files.remove(&segment);
        Ok(())
    }
}
