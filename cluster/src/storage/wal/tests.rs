use super::mem::MemLogDir;
use super::*;
use crate::codec;
use crate::types::{Entry, Request};
use openraft::{CommittedLeaderId, EntryPayload};

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

/// Encoded entries `from..=to` of `term`, each `pad` bytes of payload.
fn entries(term: u64, from: u64, to: u64, pad: usize) -> Vec<(LogId, Vec<u8>)> {
    (from..=to)
        .map(|i| {
            let mut command = format!("t{term}i{i}").into_bytes();
            command.resize(command.len() + pad, b'.');
            let entry = Entry {
                log_id: log_id(term, i),
                payload: EntryPayload::Normal(Request(vec![command])),
            };
            (entry.log_id, codec::encode_entry(&entry).expect("encodes"))
        })
        .collect()
}

/// (index, term) of every entry of `group`, read back and decoded.
fn read(wal: &Wal, group: &str) -> Vec<(u64, u64)> {
    wal.read(group, ..)
        .expect("reads")
        .iter()
        .map(|b| {
            let e = codec::decode_entry(b).expect("decodes");
            (e.log_id.index, e.log_id.leader_id.term)
        })
        .collect()
}

fn open(dir: &Arc<MemLogDir>, segment_bytes: u64) -> Arc<Wal> {
    Arc::new(Wal::open(dir.clone(), segment_bytes).expect("opens"))
}

fn span(from: u64, to: u64, term: u64) -> Vec<(u64, u64)> {
    (from..=to).map(|i| (i, term)).collect()
}

#[tokio::test]
async fn groups_share_the_log_and_replay_it_after_a_restart() {
    let dir = Arc::new(MemLogDir::default());
    let wal = open(&dir, SEGMENT_BYTES);
    wal.append("p0", entries(1, 1, 5, 10)).expect("appends");
    wal.append("meta", entries(1, 1, 2, 10)).expect("appends");
    wal.truncate("p0", 4).expect("truncates");
    wal.append("p0", entries(2, 4, 6, 10)).expect("appends");
    wal.append("p1", entries(1, 1, 3, 10)).expect("appends");
    wal.drop_group("p1").await.expect("drops");
    wal.sync().await.expect("syncs");
    assert_eq!(wal.last("p0"), Some(log_id(2, 6)));
    assert!(wal.is_empty("p1") && wal.last("p1").is_none());
    let expected = [span(1, 3, 1), span(4, 6, 2)].concat();
    assert_eq!(read(&wal, "p0"), expected);
    assert_eq!(wal.read("p0", 2..=4).expect("reads").len(), 3);
    wal.purge("p0", 2);
    assert_eq!(read(&wal, "p0")[0], (3, 1));
    drop(wal);

    // The files replay to the same logs; a purge lives in memory only (the caller keeps the
    // marker and purges again after opening).
    let wal = open(&dir, SEGMENT_BYTES);
    assert_eq!(read(&wal, "p0"), expected);
    assert_eq!(read(&wal, "meta"), span(1, 2, 1));
    assert!(wal.is_empty("p1"));
    // Appends after a restart land in a new segment, and the next restart reads both.
    wal.append("p0", entries(2, 7, 7, 10)).expect("appends");
    wal.sync().await.expect("syncs");
    drop(wal);
    assert_eq!(dir.list().expect("lists"), vec![1, 2]);
    let wal = open(&dir, SEGMENT_BYTES);
    assert_eq!(wal.last("p0"), Some(log_id(2, 7)));
    assert_eq!(dir.list().expect("lists"), vec![1, 2, 3]);
}

#[tokio::test]
async fn a_crash_keeps_what_was_synced_and_a_clean_prefix_of_the_rest() {
    for keep in [0usize, 1, 7, 60, 200, usize::MAX] {
        let dir = Arc::new(MemLogDir::default());
        let wal = open(&dir, SEGMENT_BYTES);
        wal.append("p0", entries(1, 1, 3, 20)).expect("appends");
        wal.sync().await.expect("syncs");
        wal.append("p0", entries(1, 4, 6, 20)).expect("appends");
        drop(wal);
        dir.crash(|_| keep);
        let wal = open(&dir, SEGMENT_BYTES);
        let got = read(&wal, "p0");
        assert!(
            got.len() >= 3,
            "keep {keep}: synced entries survive: {got:?}"
        );
        assert_eq!(got, span(1, got.len() as u64, 1), "keep {keep}: a prefix");
        // The torn tail was cut off, so what is written next replays after the survivors.
        let next = got.len() as u64 + 1;
        wal.append("p0", entries(1, next, next, 20))
            .expect("appends");
        wal.sync().await.expect("syncs");
        drop(wal);
        let wal = open(&dir, SEGMENT_BYTES);
        assert_eq!(read(&wal, "p0"), span(1, next, 1), "keep {keep}");
    }
}

#[tokio::test]
async fn a_crash_that_loses_a_full_segments_tail_drops_the_next_segment() {
    let dir = Arc::new(MemLogDir::default());
    // Tiny segments: every append of two entries starts a new one.
    let wal = open(&dir, 300);
    wal.append("p0", entries(1, 1, 2, 100)).expect("appends");
    wal.sync().await.expect("syncs");
    wal.append("p0", entries(1, 3, 4, 100)).expect("appends");
    wal.append("p0", entries(1, 5, 6, 100)).expect("appends");
    drop(wal);
    let segments = dir.list().expect("lists");
    assert!(segments.len() >= 3, "{segments:?}");
    // The file system kept the newest segment but not the one before it.
    let newest = *segments.last().expect("one");
    let mut index = 0;
    dir.crash(|_| {
        index += 1;
        if index == segments.len() {
            usize::MAX
        } else {
            0
        }
    });
    assert!(dir.len(newest) > 0, "the newest segment kept its bytes");
    let wal = open(&dir, 300);
    assert_eq!(read(&wal, "p0"), span(1, 2, 1), "no gap");
    assert!(!dir.list().expect("lists").contains(&newest));
}

#[tokio::test]
async fn segments_go_once_their_entries_are_purged_and_quiet_groups_are_copied_forward() {
    let dir = Arc::new(MemLogDir::default());
    let wal = open(&dir, 4_000);
    // A quiet group writes once, a busy one fills several segments.
    wal.append("meta", entries(1, 1, 1, 50)).expect("appends");
    for i in 0..20 {
        wal.append("p0", entries(1, i * 5 + 1, i * 5 + 5, 100))
            .expect("appends");
    }
    wal.sync().await.expect("syncs");
    let before = dir.list().expect("lists").len();
    assert!(before >= 4, "{before} segments");
    // Nothing purged: nothing goes.
    let flushes = AtomicU64::new(0);
    let flush = || async {
        flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    };
    // The oldest segment is mostly p0's live entries: nothing to copy, nothing to delete.
    assert_eq!(wal.compact(flush()).await.expect("compacts"), 0);
    assert_eq!(flushes.load(Ordering::SeqCst), 0);
    // p0 purges all but its last entries: the quiet group's entry is all that keeps the
    // oldest segment, so it is copied forward and every old segment goes.
    wal.purge("p0", 95);
    let removed = wal.compact(flush()).await.expect("compacts");
    assert_eq!(flushes.load(Ordering::SeqCst), 1, "trees flushed first");
    let after = dir.list().expect("lists");
    assert_eq!(removed, before - after.len());
    assert!(after.len() <= 2, "{after:?}");
    assert_eq!(read(&wal, "meta"), vec![(1, 1)]);
    assert_eq!(read(&wal, "p0"), span(96, 100, 1));
    drop(wal);
    let wal = open(&dir, 4_000);
    assert_eq!(read(&wal, "meta"), vec![(1, 1)]);
    assert_eq!(wal.last("p0"), Some(log_id(1, 100)));
}

#[tokio::test]
async fn the_small_segments_of_short_runs_are_folded_into_the_current_one() {
    let dir = Arc::new(MemLogDir::default());
    // Every run opens a segment; a quiet group writes one entry in each of five short runs.
    for i in 1..=5 {
        let wal = open(&dir, SEGMENT_BYTES);
        wal.append("meta", entries(1, i, i, 10)).expect("appends");
        wal.sync().await.expect("syncs");
    }
    let wal = open(&dir, SEGMENT_BYTES);
    assert_eq!(dir.list().expect("lists").len(), 6);
    // Each compaction folds the oldest small segment into the current one.
    let mut removed = 0;
    for _ in 0..5 {
        removed += wal.compact(async { Ok(()) }).await.expect("compacts");
    }
    assert_eq!(removed, 5);
    assert_eq!(dir.list().expect("lists").len(), 1);
    drop(wal);
    let wal = open(&dir, SEGMENT_BYTES);
    assert_eq!(read(&wal, "meta"), span(1, 5, 1));
}

#[tokio::test]
async fn old_entries_are_read_back_from_their_segment() {
    let dir = Arc::new(MemLogDir::default());
    let wal = open(&dir, SEGMENT_BYTES);
    // More than the cache holds.
    let count = (CACHE_BYTES / 10_000 + 50) as u64;
    for i in 1..=count {
        wal.append("p0", entries(1, i, i, 10_000)).expect("appends");
    }
    let cached = wal.lock().groups["p0"].cached;
    assert!(cached <= CACHE_BYTES, "{cached}");
    assert!(wal.lock().groups["p0"].entries[&1].bytes.is_none());
    assert_eq!(read(&wal, "p0"), span(1, count, 1));
}

#[tokio::test]
async fn a_failed_write_stops_the_log() {
    struct Failing(MemLogDir, std::sync::atomic::AtomicBool);
    impl LogDir for Failing {
        fn list(&self) -> StorageResult<Vec<u64>> {
            self.0.list()
        }
        fn read(&self, s: u64) -> StorageResult<Vec<u8>> {
            self.0.read(s)
        }
        fn read_at(&self, s: u64, o: u64, l: usize) -> StorageResult<Vec<u8>> {
            self.0.read_at(s, o, l)
        }
        fn create(&self, s: u64) -> StorageResult<()> {
            self.0.create(s)
        }
        fn append(&self, s: u64, b: &[u8]) -> StorageResult<()> {
            if self.1.load(Ordering::SeqCst) {
                return Err(StorageError("EIO".into()));
            }
            self.0.append(s, b)
        }
        fn cut(&self, s: u64, l: u64) -> StorageResult<()> {
            self.0.cut(s, l)
        }
        fn sync(&self, s: u64) -> BoxFuture<'static, StorageResult<()>> {
            self.0.sync(s)
        }
        fn remove(&self, s: u64) -> StorageResult<()> {
            self.0.remove(s)
        }
    }
    let dir = Arc::new(Failing(MemLogDir::default(), Default::default()));
    let wal = Wal::open(dir.clone(), SEGMENT_BYTES).expect("opens");
    dir.1.store(true, Ordering::SeqCst);
    assert!(wal.append("p0", entries(1, 1, 1, 1)).is_err());
    dir.1.store(false, Ordering::SeqCst);
    let again = wal.append("p0", entries(1, 1, 1, 1));
    assert_eq!(again.map_err(|e| e.0), Err("EIO".to_owned()));
    assert!(wal.is_empty("p0"));
}

#[tokio::test]
async fn segments_on_disk_are_zero_filled_ahead_and_replay_across_their_zero_tails() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let path = tmp.path().join("raft-log");
    let ahead = 64 << 10;
    let open_fs = || -> Arc<Wal> {
        let dir = super::fs::FsLogDir::open_with(&path, ahead).expect("opens");
        Arc::new(Wal::open(Arc::new(dir), 256 << 10).expect("opens"))
    };
    let wal = open_fs();
    // About 600 KiB in small appends: three segments, each filled ahead many times.
    for i in 0..600u64 {
        wal.append("p0", entries(1, i + 1, i + 1, 1000))
            .expect("appends");
        if i % 50 == 0 {
            wal.sync().await.expect("syncs");
        }
    }
    wal.sync().await.expect("syncs");
    drop(wal);
    let mut segments: Vec<_> = std::fs::read_dir(&path)
        .expect("lists")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.path())
        .collect();
    segments.sort();
    assert!(segments.len() >= 3, "{segments:?}");
    let first = std::fs::read(&segments[0]).expect("reads");
    assert!(
        first.ends_with(&[0; 4096]),
        "a closed segment keeps the zeros filled ahead of it ({} bytes)",
        first.len()
    );
    let wal = open_fs();
    assert_eq!(read(&wal, "p0"), span(1, 600, 1));
    wal.append("p0", entries(1, 601, 601, 10)).expect("appends");
    wal.sync().await.expect("syncs");
    drop(wal);
    assert_eq!(read(&open_fs(), "p0"), span(1, 601, 1));
}
