//! In-process HTTP workers: threads that batch-poll one task type and complete every task at once
//! (no work of their own), taking the next task `update-v2` hands back when there is one.

use super::client::{Client, Refused};
use serde_json::Value;
use std::collections::VecDeque;
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
            // Worker `i` starts on node `i` mod the node count and moves to the next node after a
            // failed request (a node that died, in W7).
            let clients = (0..urls.len())
                .map(|k| Client::new(&urls[(i + k) % urls.len()]))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let (stop, counters) = (stop.clone(), counters.clone());
            let task_type = task_type.to_owned();
            let worker = format!("bench-worker-{i}");
            handles.push(std::thread::spawn(move || {
                run(&clients, &task_type, &worker, batch, &stop, &counters)
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

/// Tries to report one task's completion this many times (over the nodes in turn) before giving
/// it up to its response timeout.
const COMPLETE_ATTEMPTS: usize = 20;

fn run(
    clients: &[Client],
    task_type: &str,
    worker: &str,
    batch: usize,
    stop: &AtomicBool,
    counters: &Counters,
) {
    let mut at = 0;
    while !stop.load(Ordering::Relaxed) {
        let tasks = match clients[at].poll(task_type, worker, batch, POLL_TIMEOUT_MS) {
            Ok(tasks) => tasks,
            Err(_) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                at = (at + 1) % clients.len();
                std::thread::sleep(ERROR_BACKOFF);
                continue;
            }
        };
        // First come, first served: a task update-v2 hands back goes behind the rest of the
        // batch. (Working through the handed-back chain first left the batch's other tasks
        // leased but untouched for as long as the chain lasted — under steady load, until their
        // response timeout: W3's p99 of about 10 s.)
        let mut todo: VecDeque<Value> = tasks.into();
        let mut attempts = 0;
        while let Some(task) = todo.pop_front() {
            match clients[at].complete(&task, worker) {
                Ok(next) => {
                    counters.completed.fetch_add(1, Ordering::Relaxed);
                    todo.extend(next);
                    attempts = 0;
                }
                Err(e) if e.downcast_ref::<Refused>().is_some() => {
                    // The task is no longer this worker's (timed out and retried): drop it.
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    at = (at + 1) % clients.len();
                    attempts += 1;
                    if attempts < COMPLETE_ATTEMPTS && !stop.load(Ordering::Relaxed) {
                        todo.push_front(task);
                    }
                    std::thread::sleep(ERROR_BACKOFF);
                }
            }
        }
    }
}
