//! A workflow as a partition's state tree holds it: one row, the last full record with the
//! patches written since appended (a chain, see [`proto::record::patch`]). Every read of a
//! workflow goes through here.

use super::keys;
use crate::error::{Error, Result};
use cluster::storage::Tree;
use proto::record::{patch, WorkflowRecord};
use proto::WorkflowId;

/// A workflow read back, and how many patches follow its last full record.
pub struct Stored {
    pub record: WorkflowRecord,
    pub patches: u32,
}

/// The committed state of `id`, or `None` when it has none.
pub fn read(state: &Tree, id: &WorkflowId) -> Result<Option<Stored>> {
    let failed = |e: &dyn std::fmt::Display| Error::Internal(format!("reading workflow {id}: {e}"));
    let Some(bytes) = state.get(keys::workflow(id)).map_err(|e| failed(&e))? else {
        return Ok(None);
    };
    let (record, patches) = patch::decode_chain(&bytes).map_err(|e| failed(&e))?;
    Ok(Some(Stored { record, patches }))
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
