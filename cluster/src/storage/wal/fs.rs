//! The production [`LogDir`]: segment files `{id:016x}.log` in one directory, locked against a
//! second process. Appends go to the page cache; [`LogDir::sync`] is `fdatasync` on tokio's
//! blocking pool; a new segment's directory entry is synced before the segment is used.
//!
//! A segment this process writes is zero-filled ahead of its writes, [`ZERO_AHEAD`] bytes at a
//! time, by a thread of its own that syncs the zeros: an `fdatasync` after an append that grew
//! the file must also commit the file's new size and blocks through the file system's journal
//! (on ext4 about twice as long, and serialised with every other file's journal commits), while
//! one after writes into blocks already written commits only the data. Replaying a segment stops
//! at its zero tail, which is not a torn write (see [`super::format`]).

use super::LogDir;
use crate::storage::{StorageError, StorageResult};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

const SUFFIX: &str = ".log";

/// How far ahead of its writes a segment is zero-filled.
pub const ZERO_AHEAD: u64 = 1 << 20;

/// A directory of segment files.
pub struct FsLogDir {
    path: PathBuf,
    files: Mutex<BTreeMap<u64, Arc<Segment>>>,
    zero_ahead: u64,
    /// Held (locked) while this handle lives.
    _lock: File,
}

/// An open segment file.
struct Segment {
    file: File,
    path: PathBuf,
    /// Where this process writes (segments it did not create are only read).
    writes: Mutex<Writes>,
    /// Signalled when a zero fill ends.
    filled: Condvar,
}

#[derive(Default)]
struct Writes {
    /// Where the next append goes.
    end: u64,
    /// The end of the zero-filled range (0: none filled yet).
    filled_to: u64,
    /// The start of the range a zero fill is writing: appends stay below it until it ends.
    filling: Option<u64>,
    /// No zero fills (a segment this process did not create, or a fill failed).
    no_fill: bool,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> StorageError {
    StorageError(format!("raft log: {what} {}: {e}", path.display()))
}

impl FsLogDir {
    /// Opens (or creates) the directory `path` and locks it: a second process on the same
    /// directory is refused.
    pub fn open(path: &Path) -> StorageResult<FsLogDir> {
        Self::open_with(path, ZERO_AHEAD)
    }

    /// [`FsLogDir::open`], zero-filling `zero_ahead` bytes ahead of the writes (0: never).
    pub fn open_with(path: &Path, zero_ahead: u64) -> StorageResult<FsLogDir> {
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
            // Whole pages, so that every fill starts on a page boundary.
            zero_ahead: zero_ahead.next_multiple_of(4096),
            _lock: lock,
        })
    }

    fn name(&self, segment: u64) -> PathBuf {
        self.path.join(format!("{segment:016x}{SUFFIX}"))
    }

    fn files(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<Segment>>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The open file of `segment`, opened on first use.
    fn segment(&self, segment: u64) -> StorageResult<Arc<Segment>> {
        let mut files = self.files();
        if let Some(f) = files.get(&segment) {
            return Ok(f.clone());
        }
        let path = self.name(segment);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| io("open", &path, e))?;
        let seg = Arc::new(Segment::new(file, path, true));
        files.insert(segment, seg.clone());
        Ok(seg)
    }

    fn sync_dir(&self) -> StorageResult<()> {
        File::open(&self.path)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("sync", &self.path, e))
    }
}

impl Segment {
    fn new(file: File, path: PathBuf, no_fill: bool) -> Segment {
        Segment {
            file,
            path,
            writes: Mutex::new(Writes {
                no_fill,
                ..Writes::default()
            }),
            filled: Condvar::new(),
        }
    }

    fn writes(&self) -> MutexGuard<'_, Writes> {
        self.writes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `bytes` at the end, first waiting for a zero fill that the write would reach, and
    /// starts the next fill of `ahead` bytes once the writes come within half of that of the
    /// filled range's end. The first fill starts half of `ahead` past the writes (until the
    /// writes reach it, they grow the file as a plain append does), so no append waits for it.
    fn append(self: &Arc<Self>, bytes: &[u8], ahead: u64) -> StorageResult<()> {
        let mut w = self.writes();
        let end = w.end + bytes.len() as u64;
        while w.filling.is_some_and(|from| end > from) {
            w = self.filled.wait(w).unwrap_or_else(|e| e.into_inner());
        }
        self.file
            .write_all_at(bytes, w.end)
            .map_err(|e| io("write", &self.path, e))?;
        w.end = end;
        if ahead > 0 && !w.no_fill && w.filling.is_none() && end + ahead / 2 > w.filled_to {
            let next = match w.filled_to {
                0 => end + ahead / 2,
                filled => filled,
            };
            // Page-aligned, so a fill never shares a block with an append.
            let from = next.max(end).next_multiple_of(4096);
            w.filling = Some(from);
            let seg = self.clone();
            let spawned = std::thread::Builder::new()
                .name("raft-log-fill".into())
                .spawn(move || seg.fill(from, ahead));
            if spawned.is_err() {
                w.filling = None;
                w.no_fill = true;
            }
        }
        Ok(())
    }

    /// Writes `len` zeros at `from` and syncs them, a little at a time: an `fdatasync` of the
    /// log meanwhile writes back every dirty page of the file, so it never finds more than one
    /// piece of zeros to write besides the log's own bytes.
    fn fill(&self, from: u64, len: u64) {
        const PIECE: usize = 64 << 10;
        let zeros = vec![0u8; PIECE];
        let mut at = from;
        let mut result = Ok(());
        while at < from + len && result.is_ok() {
            let n = PIECE.min((from + len - at) as usize);
            result = self
                .file
                .write_all_at(&zeros[..n], at)
                .and_then(|()| self.file.sync_data());
            at += n as u64;
        }
        let mut w = self.writes();
        w.filling = None;
        match result {
            Ok(()) => w.filled_to = from + len,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "raft log: zero fill failed; the segment grows by its appends");
                w.no_fill = true;
            }
        }
        self.filled.notify_all();
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
        let seg = self.segment(segment)?;
        seg.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| io("read", &seg.path, e))?;
        Ok(buf)
    }

    fn create(&self, segment: u64) -> StorageResult<()> {
        let path = self.name(segment);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io("create", &path, e))?;
        self.sync_dir()?;
        let seg = Segment::new(file, path, self.zero_ahead == 0);
        self.files().insert(segment, Arc::new(seg));
        Ok(())
    }

    fn append(&self, segment: u64, bytes: &[u8]) -> StorageResult<()> {
        self.segment(segment)?.append(bytes, self.zero_ahead)
    }

    fn cut(&self, segment: u64, len: u64) -> StorageResult<()> {
        let seg = self.segment(segment)?;
        seg.file
            .set_len(len)
            .and_then(|_| seg.file.sync_all())
            .map_err(|e| io("cut", &seg.path, e))
    }

    fn sync(&self, segment: u64) -> BoxFuture<'static, StorageResult<()>> {
        // A segment removed meanwhile has nothing left to sync.
        let seg = self.files().get(&segment).cloned();
        Box::pin(async move {
            let Some(seg) = seg else { return Ok(()) };
            match tokio::task::spawn_blocking(move || {
                seg.file.sync_data().map_err(|e| io("sync", &seg.path, e))
            })
            .await
            {
                Ok(result) => result,
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
