//! In-process HTTP workers: threads that batch-poll one task type and complete every task at once
//! (no work of their own), taking the next task `update-v2` hands back when there is one.

use super::client::Client;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How long one poll waits for a task on the server.
const POLL_TIMEOUT_MS: u64 = 100;
/// Pause after a failed request, so a broken server is not hammered.
const ERROR_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// What the workers did, shared with the bench.
#[derive(Default)]
pub struct Counters {
    /// Tasks completed (update-v2 answered 2xx).
    pub completed: AtomicU64,
    /// Failed polls and updates.
    pub errors: AtomicU64,
}

/// Running worker threads; [`Workers::stop`] ends them.
pub struct Workers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub counters: Arc<Counters>,
}

impl Workers {
    /// Starts `threads` workers; worker `i` polls node `i` mod the node count.
    pub fn start(
        urls: &[String],
        task_type: &str,
        threads: usize,
        batch: usize,
    ) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let client = Client::new(&urls[i % urls.len()])?;
            let (stop, counters) = (stop.clone(), counters.clone());
            let task_type = task_type.to_owned();
            let worker = format!("bench-worker-{i}");
            handles.push(std::thread::spawn(move || {
                run(&client, &task_type, &worker, batch, &stop, &counters)
            }));
        }
        Ok(Self {
            stop,
            threads: handles,
            counters,
        })
    }

    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn run(
    client: &Client,
    task_type: &str,
    worker: &str,
    batch: usize,
    stop: &AtomicBool,
    counters: &Counters,
) {
    while !stop.load(Ordering::Relaxed) {
        let tasks = match client.poll(task_type, worker, batch, POLL_TIMEOUT_MS) {
            Ok(tasks) => tasks,
            Err(_) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(ERROR_BACKOFF);
                continue;
            }
        };
        for task in tasks {
            let mut next = Some(task);
            while let Some(task) = next.take() {
                match client.complete(&task, worker) {
                    Ok(n) => {
                        counters.completed.fetch_add(1, Ordering::Relaxed);
                        next = n;
                    }
                    Err(_) => {
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(ERROR_BACKOFF);
                    }
                }
            }
        }
    }
}
