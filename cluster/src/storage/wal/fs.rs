//! The production [`LogDir`]: segment files `{id:016x}.log` in one directory, locked against a
//! second process. Appends go to the page cache; [`LogDir::sync`] is `fdatasync` on tokio's
//! blocking pool; a new segment's directory entry is synced before the segment is used.

use super::LogDir;
use crate::storage::{StorageError, StorageResult};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

const SUFFIX: &str = ".log";

/// A directory of segment files.
pub struct FsLogDir {
    path: PathBuf,
    files: Mutex<BTreeMap<u64, Arc<File>>>,
    /// Held (locked) while this handle lives.
    _lock: File,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> StorageError {
    StorageError(format!("raft log: {what} {}: {e}", path.display()))
}

impl FsLogDir {
    /// Opens (or creates) the directory `path` and locks it: a second process on the same
    /// directory is refused.
    pub fn open(path: &Path) -> StorageResult<FsLogDir> {
        std::fs::create_dir_all(path).map_err(|e| io("create", path, e))?;
        let lock_path = path.join("LOCK");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| io("open", &lock_path, e))?;
        lock.try_lock().map_err(|e| {
            StorageError(format!(
                "raft log {} is in use by another process ({e})",
                path.display()
            ))
        })?;
        Ok(FsLogDir {
            path: path.to_owned(),
            files: Mutex::default(),
            _lock: lock,
        })
    }

    fn name(&self, segment: u64) -> PathBuf {
        self.path.join(format!("{segment:016x}{SUFFIX}"))
    }

    fn files(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<File>>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The open file of `segment`, opened on first use.
    fn file(&self, segment: u64) -> StorageResult<Arc<File>> {
        let mut files = self.files();
        if let Some(f) = files.get(&segment) {
            return Ok(f.clone());
        }
        let path = self.name(segment);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| io("open", &path, e))?;
        let file = Arc::new(file);
        files.insert(segment, file.clone());
        Ok(file)
    }

    fn sync_dir(&self) -> StorageResult<()> {
        File::open(&self.path)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("sync", &self.path, e))
    }
}

impl LogDir for FsLogDir {
    fn list(&self) -> StorageResult<Vec<u64>> {
        let mut ids = Vec::new();
        for item in std::fs::read_dir(&self.path).map_err(|e| io("list", &self.path, e))? {
            let item = item.map_err(|e| io("list", &self.path, e))?;
            let name = item.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(SUFFIX)) else {
                continue;
            };
            if let Ok(id) = u64::from_str_radix(stem, 16) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    fn read(&self, segment: u64) -> StorageResult<Vec<u8>> {
        let path = self.name(segment);
        std::fs::read(&path).map_err(|e| io("read", &path, e))
    }

    fn read_at(&self, segment: u64, offset: u64, len: usize) -> StorageResult<Vec<u8>> {
        let mut buf = vec![0; len];
        self.file(segment)?
            .read_exact_at(&mut buf, offset)
            .map_err(|e| io("read", &self.name(segment), e))?;
        Ok(buf)
    }

    fn create(&self, segment: u64) -> StorageResult<()> {
        let path = self.name(segment);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io("create", &path, e))?;
        self.sync_dir()?;
        self.files().insert(segment, Arc::new(file));
        Ok(())
    }

    fn append(&self, segment: u64, bytes: &[u8]) -> StorageResult<()> {
        (&*self.file(segment)?)
            .write_all(bytes)
            .map_err(|e| io("write", &self.name(segment), e))
    }

    fn cut(&self, segment: u64, len: u64) -> StorageResult<()> {
        let file = self.file(segment)?;
        file.set_len(len)
            .and_then(|_| file.sync_all())
            .map_err(|e| io("cut", &self.name(segment), e))
    }

    fn sync(&self, segment: u64) -> BoxFuture<'static, StorageResult<()>> {
        // A segment removed meanwhile has nothing left to sync.
        let file = self.files().get(&segment).cloned();
        let path = self.name(segment);
        Box::pin(async move {
            let Some(file) = file else { return Ok(()) };
            match tokio::task::spawn_blocking(move || file.sync_data()).await {
                Ok(result) => result.map_err(|e| io("sync", &path, e)),
                Err(e) => Err(StorageError(format!("raft log sync task: {e}"))),
            }
        })
    }

    fn remove(&self, segment: u64) -> StorageResult<()> {
        self.files().remove(&segment);
        let path = self.name(segment);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("remove", &path, e)),
            _ => Ok(()),
        }
    }
}
