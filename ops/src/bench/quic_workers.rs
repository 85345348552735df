//! In-process QUIC workers built on the Rust SDK (`worker` crate): `count` workers, worker `i`
//! connected first to node `i` mod the node count (the others are its failover list), each with
//! a handler that completes every task at once with `{"ok": true}`. Nodes push tasks against the
//! handler's concurrency; a result counts once a node acknowledged it (after commit).

use super::target::QUIC_WORKER_ID;
use super::workers::Counters;
use anyhow::Context;
use serde_json::json;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Running QUIC workers; [`QuicWorkers::stop`] shuts them down gracefully.
pub struct QuicWorkers {
    runtime: tokio::runtime::Runtime,
    handles: Vec<worker::Handle>,
    pub counters: Arc<Counters>,
}

impl QuicWorkers {
    pub fn start(
        nodes: &[SocketAddr],
        certs: &Path,
        task_type: &str,
        count: usize,
        concurrency: u32,
    ) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bench-quic-worker")
            .enable_all()
            .build()
            .context("cannot start the QUIC workers' runtime")?;
        let counters = Arc::new(Counters::default());
        let mut handles = Vec::with_capacity(count);
        for i in 0..count {
            let order: Vec<SocketAddr> = (0..nodes.len())
                .map(|k| nodes[(i + k) % nodes.len()])
                .collect();
            let tls = worker::Tls::from_dir(certs, QUIC_WORKER_ID)
                .context("cannot load the bench worker's certificate")?;
            let w = worker::Worker::builder()
                .nodes(order)
                .tls(tls)
                .worker_id(format!("bench-quic-{i}"))
                .handler(task_type, concurrency, |_task: worker::Task| async move {
                    Ok(worker::Outcome::completed(json!({ "ok": true })))
                })
                .build()
                .context("cannot configure a QUIC worker")?;
            let _guard = runtime.enter();
            handles.push(w.start());
        }
        Ok(Self {
            runtime,
            handles,
            counters,
        })
    }

    /// Results acknowledged and refusals (stale results, connection errors) so far.
    fn refresh(&self) {
        let (mut acked, mut stale) = (0, 0);
        for h in &self.handles {
            let s = h.status();
            acked += s.results_acked;
            stale += s.results_stale;
        }
        self.counters.completed.store(acked, Ordering::Relaxed);
        self.counters.errors.store(stale, Ordering::Relaxed);
    }

    pub fn stop(self) {
        self.refresh();
        let handles = self.handles;
        self.runtime.block_on(async move {
            for h in &handles {
                // A worker that cannot drain in time abandons its tasks to their timeouts;
                // the bench is over by then, so that is not an error here.
                let _ = h.shutdown().await;
            }
        });
    }
}
