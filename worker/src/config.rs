//! A worker's checked configuration (built by `worker::Builder`), read by its connection driver.

use crate::handler::HandlerFn;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// One task type's handler and how it subscribes.
pub(crate) struct Registered {
    pub(crate) run: HandlerFn,
    /// Most tasks of the type handled at once; the subscription's capacity. 1..=CREDIT_MAX.
    pub(crate) concurrency: u32,
    pub(crate) domain: Option<String>,
}

/// A worker's checked configuration, shared by its driver.
pub(crate) struct Config {
    /// Tried in turn; never empty.
    pub(crate) nodes: Vec<SocketAddr>,
    pub(crate) quic: quinn::ClientConfig,
    pub(crate) worker_id: Arc<str>,
    /// By task type; 1..=SUBSCRIPTIONS_MAX entries.
    pub(crate) handlers: BTreeMap<String, Registered>,
    pub(crate) connect_timeout: Duration,
    pub(crate) shutdown_timeout: Duration,
}
