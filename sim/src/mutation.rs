//! The deliberate bugs the simulator can switch on (`--mutation <name>`): the Raft and storage
//! layer's (`cluster::mutation`) and the workflow engine's (`engine::mutation`), one at a time.

use cluster::mutation::Mutation as Storage;
use engine::mutation::Mutation as Workflow;

/// Every mutation's command-line name.
pub fn names() -> Vec<&'static str> {
    let storage = Storage::ALL.iter().map(|m| m.name());
    storage
        .chain(Workflow::ALL.iter().map(|m| m.name()))
        .collect()
}

/// Why a mutation cannot be switched on.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("--mutation must be one of {}", names().join(", "))]
    Unknown,
    #[error("{0}: run the simulator through sim/run")]
    NotBuiltIn(&'static str),
}

/// Switches the mutation called `name` on (every other off), or every mutation off with `None`.
pub fn activate(name: Option<&str>) -> Result<(), Refused> {
    let storage = name.and_then(|n| Storage::ALL.into_iter().find(|m| m.name() == n));
    let workflow = name.and_then(|n| Workflow::ALL.into_iter().find(|m| m.name() == n));
    if name.is_some() && storage.is_none() && workflow.is_none() {
        return Err(Refused::Unknown);
    }
    cluster::mutation::activate(storage).map_err(Refused::NotBuiltIn)?;
    engine::mutation::activate(workflow).map_err(Refused::NotBuiltIn)
}
