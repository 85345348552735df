//! Baton's vocabulary, shared by every crate: typed ids, the Conductor-compatible model (definitions,
//! workflows, tasks, requests), and the versioned records that partitions replicate.
//!
//! This crate does no I/O and knows no runtime: it is plain data with serde, so that the engine, the
//! cluster layer, the simulator and the tools agree on one spelling of every field. Field names follow
//! Conductor OSS exactly (camelCase JSON) so that Conductor's own clients read Baton's answers.

pub mod check;
pub mod code;
#[cfg(any(test, feature = "golden"))]
pub mod golden;
pub mod hash;
pub mod ids;
pub mod input;
pub mod limits;
pub mod model;
pub mod mutation;
pub mod peer;
pub mod record;
pub mod status;
pub mod version;
pub mod worker;

pub use code::ErrorCode;
pub use ids::{NodeId, PartitionId, TaskId, WorkflowId};
