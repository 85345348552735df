//! The Baton node: the partitions' state machines and actors that run the engine (`baton-engine`),
//! the Conductor-compatible HTTP API, and the `baton` binary that runs them.
//!
//! Layout: `partition` replicates and acts (state machine, actors, timers); `meta` holds
//! definitions; `queue` hands ready tasks to pollers; `server` wires a node together and implements
//! the operations; `service::Node` is the handle the `api` (HTTP) calls.

pub mod api;
pub mod clock;
pub mod error;
pub mod events;
pub mod failpoint;
pub mod gateway;
pub mod meta;
pub mod metrics;
pub mod partition;
pub mod placement;
pub mod queue;
pub mod server;
pub mod service;
pub mod watch;

pub use error::Error;
pub use service::Node;
