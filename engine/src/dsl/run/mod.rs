//! Running a DSL instance: the decider that moves an instance through its document.

mod errors;

pub use errors::timeout_error;
