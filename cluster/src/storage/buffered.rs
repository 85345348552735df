//! A tree whose writes collect in memory and reach its backend tree at checkpoints: a
//! partition's state tree. Every step rewrites its workflow's record, so a workflow that lives a
//! few milliseconds was written to the backend several times; buffered, it is written once, at
//! the next checkpoint. Readers see the buffered writes.
//!
//! Why this loses nothing: the Raft log is durable before anything is applied, and the state
//! tree's bookkeeping (its applied log id) is written through the same buffer. A checkpoint
//! writes the buffer to the backend as one atomic batch, so the backend always holds the state
//! as of some applied entry; after a crash the group replays its log from there. The state store
//! checkpoints before it builds or installs a snapshot, so the log is never purged past the
//! backend's applied entry.

use super::{Batch, IVec, KvIter, StorageResult, TreeBackend};
use std::collections::{BTreeMap, HashSet};
use std::iter::Peekable;
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The buffered writes: the latest of each key (`None`: removed), and their size.
#[derive(Default)]
struct Pending {
    writes: BTreeMap<IVec, Option<IVec>>,
    /// Buffered keys the backend is known to lack (written by [`Batch::insert_fresh`]): removing
    /// one forgets its write instead of buffering a removal.
    fresh: HashSet<IVec>,
    bytes: usize,
}

/// A write-back [`TreeBackend`] over another.
pub struct Buffered {
    base: Arc<dyn TreeBackend>,
    pending: RwLock<Pending>,
}

impl Buffered {
    pub fn new(base: Arc<dyn TreeBackend>) -> Buffered {
        Buffered {
            base,
            pending: RwLock::default(),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Pending> {
        self.pending.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Pending> {
        self.pending.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes of keys and values buffered.
    pub fn pending_bytes(&self) -> usize {
        self.read().bytes
    }

    /// Writes the buffer to the backend tree in one atomic batch. Readers wait meanwhile, so
    /// they never see a key neither in the buffer nor in the backend.
    pub fn checkpoint(&self) -> StorageResult<()> {
        let mut pending = self.write();
        if pending.writes.is_empty() {
            return Ok(());
        }
        let writes = std::mem::take(&mut pending.writes);
        let batch = Batch {
            ops: writes.into_iter().collect(),
            fresh: Vec::new(),
        };
        match self.base.apply_batch(batch.clone()) {
            Ok(()) => {
                pending.bytes = 0;
                pending.fresh.clear();
                Ok(())
            }
            Err(e) => {
                // Keep the writes: nothing reached the backend.
                pending.writes = batch.ops.into_iter().collect();
                Err(e)
            }
        }
    }
}

fn size(key: &IVec, value: &Option<IVec>) -> usize {
    key.len() + value.as_ref().map_or(0, |v| v.len())
}

impl Pending {
    fn put(&mut self, key: IVec, value: Option<IVec>) {
        if value.is_none() && self.fresh.remove(&key) {
            // The backend never had it: nothing to remove there.
            if let Some(old) = self.writes.remove(&key) {
                self.bytes -= size(&key, &old);
            }
            return;
        }
        self.bytes += size(&key, &value);
        if let Some(old) = self.writes.insert(key.clone(), value) {
            self.bytes -= size(&key, &old);
        }
    }
}

impl TreeBackend for Buffered {
    fn get(&self, key: &[u8]) -> StorageResult<Option<IVec>> {
        if let Some(value) = self.read().writes.get(key) {
            return Ok(value.clone());
        }
        self.base.get(key)
    }

    fn insert(&self, key: &[u8], value: IVec) -> StorageResult<()> {
        self.write().put(IVec::from(key), Some(value));
        Ok(())
    }

    fn remove(&self, key: &[u8]) -> StorageResult<()> {
        self.write().put(IVec::from(key), None);
        Ok(())
    }

    fn range(&self, lo: Bound<IVec>, hi: Bound<IVec>) -> KvIter<'_> {
        let buffered: Vec<(IVec, Option<IVec>)> = self
            .read()
            .writes
            .range::<IVec, _>((lo.clone(), hi.clone()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Box::new(Merge {
            buffered: buffered.into_iter().peekable(),
            base: self.base.range(lo, hi).peekable(),
        })
    }

    fn last(&self) -> StorageResult<Option<(IVec, IVec)>> {
        let buffered_last = self
            .read()
            .writes
            .iter()
            .next_back()
            .map(|(k, v)| (k.clone(), v.is_some()));
        let base_last = self.base.last()?;
        match (&buffered_last, &base_last) {
            // The backend's last key is not shadowed by a later or equal buffered key.
            (None, _) => Ok(base_last),
            (Some((k, true)), Some((b, _))) if k >= b => Ok(self.get(k)?.map(|v| (k.clone(), v))),
            (Some((k, true)), None) => Ok(self.get(k)?.map(|v| (k.clone(), v))),
            // Otherwise merge from the start (rare: only when removals are buffered at the end).
            _ => self
                .range(Bound::Unbounded, Bound::Unbounded)
                .last()
                .transpose(),
        }
    }

    fn apply_batch(&self, batch: Batch) -> StorageResult<()> {
        let mut pending = self.write();
        for (key, value) in batch.ops {
            // Fresh only if nothing is buffered for it either: a buffered removal may be hiding
            // the backend's value.
            if value.is_some() && batch.fresh.contains(&key) && !pending.writes.contains_key(&key) {
                pending.fresh.insert(key.clone());
            }
            pending.put(key, value);
        }
        Ok(())
    }
}

/// The buffered writes over the backend's pairs, ascending; a buffered key wins.
struct Merge<'a> {
    buffered: Peekable<std::vec::IntoIter<(IVec, Option<IVec>)>>,
    base: Peekable<KvIter<'a>>,
}

impl Iterator for Merge<'_> {
    type Item = StorageResult<(IVec, IVec)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let take_buffered = match (self.buffered.peek(), self.base.peek()) {
                (None, None) => return None,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(_), Some(Err(_))) => false,
                (Some((k, _)), Some(Ok((b, _)))) => {
                    if k == b {
                        // The buffered write replaces the backend's pair.
                        self.base.next();
                        true
                    } else {
                        k < b
                    }
                }
            };
            if take_buffered {
                let (key, value) = self.buffered.next()?;
                match value {
                    Some(value) => return Some(Ok((key, value))),
                    None => continue,
                }
            }
            return self.base.next();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Db, Tree};

    fn pairs(tree: &Tree) -> Vec<(Vec<u8>, Vec<u8>)> {
        tree.iter()
            .map(|kv| {
                let (k, v) = kv.expect("read");
                (k.to_vec(), v.to_vec())
            })
            .collect()
    }

    #[test]
    fn reads_see_buffered_writes_and_a_checkpoint_moves_them_to_the_backend() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open_sled(dir.path()).expect("open");
        let base = db.open_tree("t").expect("tree");
        for (k, v) in [("a", "1"), ("c", "3"), ("e", "5"), ("g", "7")] {
            base.insert(k, v.as_bytes()).expect("insert");
        }
        let buffered = Arc::new(Buffered::new(base.backend()));
        let tree = Tree::new(buffered.clone());
        let mut batch = Batch::default();
        batch.insert(&b"b"[..], &b"2"[..]);
        batch.remove(&b"c"[..]);
        batch.insert(&b"e"[..], &b"five"[..]);
        batch.remove(&b"g"[..]);
        batch.insert(&b"h"[..], &b"8"[..]);
        batch.remove(&b"h"[..]);
        tree.apply_batch(batch).expect("batch");

        let expected: Vec<(Vec<u8>, Vec<u8>)> = [("a", "1"), ("b", "2"), ("e", "five")]
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(pairs(&tree), expected);
        assert_eq!(tree.get(b"c").expect("get"), None);
        assert_eq!(tree.get(b"e").expect("get").as_deref(), Some(&b"five"[..]));
        assert_eq!(
            tree.last().expect("last").map(|(k, _)| k.to_vec()),
            Some(b"e".to_vec())
        );
        assert_eq!(tree.scan_prefix(b"b").count(), 1);
        // Nothing reached the backend yet.
        assert_eq!(base.get(b"b").expect("get"), None);
        assert!(buffered.pending_bytes() > 0);

        buffered.checkpoint().expect("checkpoint");
        assert_eq!(buffered.pending_bytes(), 0);
        assert_eq!(pairs(&base), expected);
        assert_eq!(pairs(&tree), expected);
        assert_eq!(
            tree.last().expect("last").map(|(k, _)| k.to_vec()),
            Some(b"e".to_vec())
        );
    }

    #[test]
    fn a_fresh_key_removed_before_the_checkpoint_leaves_nothing_for_the_backend() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open_sled(dir.path()).expect("open");
        let base = db.open_tree("t").expect("tree");
        let buffered = Arc::new(Buffered::new(base.backend()));
        let tree = Tree::new(buffered.clone());
        let write = |f: &dyn Fn(&mut Batch)| {
            let mut batch = Batch::default();
            f(&mut batch);
            tree.apply_batch(batch).expect("batch");
        };
        write(&|b| b.insert_fresh(&b"run/1"[..], &b"1"[..]));
        write(&|b| b.insert(&b"run/1"[..], &b"2"[..]));
        assert_eq!(tree.get(b"run/1").expect("get").as_deref(), Some(&b"2"[..]));
        write(&|b| b.remove(&b"run/1"[..]));
        assert_eq!(tree.get(b"run/1").expect("get"), None);
        assert!(buffered.read().writes.is_empty(), "no removal buffered");
        assert_eq!(buffered.pending_bytes(), 0);

        // Once checkpointed, the backend holds it: a removal then reaches it.
        write(&|b| b.insert_fresh(&b"run/2"[..], &b"1"[..]));
        buffered.checkpoint().expect("checkpoint");
        assert!(base.get(b"run/2").expect("get").is_some());
        write(&|b| b.remove(&b"run/2"[..]));
        buffered.checkpoint().expect("checkpoint");
        assert_eq!(base.get(b"run/2").expect("get"), None);
        assert_eq!(tree.get(b"run/2").expect("get"), None);

        // Removed and written anew before a checkpoint: the backend's value is still there, so
        // the key is not fresh and its next removal reaches the backend.
        base.insert(b"run/3", &b"old"[..]).expect("insert");
        write(&|b| b.remove(&b"run/3"[..]));
        write(&|b| b.insert_fresh(&b"run/3"[..], &b"new"[..]));
        write(&|b| b.remove(&b"run/3"[..]));
        buffered.checkpoint().expect("checkpoint");
        assert_eq!(base.get(b"run/3").expect("get"), None);
    }
}
