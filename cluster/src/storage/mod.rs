//! The storage seam: every key/value access of the cluster and node crates goes through [`Db`] and
//! [`Tree`], which wrap a [`Backend`]. Production runs on sled 0.34 ([`Db::open_sled`], module
//! [`sled`]); the deterministic simulator substitutes an in-memory disk through [`Db::new`].
//!
//! The model is sled's: a database of named trees, each an ordered map from bytes to bytes; a
//! [`Batch`] applies atomically to one tree; nothing is durable before [`Db::flush`] resolves, and
//! a crash keeps a prefix of the writes made before it (a backend must not reorder writes across a
//! flush).

pub mod buffered;
mod flusher;
pub mod sled;
pub mod wal;

use futures::future::BoxFuture;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

/// The key and value type of every backend: cheap to clone, inline when short.
pub use ::sled::IVec;

/// A storage backend failed to read or write (the message says why).
#[derive(Debug, Clone, thiserror::Error)]
#[error("storage: {0}")]
pub struct StorageError(pub String);

impl From<crate::codec::DecodeError> for StorageError {
    fn from(e: crate::codec::DecodeError) -> Self {
        StorageError(e.to_string())
    }
}

/// The result of a storage operation.
pub type StorageResult<T> = std::result::Result<T, StorageError>;

/// An iterator over key/value pairs, ascending by key.
pub type KvIter<'a> = Box<dyn Iterator<Item = StorageResult<(IVec, IVec)>> + Send + 'a>;

/// The name of the default tree ([`Db::default_tree`]): sled's own default tree, so data
/// directories written before the seam keep their keys.
pub const DEFAULT_TREE: &str = "__sled__default";

/// One ordered write: `Some(value)` inserts, `None` removes. Applied in order, atomically (a later
/// write of the same key wins).
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub ops: Vec<(IVec, Option<IVec>)>,
    /// Keys the writer knows the tree held no value for before this batch ([`Batch::insert_fresh`]).
    /// Only a write-back tree uses it; other backends apply `ops` alone.
    pub fresh: Vec<IVec>,
}

impl Batch {
    /// Sets `key` to `value`.
    pub fn insert(&mut self, key: impl Into<IVec>, value: impl Into<IVec>) {
        self.ops.push((key.into(), Some(value.into())));
    }

    /// Sets `key`, which the caller knows the tree holds no value for, to `value`. A write-back
    /// tree (`buffered`) that sees the key removed before its next checkpoint then forgets both
    /// writes instead of asking its backend to remove a key it never had.
    pub fn insert_fresh(&mut self, key: impl Into<IVec>, value: impl Into<IVec>) {
        let key = key.into();
        self.fresh.push(key.clone());
        self.ops.push((key, Some(value.into())));
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: impl Into<IVec>) {
        self.ops.push((key.into(), None));
    }

    /// Whether the batch writes nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// How many writes the batch holds.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
}

/// A database of named trees.
pub trait Backend: Send + Sync + 'static {
    /// Opens the tree `name`, creating it if absent.
    fn open_tree(&self, name: &str) -> StorageResult<Arc<dyn TreeBackend>>;
    /// Deletes the tree `name` and its keys; false if there was none.
    fn drop_tree(&self, name: &str) -> StorageResult<bool>;
    /// The names of the existing trees.
    fn tree_names(&self) -> Vec<IVec>;
    /// Makes every write so far durable. Nothing acknowledged before this resolves.
    fn flush(&self) -> BoxFuture<'static, StorageResult<()>>;
}

/// One ordered map of a [`Backend`].
pub trait TreeBackend: Send + Sync + 'static {
    fn get(&self, key: &[u8]) -> StorageResult<Option<IVec>>;
    fn insert(&self, key: &[u8], value: IVec) -> StorageResult<()>;
    fn remove(&self, key: &[u8]) -> StorageResult<()>;
    /// The pairs between the bounds, ascending.
    fn range(&self, lo: Bound<IVec>, hi: Bound<IVec>) -> KvIter<'_>;
    /// The pair with the largest key.
    fn last(&self) -> StorageResult<Option<(IVec, IVec)>>;
    /// Applies `batch`'s writes in order, atomically.
    fn apply_batch(&self, batch: Batch) -> StorageResult<()>;
}

/// Cheap cloneable handle to a node's storage: a database of named trees, and the Raft log
/// every group of the node shares ([`wal::Wal`]).
#[derive(Clone)]
pub struct Db {
    backend: Arc<dyn Backend>,
    flusher: Arc<flusher::Flusher>,
    log: Arc<wal::Wal>,
}

/// The Raft log's directory inside a data directory.
pub const LOG_DIR: &str = "raft-log";

impl Db {
    /// Storage on `backend`, with the Raft log opened (replayed) from `log`.
    pub fn new(
        backend: Arc<dyn Backend>,
        log: Arc<dyn wal::LogDir>,
        segment_bytes: u64,
    ) -> StorageResult<Db> {
        Ok(Db {
            backend,
            flusher: Arc::default(),
            log: Arc::new(wal::Wal::open(log, segment_bytes)?),
        })
    }

    /// Opens (or creates) the storage in the directory `path`: the sled database there, and
    /// the Raft log in its [`LOG_DIR`].
    pub fn open_sled(path: &Path) -> StorageResult<Db> {
        let backend = Arc::new(sled::SledBackend::open(path)?);
        let log = Arc::new(wal::fs::FsLogDir::open(&path.join(LOG_DIR))?);
        Db::new(backend, log, wal::SEGMENT_BYTES)
    }

    /// The Raft log of every group.
    pub fn raft_log(&self) -> &Arc<wal::Wal> {
        &self.log
    }

    /// Opens the tree `name`, creating it if absent.
    pub fn open_tree(&self, name: impl AsRef<str>) -> StorageResult<Tree> {
        self.backend.open_tree(name.as_ref()).map(Tree)
    }

    /// Deletes the tree `name` and its keys; false if there was none.
    pub fn drop_tree(&self, name: impl AsRef<str>) -> StorageResult<bool> {
        self.backend.drop_tree(name.as_ref())
    }

    /// The names of the existing trees.
    pub fn tree_names(&self) -> Vec<IVec> {
        self.backend.tree_names()
    }

    /// The tree named [`DEFAULT_TREE`].
    pub fn default_tree(&self) -> StorageResult<Tree> {
        self.open_tree(DEFAULT_TREE)
    }

    /// Flushes of the tree database plus `fdatasync`s of the Raft log since they were opened
    /// (for `batonctl bench`).
    pub fn flushes(&self) -> u64 {
        self.flusher.flushes() + self.log.syncs()
    }

    /// Why this storage can make nothing durable any more, if so: a tree flush failed, or the
    /// Raft log failed a write or a sync. Every group of the node shares both, so this fails them
    /// all, unlike an error of one group's own trees.
    pub fn failure(&self) -> Option<StorageError> {
        self.flusher.failure().or_else(|| self.log.failure())
    }

    /// Makes every tree write so far durable (all trees; the Raft log syncs on its own).
    /// Concurrent callers share flushes: one that began after a caller's writes serves it (see
    /// [`flusher`]). A slow flush is logged.
    pub async fn flush(&self) -> StorageResult<()> {
        let backend = self.backend.clone();
        self.flusher.flush(move || backend.flush()).await
    }
}

/// Cheap cloneable handle to one tree of a [`Db`].
#[derive(Clone)]
pub struct Tree(Arc<dyn TreeBackend>);

/// Turns a borrowed key bound into an owned one.
fn owned_bound<K: AsRef<[u8]>>(bound: Bound<&K>) -> Bound<IVec> {
    match bound {
        Bound::Included(k) => Bound::Included(IVec::from(k.as_ref())),
        Bound::Excluded(k) => Bound::Excluded(IVec::from(k.as_ref())),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Tree {
    /// A tree on `backend`.
    pub fn new(backend: Arc<dyn TreeBackend>) -> Tree {
        Tree(backend)
    }

    /// The backend this tree reads and writes.
    pub fn backend(&self) -> Arc<dyn TreeBackend> {
        self.0.clone()
    }

    pub fn get(&self, key: impl AsRef<[u8]>) -> StorageResult<Option<IVec>> {
        self.0.get(key.as_ref())
    }

    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> StorageResult<bool> {
        self.get(key).map(|v| v.is_some())
    }

    pub fn insert(&self, key: impl AsRef<[u8]>, value: impl Into<IVec>) -> StorageResult<()> {
        self.0.insert(key.as_ref(), value.into())
    }

    pub fn remove(&self, key: impl AsRef<[u8]>) -> StorageResult<()> {
        self.0.remove(key.as_ref())
    }

    /// The pairs whose keys are in `range`, ascending.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> KvIter<'_> {
        self.0.range(
            owned_bound(range.start_bound()),
            owned_bound(range.end_bound()),
        )
    }

    /// The pairs whose keys start with `prefix`, ascending.
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> KvIter<'_> {
        let prefix = prefix.as_ref();
        // The smallest key above every key with the prefix: the prefix without its trailing 0xff
        // bytes, last byte plus one. None (all 0xff, or empty): no upper bound.
        let mut upper = prefix.to_vec();
        while let Some(last) = upper.pop() {
            if last < u8::MAX {
                upper.push(last + 1);
                return self.range(prefix..upper.as_slice());
            }
        }
        self.range(prefix..)
    }

    /// Every pair, ascending.
    pub fn iter(&self) -> KvIter<'_> {
        self.0.range(Bound::Unbounded, Bound::Unbounded)
    }

    /// The pair with the smallest key.
    pub fn first(&self) -> StorageResult<Option<(IVec, IVec)>> {
        self.iter().next().transpose()
    }

    /// The pair with the largest key.
    pub fn last(&self) -> StorageResult<Option<(IVec, IVec)>> {
        self.0.last()
    }

    /// Applies `batch`'s writes in order, atomically.
    pub fn apply_batch(&self, batch: Batch) -> StorageResult<()> {
        self.0.apply_batch(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(iter: KvIter<'_>) -> Vec<Vec<u8>> {
        iter.map(|kv| kv.expect("read").0.to_vec()).collect()
    }

    #[tokio::test]
    async fn sled_backend_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open_sled(dir.path()).expect("open");
        let tree = db.open_tree("t").expect("tree");
        let mut batch = Batch::default();
        batch.insert(&b"a"[..], &b"1"[..]);
        batch.insert(&b"b\xff"[..], &b"2"[..]);
        batch.insert(&b"b\xff\x00"[..], &b"3"[..]);
        batch.insert(&b"c"[..], &b"4"[..]);
        batch.remove(&b"a"[..]);
        batch.insert(&b"d"[..], &b"x"[..]);
        batch.insert(&b"d"[..], &b"5"[..]);
        assert_eq!(batch.len(), 7);
        tree.apply_batch(batch).expect("batch");
        assert!(tree.get(b"a").expect("get").is_none());
        assert_eq!(tree.get(b"d").expect("get").as_deref(), Some(&b"5"[..]));
        assert_eq!(
            keys(tree.scan_prefix(b"b\xff")),
            vec![b"b\xff".to_vec(), b"b\xff\x00".to_vec()]
        );
        assert_eq!(keys(tree.range(&b"b\xff\x00"[..]..&b"d"[..])).len(), 2);
        assert_eq!(keys(tree.scan_prefix(b"")).len(), 4);
        assert_eq!(
            tree.first().expect("first").map(|(k, _)| k),
            Some(IVec::from(&b"b\xff"[..]))
        );
        assert_eq!(
            tree.last().expect("last").map(|(k, _)| k),
            Some(IVec::from(&b"d"[..]))
        );
        db.default_tree()
            .expect("default")
            .insert(b"k", &b"v"[..])
            .expect("insert");
        db.flush().await.expect("flush");
        assert!(db.tree_names().iter().any(|n| n == b"t"));
        assert!(db.drop_tree("t").expect("drop"));
        assert!(!db.drop_tree("t").expect("drop"));
        drop(tree);
        drop(db);

        // sled's background threads release the directory's lock shortly after the last handle.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let db = loop {
            match Db::open_sled(dir.path()) {
                Ok(db) => break db,
                Err(_) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                Err(e) => panic!("reopen: {e}"),
            }
        };
        assert_eq!(
            db.default_tree()
                .expect("default")
                .get(b"k")
                .expect("get")
                .as_deref(),
            Some(&b"v"[..])
        );
    }
}
