//! Whether this node's graceful shutdown has begun. From then on the node takes no new work while
//! what it already runs finishes: the HTTP API refuses new requests (503) and reports the node not
//! ready, parked polls end, its membership controller takes no more steps, and peers' controllers
//! are told it is going (it places no replica and takes no leadership). Its groups keep running
//! until [`super::Node::shutdown`].

use std::sync::Arc;
use tokio::sync::watch;

/// The node's shutdown flag, shared by its services and front doors. Cheap to clone.
#[derive(Clone, Default)]
pub struct Stopping(Arc<watch::Sender<bool>>);

impl Stopping {
    /// Marks the shutdown as begun; answers whether it already was.
    pub fn begin(&self) -> bool {
        self.0.send_replace(true)
    }

    /// Whether the shutdown has begun.
    pub fn begun(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the shutdown has begun.
    pub async fn wait(&self) {
        let mut begun = self.0.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = begun.wait_for(|b| *b).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_ends_once_the_shutdown_begins_and_begin_says_whether_it_had() {
        let stopping = Stopping::default();
        let waiting = tokio::spawn({
            let stopping = stopping.clone();
            async move { stopping.wait().await }
        });
        assert!(!stopping.begun());
        assert!(!stopping.begin(), "not begun before");
        assert!(stopping.begin(), "begun the second time");
        assert!(stopping.begun());
        waiting.await.expect("the wait ends");
        // A wait that starts after the shutdown began ends at once.
        stopping.wait().await;
    }
}
