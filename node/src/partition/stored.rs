//! A workflow as a partition's state tree holds it: one row, the last full record with the
//! patches written since appended (a chain, see [`proto::record::patch`]). Every read of a
//! workflow goes through here.

use super::keys;
use crate::error::{Error, Result};
use cluster::storage::Tree;
use proto::record::{patch, WorkflowRecord};
use proto::{TaskId, WorkflowId};

/// A workflow read back, and how many patches follow its last full record.
pub struct Stored {
    pub record: WorkflowRecord,
    pub patches: u32,
    /// The stored row's length: the last full record's JSON and every patch since, which bounds
    /// the size of the record they make from above.
    pub bytes: usize,
}

/// The committed state of `id`, or `None` when it has none.
pub fn read(state: &Tree, id: &WorkflowId) -> Result<Option<Stored>> {
    let failed = |e: &dyn std::fmt::Display| Error::Internal(format!("reading workflow {id}: {e}"));
    let Some(bytes) = state.get(keys::workflow(id)).map_err(|e| failed(&e))? else {
        return Ok(None);
    };
    let (record, patches) = patch::decode_chain(&bytes).map_err(|e| failed(&e))?;
    Ok(Some(Stored {
        record,
        patches,
        bytes: bytes.len(),
    }))
}

/// The workflow that owns `task`: the one among those whose id begins as the task's does that
/// holds it (see [`TaskId::of_workflow`]), or, for a task made before task ids began so, the one
/// its index row names. `None` when no workflow here holds it.
pub fn owner_of_task(state: &Tree, task: &TaskId) -> Result<Option<WorkflowId>> {
    let failed = |e: &dyn std::fmt::Display| Error::Internal(format!("finding task {task}: {e}"));
    if let Some(row) = state.get(keys::task(task)).map_err(|e| failed(&e))? {
        let id = std::str::from_utf8(&row)
            .ok()
            .and_then(|s| WorkflowId::parse(s).ok())
            .ok_or_else(|| failed(&"its index row is not a workflow id"))?;
        return Ok(Some(id));
    }
    let Some(prefix) = task.owner_prefix() else {
        return Ok(None);
    };
    let scan = [keys::WORKFLOW_PREFIX, prefix.as_bytes()].concat();
    for kv in state.scan_prefix(scan) {
        let (key, bytes) = kv.map_err(|e| failed(&e))?;
        let (record, _) = patch::decode_chain(&bytes).map_err(|e| {
            failed(&format!(
                "workflow {} does not decode: {e}",
                String::from_utf8_lossy(&key)
            ))
        })?;
        if record.workflow.tasks.iter().any(|t| &t.task_id == task) {
            return Ok(Some(record.workflow.workflow_id));
        }
    }
    Ok(None)
}

/// Every workflow of the tree in id order (for searches and the simulator's checks); one that
/// does not decode is left out and logged.
pub fn records(state: &Tree) -> impl Iterator<Item = WorkflowRecord> + '_ {
    state
        .scan_prefix(keys::WORKFLOW_PREFIX)
        .filter_map(|kv| kv.ok())
        .filter_map(|(key, bytes)| match patch::decode_chain(&bytes) {
            Ok((record, _)) => Some(record),
            Err(e) => {
                let key = String::from_utf8_lossy(&key).into_owned();
                tracing::error!(%key, error = %e, "undecodable workflow record");
                None
            }
        })
}
