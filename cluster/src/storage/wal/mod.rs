//! The Raft log of every group of a node, in one append-only file: every group
//! appends its entries to the same segment, and one `fdatasync` makes the appends of all groups
//! durable (group commit across partitions). Entries stay in memory for a while after they are
//! written, because followers and the state machine read them right away; older ones are read
//! back from their segment.
//!
//! What is where:
//! - the segment files ([`format`]) hold entries, truncations and drops; replaying them at open
//!   rebuilds every group's log;
//! - each group's vote, committed and purged log ids stay in the node's tree database
//!   ([`crate::log_store`]): votes are rare, and the purge marker must be durable before the
//!   entries it covers disappear from the files, which [`Wal::compact`] ensures by flushing the
//!   trees before it deletes a segment;
//! - purging is only forgetting in memory; a segment is deleted once none of its entries is
//!   live, oldest first (so a truncation or drop never outlives what it removes). An old segment
//!   kept by a few live entries of a quiet group has them copied into the current segment first.
//!
//! [`LogDir`] is the file seam: [`fs::FsLogDir`] in production, the simulator's disk in the
//! simulator (which loses a seeded part of what was written and not synced at a crash).

pub mod format;
pub mod fs;
pub mod mem;

use super::flusher::Flusher;
use super::{StorageError, StorageResult};
use crate::types::LogId;
use format::{Located, Op};
use futures::future::BoxFuture;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::RangeBounds;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The default segment size: a segment is closed once it holds this much, and the next write
/// starts a new one.
pub const SEGMENT_BYTES: u64 = 64 << 20;
/// Entry bytes each group keeps in memory after writing them.
const CACHE_BYTES: usize = 4 << 20;

/// The files of a log: numbered segments, each written only at its end.
pub trait LogDir: Send + Sync + 'static {
    /// The segments present, ascending.
    fn list(&self) -> StorageResult<Vec<u64>>;
    /// The whole of `segment`.
    fn read(&self, segment: u64) -> StorageResult<Vec<u8>>;
    /// `len` bytes of `segment` from `offset`.
    fn read_at(&self, segment: u64, offset: u64, len: usize) -> StorageResult<Vec<u8>>;
    /// Creates the empty `segment`; it exists after a crash once this returns.
    fn create(&self, segment: u64) -> StorageResult<()>;
    /// Appends to `segment` (durable only after a [`LogDir::sync`] that began after it).
    fn append(&self, segment: u64, bytes: &[u8]) -> StorageResult<()>;
    /// Cuts `segment` back to `len` bytes, durably.
    fn cut(&self, segment: u64, len: u64) -> StorageResult<()>;
    /// Makes everything appended to `segment` so far durable (a removed segment: nothing to do).
    fn sync(&self, segment: u64) -> BoxFuture<'static, StorageResult<()>>;
    /// Deletes `segment`.
    fn remove(&self, segment: u64) -> StorageResult<()>;
}

/// One entry of a group's log: where it lies, and its bytes while they are cached.
struct Slot {
    at: Located,
    bytes: Option<Arc<[u8]>>,
}

#[derive(Default)]
struct GroupLog {
    entries: BTreeMap<u64, Slot>,
    /// Bytes of the cached entries.
    cached: usize,
    /// No entry below this index is cached.
    cached_from: u64,
}

/// How much of a segment is written, and how much of that is live entries.
struct SegmentUse {
    len: u64,
    live: u64,
}

struct Inner {
    groups: HashMap<String, GroupLog>,
    segments: BTreeMap<u64, SegmentUse>,
    /// The segment being written.
    current: u64,
    /// Segments written since their last sync.
    dirty: BTreeSet<u64>,
    /// A failed write: the file's end is unknown, so nothing more is written.
    failed: Option<StorageError>,
    /// When to start a new segment.
    segment_bytes: u64,
}

impl Inner {
    /// Forgets `slot` (no longer part of its group's log).
    fn release(segments: &mut BTreeMap<u64, SegmentUse>, log: &mut GroupLog, slot: &Slot) {
        if let Some(s) = segments.get_mut(&slot.at.segment) {
            s.live -= slot.at.len as u64;
        }
        if let Some(b) = &slot.bytes {
            log.cached -= b.len();
        }
    }

    /// Appends `bytes` to the current segment, starting a new one first when it is full;
    /// returns the segment and the offset the bytes start at.
    fn write(&mut self, dir: &dyn LogDir, bytes: &[u8]) -> StorageResult<(u64, u64)> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.write_unchecked(dir, bytes);
        if let Err(e) = &result {
            tracing::error!(error = %e, "raft log write failed");
            self.failed = Some(e.clone());
        }
        result
    }

    fn write_unchecked(&mut self, dir: &dyn LogDir, bytes: &[u8]) -> StorageResult<(u64, u64)> {
        let len = self.segments[&self.current].len;
        if len > format::HEADER_LEN as u64 && len + bytes.len() as u64 > self.segment_bytes {
            let next = self.current + 1;
            dir.create(next)?;
            dir.append(next, &format::header(next, len))?;
            self.segments.insert(
                next,
                SegmentUse {
                    len: format::HEADER_LEN as u64,
                    live: 0,
                },
            );
            self.dirty.insert(next);
            self.current = next;
        }
        let segment = self.current;
        dir.append(segment, bytes)?;
        let s = self.segments.get_mut(&segment).expect("current segment");
        let offset = s.len;
        s.len += bytes.len() as u64;
        self.dirty.insert(segment);
        Ok((segment, offset))
    }

    /// Drops cached bytes of `group`'s oldest entries until at most [`CACHE_BYTES`] remain.
    fn trim_cache(log: &mut GroupLog) {
        if log.cached <= CACHE_BYTES {
            return;
        }
        let mut next = log.cached_from;
        for (index, slot) in log.entries.range_mut(log.cached_from..) {
            if log.cached <= CACHE_BYTES {
                break;
            }
            if let Some(b) = slot.bytes.take() {
                log.cached -= b.len();
            }
            next = index + 1;
        }
        log.cached_from = next;
    }
}

/// The node's Raft log: every group's entries in one set of segment files.
pub struct Wal {
    dir: Arc<dyn LogDir>,
    inner: Mutex<Inner>,
    flusher: Arc<Flusher>,
    /// `fdatasync`s run (for `batonctl bench`).
    syncs: AtomicU64,
    /// Whether a compaction runs (one at a time).
    compacting: AtomicBool,
}

impl Wal {
    /// Opens the log in `dir`: replays its segments (a torn tail is cut off, segments after it
    /// and stale leftovers are deleted) and starts a new segment for this run's writes, which
    /// is closed once it holds `segment_bytes` ([`SEGMENT_BYTES`] in production).
    pub fn open(dir: Arc<dyn LogDir>, segment_bytes: u64) -> StorageResult<Wal> {
        let replay = format::replay_with(dir.list()?, |id| dir.read(id))
            .map_err(|e| StorageError(format!("raft log: {}", e.0)))?;
        for id in &replay.discard {
            tracing::warn!(
                segment = id,
                "raft log: discarding a segment after a torn write"
            );
            dir.remove(*id)?;
        }
        for (id, len) in &replay.cut {
            tracing::warn!(segment = id, len, "raft log: cutting off a torn write");
            dir.cut(*id, *len)?;
        }
        let mut segments: BTreeMap<u64, SegmentUse> = replay
            .segments
            .iter()
            .map(|(id, len)| (*id, SegmentUse { len: *len, live: 0 }))
            .collect();
        let mut groups = HashMap::new();
        for (name, entries) in replay.logs {
            let entries: BTreeMap<u64, Slot> = entries
                .into_iter()
                .map(|(index, at)| {
                    if let Some(s) = segments.get_mut(&at.segment) {
                        s.live += at.len as u64;
                    }
                    (index, Slot { at, bytes: None })
                })
                .collect();
            let cached_from = entries.keys().next_back().map_or(0, |i| i + 1);
            let log = GroupLog {
                entries,
                cached: 0,
                cached_from,
            };
            groups.insert(name, log);
        }
        let (last, last_len) = replay.segments.last().copied().unwrap_or((0, 0));
        let current = last + 1;
        dir.create(current)?;
        dir.append(current, &format::header(current, last_len))?;
        segments.insert(
            current,
            SegmentUse {
                len: format::HEADER_LEN as u64,
                live: 0,
            },
        );
        Ok(Wal {
            dir,
            inner: Mutex::new(Inner {
                groups,
                segments,
                current,
                dirty: BTreeSet::from([current]),
                failed: None,
                segment_bytes,
            }),
            flusher: Arc::default(),
            syncs: AtomicU64::new(0),
            compacting: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Why the log stopped taking writes, if it did: a failed write (the file's end is unknown)
    /// or a failed sync (what the file holds is unknown). Every group's log is in it, so no group
    /// of the node can make anything durable after one.
    pub fn failure(&self) -> Option<StorageError> {
        self.lock()
            .failed
            .clone()
            .or_else(|| self.flusher.failure())
    }

    /// `fdatasync`s run since the log was opened.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Writes encoded entries of `group` (durable after the next [`Wal::sync`]).
    pub fn append(&self, group: &str, entries: Vec<(LogId, Vec<u8>)>) -> StorageResult<()> {
        let mut buf = Vec::with_capacity(entries.iter().map(|(_, b)| b.len() + 32).sum());
        let mut placed = Vec::with_capacity(entries.len());
        for (log_id, bytes) in entries {
            let start = buf.len();
            let body_at = format::encode(&mut buf, group, Op::Entry(&bytes));
            placed.push((log_id, (start + body_at) as u64, bytes));
        }
        let mut inner = self.lock();
        let (segment, offset) = inner.write(&*self.dir, &buf)?;
        let Inner {
            groups, segments, ..
        } = &mut *inner;
        let log = groups.entry(group.to_owned()).or_default();
        for (log_id, at, bytes) in placed {
            let len = bytes.len() as u32;
            let slot = Slot {
                at: Located {
                    log_id,
                    segment,
                    offset: offset + at,
                    len,
                },
                bytes: Some(Arc::from(bytes)),
            };
            segments.get_mut(&segment).expect("written").live += len as u64;
            log.cached += len as usize;
            log.cached_from = log.cached_from.min(log_id.index);
            if let Some(old) = log.entries.insert(log_id.index, slot) {
                Inner::release(segments, log, &old);
            }
        }
        Inner::trim_cache(log);
        Ok(())
    }

    /// Resolves once everything written before the call is durable. Concurrent callers share
    /// syncs (see [`Flusher`]).
    pub async fn sync(self: &Arc<Self>) -> StorageResult<()> {
        let this = self.clone();
        self.flusher
            .flush(move || {
                let this = this.clone();
                Box::pin(async move { this.sync_dirty().await })
            })
            .await
    }

    async fn sync_dirty(&self) -> StorageResult<()> {
        let dirty = std::mem::take(&mut self.lock().dirty);
        for segment in dirty {
            self.syncs.fetch_add(1, Ordering::Relaxed);
            let started = std::time::Instant::now();
            self.dir.sync(segment).await?;
            metrics::histogram!(crate::metrics::FSYNC_SECONDS)
                .record(started.elapsed().as_secs_f64());
        }
        Ok(())
    }

    /// Removes `group`'s entries from `index` on (durable with the next sync).
    pub fn truncate(&self, group: &str, index: u64) -> StorageResult<()> {
        let mut buf = Vec::new();
        format::encode(&mut buf, group, Op::Truncate(index));
        let mut inner = self.lock();
        inner.write(&*self.dir, &buf)?;
        let Inner {
            groups, segments, ..
        } = &mut *inner;
        if let Some(log) = groups.get_mut(group) {
            for slot in log.entries.split_off(&index).into_values() {
                Inner::release(segments, log, &slot);
            }
        }
        Ok(())
    }

    /// Forgets `group`'s entries up to and including `index`. The caller has recorded the
    /// purge elsewhere; the files keep the entries until [`Wal::compact`] deletes their segment.
    pub fn purge(&self, group: &str, index: u64) {
        let mut inner = self.lock();
        let Inner {
            groups, segments, ..
        } = &mut *inner;
        if let Some(log) = groups.get_mut(group) {
            let rest = log.entries.split_off(&(index + 1));
            for slot in std::mem::replace(&mut log.entries, rest).into_values() {
                Inner::release(segments, log, &slot);
            }
        }
    }

    /// Removes every entry of `group` durably (its replica left this node).
    pub async fn drop_group(self: &Arc<Self>, group: &str) -> StorageResult<()> {
        {
            let mut buf = Vec::new();
            format::encode(&mut buf, group, Op::Drop);
            let mut inner = self.lock();
            inner.write(&*self.dir, &buf)?;
            let Inner {
                groups, segments, ..
            } = &mut *inner;
            if let Some(mut log) = groups.remove(group) {
                for slot in std::mem::take(&mut log.entries).into_values() {
                    Inner::release(segments, &mut log, &slot);
                }
            }
        }
        self.sync().await
    }

    /// The log id of `group`'s last entry.
    pub fn last(&self, group: &str) -> Option<LogId> {
        let inner = self.lock();
        let log = inner.groups.get(group)?;
        log.entries.values().next_back().map(|s| s.at.log_id)
    }

    /// Whether `group` has no entries.
    pub fn is_empty(&self, group: &str) -> bool {
        self.lock()
            .groups
            .get(group)
            .is_none_or(|log| log.entries.is_empty())
    }

    /// The encoded entries of `group` in `range`, ascending.
    pub fn read(&self, group: &str, range: impl RangeBounds<u64>) -> StorageResult<Vec<Arc<[u8]>>> {
        let inner = self.lock();
        let Some(log) = inner.groups.get(group) else {
            return Ok(Vec::new());
        };
        log.entries
            .range(range)
            .map(|(_, slot)| match &slot.bytes {
                Some(bytes) => Ok(bytes.clone()),
                None => self
                    .dir
                    .read_at(slot.at.segment, slot.at.offset, slot.at.len as usize)
                    .map(Arc::from),
            })
            .collect()
    }

    /// Deletes the segments no live entry needs, oldest first, after `flush_trees` made the
    /// purge markers durable (a purge recorded only in memory must not lose its entries). An
    /// old segment with little left alive has its live entries copied to the current segment
    /// first. Returns how many segments were deleted (none while another compaction runs).
    pub async fn compact(
        self: &Arc<Self>,
        flush_trees: impl std::future::Future<Output = StorageResult<()>>,
    ) -> StorageResult<usize> {
        if self.compacting.swap(true, Ordering::AcqRel) {
            return Ok(0);
        }
        let result = self.compact_now(flush_trees).await;
        self.compacting.store(false, Ordering::Release);
        result
    }

    async fn compact_now(
        self: &Arc<Self>,
        flush_trees: impl std::future::Future<Output = StorageResult<()>>,
    ) -> StorageResult<usize> {
        let copied = self.copy_forward()?;
        let candidates: Vec<u64> = {
            let inner = self.lock();
            inner
                .segments
                .iter()
                .take_while(|(id, s)| **id != inner.current && s.live == 0)
                .map(|(id, _)| *id)
                .collect()
        };
        if candidates.is_empty() {
            return Ok(0);
        }
        flush_trees.await?;
        if copied {
            self.sync().await?;
        }
        let mut inner = self.lock();
        let mut removed = 0;
        for id in candidates {
            if inner.segments.get(&id).is_none_or(|s| s.live != 0) {
                break;
            }
            self.dir.remove(id)?;
            inner.segments.remove(&id);
            inner.dirty.remove(&id);
            removed += 1;
        }
        if removed > 0 {
            tracing::debug!(removed, "raft log segments deleted");
        }
        Ok(removed)
    }

    /// If the oldest segment is closed and at most a quarter of it is live, or it is small (a
    /// run that ended soon after it began), writes its live entries again at the end of the log
    /// (not yet synced). Returns whether it did.
    fn copy_forward(&self) -> StorageResult<bool> {
        let mut inner = self.lock();
        let Some((&oldest, s)) = inner.segments.iter().next() else {
            return Ok(false);
        };
        let small = s.len <= inner.segment_bytes / 16;
        if oldest == inner.current || s.live == 0 || (s.live > s.len / 4 && !small) {
            return Ok(false);
        }
        let mut buf = Vec::new();
        let mut moved = Vec::new();
        for (name, log) in &inner.groups {
            for (index, slot) in &log.entries {
                if slot.at.segment != oldest {
                    continue;
                }
                let bytes = match &slot.bytes {
                    Some(b) => b.to_vec(),
                    None => self
                        .dir
                        .read_at(oldest, slot.at.offset, slot.at.len as usize)?,
                };
                let start = buf.len();
                let body_at = format::encode(&mut buf, name, Op::Entry(&bytes));
                moved.push((name.clone(), *index, (start + body_at) as u64));
            }
        }
        let (segment, offset) = inner.write(&*self.dir, &buf)?;
        let Inner {
            groups, segments, ..
        } = &mut *inner;
        for (name, index, at) in moved {
            let slot = groups
                .get_mut(&name)
                .and_then(|log| log.entries.get_mut(&index))
                .expect("moved entries are live");
            let len = slot.at.len as u64;
            segments.get_mut(&oldest).expect("oldest").live -= len;
            segments.get_mut(&segment).expect("written").live += len;
            slot.at.segment = segment;
            slot.at.offset = offset + at;
        }
        tracing::debug!(segment = oldest, "raft log: live entries copied forward");
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
