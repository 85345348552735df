//! The Conductor-compatible model. JSON field names are Conductor OSS's, so definitions written for
//! Conductor load unchanged and Conductor's clients read Baton's workflows and tasks. Fields that Baton
//! does not interpret yet are kept in `extra` maps so that a definition round-trips unchanged.

pub mod access;
pub mod dsl;
mod dsl_def;
mod event;
pub mod omit;
mod requests;
mod schema;
pub mod secret;
mod status;
mod task;
mod task_def;
mod trigger;
mod workflow;
mod workflow_def;

pub use dsl_def::*;
pub use event::*;
pub use requests::*;
pub use schema::*;
pub use status::*;
pub use task::*;
pub use task_def::*;
pub use trigger::*;
pub use workflow::*;
pub use workflow_def::*;

/// A JSON object, the type of every input and output map.
pub type Json = serde_json::Map<String, serde_json::Value>;

/// Milliseconds since the Unix epoch, as Conductor reports times.
pub type EpochMs = i64;
