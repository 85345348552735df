//! A workflow as a partition's state tree holds it: one row, the last full record with the
//! patches written since appended (a chain, see [`proto::record::patch`]). Every read of a
//! workflow goes through here.

use super::keys;
use crate::error::{Error, Result};
use cluster::storage::Tree;
use proto::record::quarantine::{self, Quarantined};
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

/// What a workflow's row holds.
pub enum Row {
    Missing,
    Found(Box<Stored>),
    /// The row is there but does not decode (why): it must be set aside (see [`quarantined`]).
    Undecodable(String),
}

/// The committed state of `id` as [`Row`]; `Err` only when storage fails.
pub fn read_row(state: &Tree, id: &WorkflowId) -> Result<Row> {
    let Some(bytes) = state
        .get(keys::workflow(id))
        .map_err(|e| Error::Internal(format!("reading workflow {id}: {e}")))?
    else {
        return Ok(Row::Missing);
    };
    Ok(match patch::decode_chain(&bytes) {
        Ok((record, patches)) => Row::Found(Box::new(Stored {
            record,
            patches,
            bytes: bytes.len(),
        })),
        Err(e) => Row::Undecodable(e.to_string()),
    })
}

/// The committed state of `id`, or `None` when it has none. A row that does not decode is an
/// error that says so (its partition's leader sets it aside); a quarantined one is a conflict
/// naming the reason.
pub fn read(state: &Tree, id: &WorkflowId) -> Result<Option<Stored>> {
    match read_row(state, id)? {
        Row::Found(stored) => Ok(Some(*stored)),
        Row::Undecodable(e) => Err(Error::Internal(format!(
            "workflow {id}: its stored record does not decode ({e}); it is being set aside, see GET /api/admin/quarantine"
        ))),
        Row::Missing => match quarantined(state, id)? {
            Some(q) => Err(Error::Conflict(format!(
                "workflow {id} is quarantined: its stored record does not decode ({}); see GET /api/admin/quarantine",
                q.reason
            ))),
            None => Ok(None),
        },
    }
}

/// The quarantine entry of `id`, if it was set aside.
pub fn quarantined(state: &Tree, id: &WorkflowId) -> Result<Option<Quarantined>> {
    let failed = |e: &dyn std::fmt::Display| {
        Error::Internal(format!("reading the quarantine entry of {id}: {e}"))
    };
    match state.get(keys::quarantined(id)).map_err(|e| failed(&e))? {
        Some(bytes) => quarantine::decode(&bytes).map(Some).map_err(|e| failed(&e)),
        None => Ok(None),
    }
}

/// Every quarantined workflow of the tree: its id and entry (entries that do not decode are
/// listed with that as their reason).
pub fn quarantine_entries(state: &Tree) -> Result<Vec<(WorkflowId, Quarantined)>> {
    let mut out = Vec::new();
    for kv in state.scan_prefix(keys::QUARANTINE_PREFIX) {
        let (key, bytes) = kv.map_err(|e| Error::Internal(format!("quarantine scan: {e}")))?;
        let Some(id) = std::str::from_utf8(&key[keys::QUARANTINE_PREFIX.len()..])
            .ok()
            .and_then(|s| WorkflowId::parse(s).ok())
        else {
            continue;
        };
        let entry = quarantine::decode(&bytes).unwrap_or_else(|e| Quarantined {
            reason: format!("the quarantine entry does not decode: {e}"),
            time: 0,
            row: bytes.to_vec(),
        });
        out.push((id, entry));
    }
    Ok(out)
}

/// The workflow that owns `task`: the one among those whose id begins as the task's does that
/// holds it (see [`TaskId::of_workflow`]). `None` when no workflow here holds it.
pub fn owner_of_task(state: &Tree, task: &TaskId) -> Result<Option<WorkflowId>> {
    let failed = |e: &dyn std::fmt::Display| Error::Internal(format!("finding task {task}: {e}"));
    let Some(prefix) = task.owner_prefix() else {
        return Ok(None);
    };
    let scan = [keys::WORKFLOW_PREFIX, prefix.as_bytes()].concat();
    for kv in state.scan_prefix(scan) {
        let (key, bytes) = kv.map_err(|e| failed(&e))?;
        // A workflow that does not decode is set aside by its leader; it cannot own the task
        // as far as anyone can tell, and must not hide the others sharing its prefix.
        let Ok((record, _)) = patch::decode_chain(&bytes) else {
            tracing::warn!(key = %String::from_utf8_lossy(&key), "undecodable workflow skipped");
            continue;
        };
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
