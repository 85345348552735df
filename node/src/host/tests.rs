//! The host in process: an embedded node on sled in a temporary directory, whose storage can be
//! told to fail one partition's next write.

use crate::host::Seams;
use crate::partition::Partition;
use crate::service::open_with;
use crate::testing::start_op;
use crate::{Node, Options};
use cluster::storage::{Backend, Batch, IVec, KvIter, StorageError, StorageResult, TreeBackend};
use proto::{PartitionId, WorkflowId};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Armed instead of a tree prefix: the next flush fails.
const FLUSH: &str = "flush";

/// Sled, except that the next write to a tree whose name starts with the armed prefix fails, or
/// the next flush when [`FLUSH`] is armed.
struct Faulty {
    sled: cluster::storage::sled::SledBackend,
    armed: Arc<Mutex<Option<String>>>,
}

struct FaultyTree {
    name: String,
    tree: Arc<dyn TreeBackend>,
    armed: Arc<Mutex<Option<String>>>,
}

impl FaultyTree {
    fn check(&self) -> StorageResult<()> {
        let mut armed = self.armed.lock().expect("armed");
        match armed.as_deref() {
            Some(prefix) if self.name.starts_with(prefix) => {
                *armed = None;
                Err(StorageError(format!(
                    "injected write error on {}",
                    self.name
                )))
            }
            _ => Ok(()),
        }
    }
}

impl Backend for Faulty {
    fn open_tree(&self, name: &str) -> StorageResult<Arc<dyn TreeBackend>> {
        Ok(Arc::new(FaultyTree {
            name: name.to_owned(),
            tree: self.sled.open_tree(name)?,
            armed: self.armed.clone(),
        }))
    }
    fn drop_tree(&self, name: &str) -> StorageResult<bool> {
        self.sled.drop_tree(name)
    }
    fn tree_names(&self) -> Vec<IVec> {
        self.sled.tree_names()
    }
    fn flush(&self) -> futures::future::BoxFuture<'static, StorageResult<()>> {
        let mut armed = self.armed.lock().expect("armed");
        if armed.as_deref() == Some(FLUSH) {
            *armed = None;
            return Box::pin(async { Err(StorageError("injected flush error".into())) });
        }
        self.sled.flush()
    }
}

impl TreeBackend for FaultyTree {
    fn get(&self, key: &[u8]) -> StorageResult<Option<IVec>> {
        self.tree.get(key)
    }
    fn insert(&self, key: &[u8], value: IVec) -> StorageResult<()> {
        self.check()?;
        self.tree.insert(key, value)
    }
    fn remove(&self, key: &[u8]) -> StorageResult<()> {
        self.check()?;
        self.tree.remove(key)
    }
    fn range(&self, lo: Bound<IVec>, hi: Bound<IVec>) -> KvIter<'_> {
        self.tree.range(lo, hi)
    }
    fn last(&self) -> StorageResult<Option<(IVec, IVec)>> {
        self.tree.last()
    }
    fn apply_batch(&self, batch: Batch) -> StorageResult<()> {
        self.check()?;
        self.tree.apply_batch(batch)
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    node: Node,
    armed: Arc<Mutex<Option<String>>>,
    /// Set if the node stopped itself (fail-stop).
    stopped: Arc<AtomicBool>,
}

const DEADLINE: Duration = Duration::from_secs(30);

async fn fixture(partitions: u16) -> Fixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    let armed = Arc::new(Mutex::new(None));
    let sled = cluster::storage::sled::SledBackend::open(dir.path()).expect("sled");
    let log = cluster::storage::wal::fs::FsLogDir::open(&dir.path().join("raft-log")).expect("log");
    let backend = Arc::new(Faulty {
        sled,
        armed: armed.clone(),
    });
    let db =
        cluster::storage::Db::new(backend, Arc::new(log), cluster::storage::wal::SEGMENT_BYTES)
            .expect("db");
    let stopped = Arc::new(AtomicBool::new(false));
    let seams = Seams {
        db: Some(db),
        seed: Some(11),
        on_storage_failure: Some({
            let stopped = stopped.clone();
            Arc::new(move |_| stopped.store(true, Ordering::SeqCst))
        }),
        ..Default::default()
    };
    let options = Options {
        data_dir: dir.path().to_owned(),
        partitions,
        ..Default::default()
    };
    let node = open_with(&options, seams).await.expect("node opens");
    Fixture {
        _dir: dir,
        node,
        armed,
        stopped,
    }
}

impl Fixture {
    /// Partition `p`'s replica once its actors run.
    async fn led(&self, p: u16) -> Arc<Partition> {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            if let Some(part) = self.node.host.partition(PartitionId(p)) {
                if part.is_local_leader().await {
                    return part;
                }
            }
            assert!(tokio::time::Instant::now() < deadline, "p{p} never led");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Starts workflows on partition `p` until one is refused; the ids acknowledged.
async fn start_until_refused(p: &Partition, from: u64) -> Vec<WorkflowId> {
    let mut acknowledged = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    for n in from.. {
        assert!(tokio::time::Instant::now() < deadline, "no write failed");
        let id = WorkflowId::new(p.id, u128::from(n) << 64);
        match p.try_call(&id, start_op(&id)).await {
            Some(Ok(_)) => acknowledged.push(id),
            _ => break,
        }
    }
    acknowledged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_partition_is_reopened_and_the_others_serve_on() {
    let f = fixture(2).await;
    let p0 = f.led(0).await;
    let p1 = f.led(1).await;
    let before: Vec<_> = (1..=5)
        .map(|n| WorkflowId::new(PartitionId(0), n << 64))
        .collect();
    for id in &before {
        let started = p0.try_call(id, start_op(id)).await;
        assert!(matches!(started, Some(Ok(_))), "{started:?}");
    }
    *f.armed.lock().expect("armed") = Some("p0/".into());
    let mut acknowledged = start_until_refused(&p0, 6).await;
    acknowledged.extend(before);

    // The failed replica is stopped and listed, while the other partition serves.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let health = f.node.admin.health().await;
        if let Some(s) = health.partitions_stopped.iter().find(|s| s.partition == 0) {
            assert!(!health.healthy);
            assert_eq!(s.failures, Some(1));
            assert!(s.reason.contains("injected write error"), "{}", s.reason);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "p0 never listed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other = WorkflowId::new(PartitionId(1), 1 << 64);
    let served = p1.try_call(&other, start_op(&other)).await;
    assert!(matches!(served, Some(Ok(_))), "p1 serves: {served:?}");

    // Reopened from what is durable: every start acknowledged before the failure is there.
    let p0 = f.led(0).await;
    for id in &acknowledged {
        assert!(p0.read(id).expect("reads").is_some(), "{id} lost");
    }
    let more = start_n(&p0, 1_000, 3).await;
    assert_eq!(more, 3, "the reopened replica serves");
    assert!(f.node.admin.health().await.healthy);
    assert!(!f.stopped.load(Ordering::SeqCst), "the node did not stop");
}

/// Starts `n` workflows on partition `p`; how many were acknowledged.
async fn start_n(p: &Partition, from: u64, n: u64) -> u64 {
    let mut acknowledged = 0;
    for k in from..from + n {
        let id = WorkflowId::new(p.id, u128::from(k) << 64);
        if matches!(p.try_call(&id, start_op(&id)).await, Some(Ok(_))) {
            acknowledged += 1;
        }
    }
    acknowledged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_flush_stops_the_node() {
    let f = fixture(1).await;
    f.led(0).await;
    // Every group makes its writes durable through the database's flushes: after one fails,
    // none can, so the node stops rather than answer from what it cannot keep.
    *f.armed.lock().expect("armed") = Some(FLUSH.into());
    assert!(f.node.host.db.flush().await.is_err());
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !f.stopped.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the node did not stop"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
