//! The simulated disk: a [`cluster::storage::Backend`] that keeps, per node, what is durable apart
//! from what was written but not yet flushed. A crash ([`Disk::crash`]) keeps the durable state and
//! a seeded prefix of the unflushed writes (sled recovers a prefix of its log; writes are never
//! reordered), so any acknowledgement given before a flush can be caught losing data.
//! A flush takes a seeded amount of simulated time and covers the writes made before it
//! started.
//!
//! The node's Raft log files ([`cluster::storage::wal`]) are on the same disk but apart from the
//! trees, as on a real machine: a sync covers what the segment held when it began, and a crash
//! keeps each file's synced bytes and a seeded part of the rest (possibly cutting a record in
//! two), independently of the trees and of the other files.

use cluster::storage::wal::{mem::MemLogDir, LogDir};
use cluster::storage::{Backend, Batch, IVec, KvIter, StorageError, StorageResult, TreeBackend};
use futures::future::BoxFuture;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

type Map = BTreeMap<IVec, IVec>;

/// One write as the disk received it.
#[derive(Clone)]
enum Write {
    Tree(String, Vec<(IVec, Option<IVec>)>),
    Drop(String),
}

fn apply(trees: &mut BTreeMap<String, Map>, write: &Write) {
    match write {
        Write::Tree(name, ops) => {
            let tree = trees.entry(name.clone()).or_default();
            for (k, v) in ops {
                match v {
                    Some(v) => {
                        tree.insert(k.clone(), v.clone());
                    }
                    None => {
                        tree.remove(k);
                    }
                }
            }
        }
        Write::Drop(name) => {
            trees.remove(name);
        }
    }
}

#[derive(Default)]
struct State {
    /// What survives any crash.
    durable: BTreeMap<String, Map>,
    /// What readers see: durable plus every pending write.
    live: BTreeMap<String, Map>,
    /// Writes since the last flush, with their sequence numbers.
    pending: Vec<(u64, Write)>,
    next_seq: u64,
    /// Bumped by a crash: handles of an earlier incarnation fail.
    generation: u64,
    /// Flush latency bounds in simulated microseconds.
    flush_us: (u64, u64),
    /// Draws flush latencies.
    rng: Option<ChaCha8Rng>,
    /// The next write fails (a storage fault armed by the injector).
    fail_next_write: bool,
}

impl State {
    /// How long the next flush or sync takes (seeded).
    fn flush_time(&mut self) -> Duration {
        let (lo, hi) = self.flush_us;
        let us = match self.rng.as_mut() {
            Some(rng) if hi > lo => rng.gen_range(lo..=hi),
            _ => lo,
        };
        Duration::from_micros(us)
    }
}

/// Raft log segments in the simulator: small, so runs start new segments and delete old ones.
const SEGMENT_BYTES: u64 = 256 << 10;

/// One node's disk; survives the node's crashes.
pub struct Disk {
    state: Mutex<State>,
    /// The Raft log's files.
    log: MemLogDir,
}

impl Disk {
    pub fn new(flush_us: (u64, u64), seed: u64) -> Arc<Disk> {
        use rand::SeedableRng;
        Arc::new(Disk {
            state: Mutex::new(State {
                flush_us,
                rng: Some(ChaCha8Rng::seed_from_u64(seed)),
                ..State::default()
            }),
            log: MemLogDir::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The storage of the node's current incarnation (its Raft log replayed).
    pub fn open(self: &Arc<Disk>) -> StorageResult<cluster::storage::Db> {
        let generation = self.lock().generation;
        cluster::storage::Db::new(
            Arc::new(SimDb {
                disk: self.clone(),
                generation,
            }),
            Arc::new(SimLog {
                disk: self.clone(),
                generation,
            }),
            SEGMENT_BYTES,
        )
    }

    /// The node crashed: keep what was flushed and a prefix of the rest chosen by `rng`, and of
    /// each Raft log file its synced bytes and a part of the rest. Returns how many writes (tree
    /// writes, and log files with bytes cut off) were lost.
    pub fn crash(&self, rng: &mut ChaCha8Rng) -> u64 {
        let mut files_cut = 0;
        self.log.crash(|unsynced| {
            let kept = rng.gen_range(0..=unsynced);
            files_cut += u64::from(kept < unsynced);
            kept
        });
        let mut s = self.lock();
        let kept = rng.gen_range(0..=s.pending.len());
        let pending = std::mem::take(&mut s.pending);
        let lost = (pending.len() - kept) as u64;
        let mut durable = std::mem::take(&mut s.durable);
        for (_, w) in pending.iter().take(kept) {
            apply(&mut durable, w);
        }
        s.live = durable.clone();
        s.durable = durable;
        s.generation += 1;
        lost + files_cut
    }

    fn check(&self, generation: u64) -> StorageResult<MutexGuard<'_, State>> {
        let s = self.lock();
        if s.generation != generation {
            return Err(StorageError("the node crashed: stale disk handle".into()));
        }
        Ok(s)
    }

    /// Makes the next write fail.
    pub fn fail_next_write(&self) {
        self.lock().fail_next_write = true;
    }

    fn write(&self, generation: u64, write: Write) -> StorageResult<()> {
        let mut s = self.check(generation)?;
        if std::mem::take(&mut s.fail_next_write) {
            return Err(StorageError("simulated write error (EIO)".into()));
        }
        apply(&mut s.live, &write);
        let seq = s.next_seq;
        s.next_seq += 1;
        s.pending.push((seq, write));
        Ok(())
    }
}

struct SimDb {
    disk: Arc<Disk>,
    generation: u64,
}

impl Backend for SimDb {
    fn open_tree(&self, name: &str) -> StorageResult<Arc<dyn TreeBackend>> {
        let exists = self.disk.check(self.generation)?.live.contains_key(name);
        if !exists {
            self.disk
                .write(self.generation, Write::Tree(name.to_owned(), Vec::new()))?;
        }
        Ok(Arc::new(SimTree {
            disk: self.disk.clone(),
            generation: self.generation,
            name: name.to_owned(),
        }))
    }

    fn drop_tree(&self, name: &str) -> StorageResult<bool> {
        let existed = self.disk.check(self.generation)?.live.contains_key(name);
        if existed {
            self.disk
                .write(self.generation, Write::Drop(name.to_owned()))?;
        }
        Ok(existed)
    }

    fn tree_names(&self) -> Vec<IVec> {
        self.disk
            .lock()
            .live
            .keys()
            .map(|k| IVec::from(k.as_bytes()))
            .collect()
    }

    fn flush(&self) -> BoxFuture<'static, StorageResult<()>> {
        let disk = self.disk.clone();
        let generation = self.generation;
        Box::pin(async move {
            let (upto, wait) = {
                let mut s = disk.check(generation)?;
                let wait = s.flush_time();
                (s.next_seq, wait)
            };
            tokio::time::sleep(wait).await;
            let mut s = disk.check(generation)?;
            let cut = s.pending.iter().take_while(|(seq, _)| *seq < upto).count();
            let done: Vec<(u64, Write)> = s.pending.drain(..cut).collect();
            for (_, w) in &done {
                apply(&mut s.durable, w);
            }
            Ok(())
        })
    }
}

struct SimTree {
    disk: Arc<Disk>,
    generation: u64,
    name: String,
}

impl SimTree {
    fn read<T>(&self, f: impl FnOnce(Option<&Map>) -> T) -> StorageResult<T> {
        let s = self.disk.check(self.generation)?;
        Ok(f(s.live.get(&self.name)))
    }
}

impl TreeBackend for SimTree {
    fn get(&self, key: &[u8]) -> StorageResult<Option<IVec>> {
        self.read(|t| t.and_then(|t| t.get(key).cloned()))
    }

    fn insert(&self, key: &[u8], value: IVec) -> StorageResult<()> {
        self.disk.write(
            self.generation,
            Write::Tree(self.name.clone(), vec![(IVec::from(key), Some(value))]),
        )
    }

    fn remove(&self, key: &[u8]) -> StorageResult<()> {
        self.disk.write(
            self.generation,
            Write::Tree(self.name.clone(), vec![(IVec::from(key), None)]),
        )
    }

    fn range(&self, lo: Bound<IVec>, hi: Bound<IVec>) -> KvIter<'_> {
        let pairs = self.read(|t| {
            t.map(|t| {
                t.range((lo, hi))
                    .map(|(k, v)| Ok((k.clone(), v.clone())))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
        });
        match pairs {
            Ok(pairs) => Box::new(pairs.into_iter()),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }

    fn last(&self) -> StorageResult<Option<(IVec, IVec)>> {
        self.read(|t| {
            t.and_then(|t| t.iter().next_back())
                .map(|(k, v)| (k.clone(), v.clone()))
        })
    }

    fn apply_batch(&self, batch: Batch) -> StorageResult<()> {
        self.disk
            .write(self.generation, Write::Tree(self.name.clone(), batch.ops))
    }
}

impl Disk {
    /// The highest log index group `group` can recover from this disk: its last log entry, its
    /// purge marker, or the index its state was applied to (a snapshot), whichever is highest.
    /// After a crash everything on the disk is durable.
    pub fn recoverable_index(&self, group: &str) -> u64 {
        let last_log = self.log.durable_last(group);
        index_in(&self.lock().live, group).max(last_log)
    }

    /// The same, counting only what is flushed and synced (what a crash now would keep for
    /// sure).
    pub fn durable_index(&self, group: &str) -> u64 {
        let last_log = self.log.durable_last(group);
        index_in(&self.lock().durable, group).max(last_log)
    }
}

/// The highest log index of `group` that `trees` hold: its purge marker or the index its state
/// was applied to (the entries themselves are in the Raft log's files).
fn index_in(trees: &BTreeMap<String, Map>, group: &str) -> u64 {
    let id_at = |suffix: &str, key: &[u8]| {
        trees
            .get(&format!("{group}/{suffix}"))
            .and_then(|t| t.get(key))
            .and_then(|v| cluster::codec::decode_log_id(v).ok())
            .map_or(0, |id| id.index)
    };
    id_at("raft", cluster::codec::KEY_PURGED).max(id_at("state", cluster::codec::KEY_APPLIED))
}

/// The Raft log files of one incarnation of the node.
struct SimLog {
    disk: Arc<Disk>,
    generation: u64,
}

impl SimLog {
    fn check(&self) -> StorageResult<&MemLogDir> {
        drop(self.disk.check(self.generation)?);
        Ok(&self.disk.log)
    }
}

impl LogDir for SimLog {
    fn list(&self) -> StorageResult<Vec<u64>> {
        self.check()?.list()
    }

    fn read(&self, segment: u64) -> StorageResult<Vec<u8>> {
        self.check()?.read(segment)
    }

    fn read_at(&self, segment: u64, offset: u64, len: usize) -> StorageResult<Vec<u8>> {
        self.check()?.read_at(segment, offset, len)
    }

    fn create(&self, segment: u64) -> StorageResult<()> {
        self.check()?.create(segment)
    }

    fn append(&self, segment: u64, bytes: &[u8]) -> StorageResult<()> {
        let log = self.check()?;
        if std::mem::take(&mut self.disk.lock().fail_next_write) {
            return Err(StorageError("simulated write error (EIO)".into()));
        }
        log.append(segment, bytes)
    }

    fn cut(&self, segment: u64, len: u64) -> StorageResult<()> {
        self.check()?.cut(segment, len)
    }

    /// Takes a seeded amount of simulated time, like a tree flush, and covers what the segment
    /// held when it began.
    fn sync(&self, segment: u64) -> BoxFuture<'static, StorageResult<()>> {
        let disk = self.disk.clone();
        let generation = self.generation;
        Box::pin(async move {
            let (upto, wait) = {
                let mut s = disk.check(generation)?;
                (disk.log.len(segment), s.flush_time())
            };
            tokio::time::sleep(wait).await;
            drop(disk.check(generation)?);
            disk.log.mark_synced(segment, upto);
            Ok(())
        })
    }

    fn remove(&self, segment: u64) -> StorageResult<()> {
        self.check()?.remove(segment)
    }
}
