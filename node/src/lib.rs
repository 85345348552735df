//! The Baton node: the partitions' state machines and actors that run the engine (`baton-engine`),
//! the Conductor-compatible HTTP API, and the `baton` binary that runs them.
//!
//! Layout, from the bottom up: `partition` replicates and acts (state machine, actors, timers);
//! `meta` holds definitions; `queue` hands ready tasks to pollers; `host` is this node in its
//! cluster (groups, members, routing to leaders); `service` holds one service per concern over
//! the host, gathered in [`Node`]; `api` (HTTP) and `gateway` (QUIC workers) call the services;
//! `serve` runs them.

pub mod access;
pub mod api;
mod catalog;
pub mod clock;
pub mod error;
pub mod events;
mod failpoint;
mod gateway;
pub mod host;
mod meta;
pub mod metrics;
pub mod options;
mod partition;
pub mod placement;
mod queue;
pub mod secrets;
pub mod serve;
pub mod service;
#[cfg(test)]
mod testing;
mod watch;

pub use error::Error;
pub use options::{ClusterOptions, Options};
pub use service::Node;
