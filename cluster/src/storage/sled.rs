//! The sled 0.34 backend of [`super::Db`]: trees are sled trees, batches sled batches, and the
//! default tree is sled's own, so the on-disk layout is what sled writes.

use super::{Backend, Batch, IVec, KvIter, StorageError, StorageResult, TreeBackend, DEFAULT_TREE};
use futures::future::BoxFuture;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

impl From<::sled::Error> for StorageError {
    fn from(e: ::sled::Error) -> Self {
        StorageError(e.to_string())
    }
}

/// A sled database.
pub struct SledBackend {
    db: ::sled::Db,
}

impl SledBackend {
    /// Opens (or creates) the sled database in the directory `path`.
    pub fn open(path: &Path) -> StorageResult<SledBackend> {
        Ok(SledBackend {
            db: ::sled::Config::new().path(path).open()?,
        })
    }
}

impl Backend for SledBackend {
    fn open_tree(&self, name: &str) -> StorageResult<Arc<dyn TreeBackend>> {
        let tree = if name == DEFAULT_TREE {
            // The database's own handle on its default tree (what `sled::Db` derefs to), not
            // a second handle on the same tree from sled's tenant map.
            (*self.db).clone()
        } else {
            self.db.open_tree(name)?
        };
        Ok(Arc::new(SledTree(tree)))
    }

    fn drop_tree(&self, name: &str) -> StorageResult<bool> {
        Ok(self.db.drop_tree(name)?)
    }

    fn tree_names(&self) -> Vec<IVec> {
        self.db.tree_names()
    }

    /// sled 0.34's `flush_async` loses wake-ups when several futures flush the same database at
    /// once (sled issues #1241, #1308: the futures never complete), which is exactly what several
    /// groups on one node do; so the blocking `flush` runs on tokio's blocking pool instead.
    fn flush(&self) -> BoxFuture<'static, StorageResult<()>> {
        let db = self.db.clone();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || db.flush()).await {
                Ok(result) => result.map(|_| ()).map_err(StorageError::from),
                Err(e) => Err(StorageError(format!("flush task: {e}"))),
            }
        })
    }
}

/// A sled tree.
pub struct SledTree(::sled::Tree);

impl TreeBackend for SledTree {
    fn get(&self, key: &[u8]) -> StorageResult<Option<IVec>> {
        Ok(self.0.get(key)?)
    }

    fn insert(&self, key: &[u8], value: IVec) -> StorageResult<()> {
        self.0.insert(key, value)?;
        Ok(())
    }

    fn remove(&self, key: &[u8]) -> StorageResult<()> {
        self.0.remove(key)?;
        Ok(())
    }

    fn range(&self, lo: Bound<IVec>, hi: Bound<IVec>) -> KvIter<'_> {
        Box::new(
            self.0
                .range::<IVec, _>((lo, hi))
                .map(|kv| kv.map_err(StorageError::from)),
        )
    }

    fn last(&self) -> StorageResult<Option<(IVec, IVec)>> {
        Ok(self.0.last()?)
    }

    fn apply_batch(&self, batch: Batch) -> StorageResult<()> {
        let mut writes = ::sled::Batch::default();
        for (key, value) in batch.ops {
            match value {
                Some(value) => writes.insert(key, value),
                None => writes.remove(key),
            }
        }
        Ok(self.0.apply_batch(writes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Db;

    /// A database written through sled directly (as before the seam) reads the same through it.
    #[test]
    fn reads_what_sled_wrote() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let db = ::sled::Config::new().path(dir.path()).open().expect("open");
            db.insert(b"partitions", &[0u8, 8][..]).expect("insert");
            db.open_tree("p0/state")
                .expect("tree")
                .insert(b"k", &b"v"[..])
                .expect("insert");
            db.flush().expect("flush");
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let db = loop {
            match Db::open_sled(dir.path()) {
                Ok(db) => break db,
                Err(_) if std::time::Instant::now() < deadline => std::thread::yield_now(),
                Err(e) => panic!("reopen: {e}"),
            }
        };
        let default = db.default_tree().expect("default");
        assert_eq!(
            default.get(b"partitions").expect("get").as_deref(),
            Some(&[0u8, 8][..])
        );
        assert!(db.tree_names().iter().any(|n| n == b"p0/state"));
        let state = db.open_tree("p0/state").expect("tree");
        assert_eq!(state.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    }
}
