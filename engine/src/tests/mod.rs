//! Engine tests: feed inputs to `start`/`decide` through the driver in [`crate::testing`] and
//! assert exact states and effects.

mod at_most_once;
mod catalogue;
mod do_while;
mod fork;
mod input_template;
mod listener;
mod ops;
mod schema;
mod simple;
mod stored;
mod sub_workflow;
mod system;
mod timeouts;

pub(crate) use crate::testing::*;
pub(crate) use crate::*;
pub(crate) use proto::model::{
    task_type, TaskDef, TaskResultStatus, TaskStatus, WorkflowDef, WorkflowStatus, WorkflowTask,
};
pub(crate) use proto::PartitionId;
pub(crate) use rand::SeedableRng;
pub(crate) use rand_chacha::ChaCha8Rng;
pub(crate) use serde_json::{json, Value};
