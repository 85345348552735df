//! Group commit across everything that shares a store: every Raft group of a node appends to one
//! log (and writes one tree database) and makes it durable after each append. A flush makes
//! *every* write before it durable, so concurrent callers need one flush between them, not one
//! each. A caller takes a ticket after its writes; one flusher task at a time runs the flush for
//! all tickets taken before that flush began, and callers that arrive meanwhile are served by the
//! next one.

use super::{StorageError, StorageResult};
use futures::future::BoxFuture;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

/// A flush slower than this is logged: it delays every write and Raft answer behind it.
const SLOW_FLUSH: std::time::Duration = std::time::Duration::from_millis(100);

/// What a flusher runs: one flush of the store.
type FlushFn = dyn Fn() -> BoxFuture<'static, StorageResult<()>> + Send + Sync;

/// The flushes of one store.
pub(super) struct Flusher {
    state: Mutex<State>,
    /// The last ticket made durable (`u64::MAX` once a flush failed).
    done: watch::Sender<u64>,
    /// Flushes the backend ran.
    flushes: AtomicU64,
}

#[derive(Default)]
struct State {
    /// The last ticket handed out.
    requested: u64,
    /// Whether a flusher task is running.
    running: bool,
    /// The error of a failed flush: the database is not trusted after one, so every later flush
    /// fails with it too.
    failed: Option<StorageError>,
}

impl Default for Flusher {
    fn default() -> Self {
        Flusher {
            state: Mutex::default(),
            done: watch::channel(0).0,
            flushes: AtomicU64::new(0),
        }
    }
}

impl Flusher {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the counters inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The error of the flush that failed, if one did (every later flush fails with it).
    pub(super) fn failure(&self) -> Option<StorageError> {
        self.state().failed.clone()
    }

    /// Flushes the backend ran so far.
    pub(super) fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// Resolves once every write made before the call is durable; `flush` runs one flush of the
    /// store (used when this call starts the flusher task).
    pub(super) async fn flush(
        self: &Arc<Self>,
        flush: impl Fn() -> BoxFuture<'static, StorageResult<()>> + Send + Sync + 'static,
    ) -> StorageResult<()> {
        let mut done = self.done.subscribe();
        let ticket = {
            let mut state = self.state();
            if let Some(e) = &state.failed {
                return Err(e.clone());
            }
            state.requested += 1;
            if !state.running {
                state.running = true;
                tokio::spawn(self.clone().run(Arc::new(flush)));
            }
            state.requested
        };
        if done.wait_for(|d| *d >= ticket).await.is_err() {
            return Err(StorageError("the flusher stopped".into()));
        }
        match &self.state().failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Flushes until no ticket is waiting.
    async fn run(self: Arc<Self>, flush: Arc<FlushFn>) {
        loop {
            let target = self.state().requested;
            self.flushes.fetch_add(1, Ordering::Relaxed);
            let started = tokio::time::Instant::now();
            let result = flush().await;
            let took = started.elapsed();
            if took >= SLOW_FLUSH {
                tracing::warn!(took_ms = took.as_millis(), "slow storage flush");
            }
            let mut state = self.state();
            if let Err(e) = result {
                tracing::error!(error = %e, "storage flush failed");
                state.failed = Some(e);
                state.running = false;
                self.done.send_replace(u64::MAX);
                return;
            }
            self.done.send_replace(target);
            if state.requested == target {
                state.running = false;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Backend, IVec, TreeBackend};
    use tokio::sync::Semaphore;

    /// A backend whose flushes wait for a permit each (and fail while `fail` is set).
    struct Gated {
        started: AtomicU64,
        permits: Arc<Semaphore>,
        fail: std::sync::atomic::AtomicBool,
    }

    impl Default for Gated {
        fn default() -> Self {
            Gated {
                started: AtomicU64::new(0),
                permits: Arc::new(Semaphore::new(0)),
                fail: Default::default(),
            }
        }
    }

    impl Backend for Gated {
        fn open_tree(&self, _: &str) -> StorageResult<Arc<dyn TreeBackend>> {
            Err(StorageError("no trees".into()))
        }
        fn drop_tree(&self, _: &str) -> StorageResult<bool> {
            Ok(false)
        }
        fn tree_names(&self) -> Vec<IVec> {
            Vec::new()
        }
        fn flush(&self) -> BoxFuture<'static, StorageResult<()>> {
            self.started.fetch_add(1, Ordering::SeqCst);
            let permits = self.permits.clone();
            let fail = self.fail.load(Ordering::SeqCst);
            Box::pin(async move {
                permits.acquire().await.expect("open").forget();
                if fail {
                    Err(StorageError("disk gone".into()))
                } else {
                    Ok(())
                }
            })
        }
    }

    async fn until(what: &str, condition: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if condition() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("never happened: {what}");
    }

    #[tokio::test]
    async fn callers_during_a_flush_share_the_next_one() {
        let gated = Arc::new(Gated::default());
        let backend: Arc<dyn Backend> = gated.clone();
        let flusher = Arc::new(Flusher::default());
        let first = tokio::spawn({
            let (f, b) = (flusher.clone(), backend.clone());
            async move { f.flush(move || b.flush()).await }
        });
        until("the first flush starts", || {
            gated.started.load(Ordering::SeqCst) == 1
        })
        .await;
        let later: Vec<_> = (0..10)
            .map(|_| {
                let (f, b) = (flusher.clone(), backend.clone());
                tokio::spawn(async move { f.flush(move || b.flush()).await })
            })
            .collect();
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        gated.permits.add_permits(1);
        first.await.expect("joins").expect("flushed");
        // The first flush began before their writes, so it does not serve them.
        until("the second flush starts", || {
            gated.started.load(Ordering::SeqCst) == 2
        })
        .await;
        assert!(later.iter().all(|h| !h.is_finished()));
        gated.permits.add_permits(1);
        for h in later {
            h.await.expect("joins").expect("flushed");
        }
        assert_eq!(
            gated.started.load(Ordering::SeqCst),
            2,
            "eleven callers, two flushes"
        );
        assert_eq!(flusher.flushes(), 2);
    }

    #[tokio::test]
    async fn a_failed_flush_fails_its_callers_and_every_later_flush() {
        let gated = Arc::new(Gated::default());
        gated.fail.store(true, Ordering::SeqCst);
        gated.permits.add_permits(10);
        let backend: Arc<dyn Backend> = gated.clone();
        let flusher = Arc::new(Flusher::default());
        let b = backend.clone();
        assert!(flusher.flush(move || b.flush()).await.is_err());
        gated.fail.store(false, Ordering::SeqCst);
        let again = flusher.flush(move || backend.flush()).await;
        assert_eq!(again.map_err(|e| e.0), Err("disk gone".to_owned()));
        assert_eq!(gated.started.load(Ordering::SeqCst), 1);
    }
}
