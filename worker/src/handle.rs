//! [`Handle`]: what a caller holds on a started worker: its [`Status`], and the graceful
//! shutdown.

use crate::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// Where the worker's connection stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Started, no connection tried yet.
    Starting,
    /// Dialing `node` (QUIC handshake, then hello).
    Connecting { node: SocketAddr },
    /// Welcomed by node `node_id` at `node`: tasks flow.
    Connected { node: SocketAddr, node_id: u64 },
    /// Between connections, waiting out a backoff.
    Disconnected,
    /// The worker has stopped; `abandoned_*` count work its shutdown's wait gave up on.
    Stopped {
        abandoned_tasks: usize,
        abandoned_results: usize,
    },
}

/// A snapshot of a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub state: State,
    /// A shutdown was asked for: the worker takes no new tasks.
    pub stopping: bool,
    /// Tasks holding a slot (handler running, or result not sent yet).
    pub running: usize,
    /// Results and heartbeats not acknowledged by a node yet.
    pub unacked: usize,
    /// Final results a node committed (heartbeats not counted).
    pub results_acked: u64,
    /// Reports a node refused because the task's lease had ended (the attempt timed out, or the
    /// task was leased again); their work was dropped.
    pub results_stale: u64,
    /// The latest failure: a connection lost or refused, or a protocol error. Kept after the
    /// worker reconnects, so a refusal (for example `Forbidden`) stays visible.
    pub last_error: Option<Error>,
}

impl Status {
    pub(crate) fn starting() -> Status {
        Status {
            state: State::Starting,
            stopping: false,
            running: 0,
            unacked: 0,
            results_acked: 0,
            results_stale: 0,
            last_error: None,
        }
    }
}

/// A started worker. Cheap to clone. Dropping every handle does not stop the worker (as with
/// a spawned task); call [`Handle::shutdown`].
#[derive(Debug, Clone)]
pub struct Handle {
    stop: Arc<watch::Sender<bool>>,
    status: watch::Receiver<Status>,
}

impl Handle {
    pub(crate) fn new(stop: watch::Sender<bool>, status: watch::Receiver<Status>) -> Handle {
        Handle {
            stop: Arc::new(stop),
            status,
        }
    }

    /// The worker's current status.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// The latest failure (connection lost, node refusal, protocol error), if any.
    pub fn last_error(&self) -> Option<Error> {
        self.status.borrow().last_error.clone()
    }

    /// A receiver of every status change, to wait on a condition
    /// (`watch.wait_for(|s| matches!(s.state, State::Connected { .. }))`).
    pub fn watch(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// Stops the worker gracefully: tells the node (`Drain`) so no new tasks come, lets running
    /// handlers finish, delivers their results (reconnecting if need be), then closes. Waits at
    /// most the builder's `shutdown_timeout`; `Err(Error::ShutdownTimeout)` says what was
    /// abandoned then (the node times those tasks out and retries them).
    pub async fn shutdown(&self) -> Result<(), Error> {
        self.stop.send_replace(true);
        self.stopped().await
    }

    /// Waits until the worker has stopped (after [`Handle::shutdown`], from any handle).
    pub async fn stopped(&self) -> Result<(), Error> {
        let mut status = self.status.clone();
        let stopped = status
            .wait_for(|s| matches!(s.state, State::Stopped { .. }))
            .await
            .map(|s| s.state.clone());
        match stopped {
            Ok(State::Stopped {
                abandoned_tasks: 0,
                abandoned_results: 0,
            }) => Ok(()),
            Ok(State::Stopped {
                abandoned_tasks,
                abandoned_results,
            }) => Err(Error::ShutdownTimeout {
                tasks: abandoned_tasks,
                results: abandoned_results,
            }),
            // The worker's task ended without saying so: it panicked or its runtime shut down.
            _ => Err(Error::Closed),
        }
    }
}
