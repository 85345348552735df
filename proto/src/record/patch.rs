//! A record patch: what changed in a workflow record between two versions, as one Raft entry
//! carries it and a partition stores it after the full record it follows. Most steps change one
//! task and a few workflow fields, so writing the whole record (its definition and every task) at
//! every step made the entries, the replication and the log several times larger than the change.
//!
//! A patch holds the record's version, the workflow's own fields (its *head*: everything but the
//! task list and the definition), the tasks that changed or were added, the task log lists that
//! changed, and the applied keys when they changed. [`diff`] answers `None` when a patch cannot
//! say what changed (tasks removed or reordered, a new definition, task logs dropped, the status
//! listener's publication changed: only a terminal workflow has one, and it is written whole); the writer
//! then writes the full record. Applying a patch to the record it was taken from gives back the
//! newer record exactly (the engine tests check this for every step they take).
//!
//! A partition stores a workflow as a *chain*: the full record's JSON with the JSON of every
//! patch written since appended to it, behind [`CHAIN_TAG`] and the version it reads as (one row,
//! so a step rewrites one value and a read is one lookup); [`decode_chain`] reads it back.
//!
//! While a head serialises, a thread-local flag makes [`crate::model::omit::head_only`] leave out `tasks` and
//! `workflowDefinition`, as [`super::compact`] leaves out task definitions.

use super::compact::{restore, Omitting};
use super::{CodecError, WorkflowRecord};
use crate::model::{Task, TaskExecLog, Workflow};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;

/// A workflow serialised without its tasks and definition.
struct Head<'a>(&'a Workflow);

impl Serialize for Head<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let previous = crate::model::omit::set_head_only(true);
        let out = self.0.serialize(serializer);
        crate::model::omit::set_head_only(previous);
        out
    }
}

/// A patch that borrows from the newer record, for proposing without copying it (see [`diff`]).
pub struct PatchRef<'a> {
    next: &'a WorkflowRecord,
    tasks: Vec<&'a Task>,
    task_logs: BTreeMap<&'a str, &'a Vec<TaskExecLog>>,
    applied: Option<&'a Vec<String>>,
}

#[derive(Serialize)]
struct PatchFields<'a> {
    version: u64,
    workflow: Head<'a>,
    tasks: &'a [&'a Task],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    task_logs: &'a BTreeMap<&'a str, &'a Vec<TaskExecLog>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    applied: Option<&'a Vec<String>>,
}

impl Serialize for PatchRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // The tasks are the newer record's own, so its definition's omissions apply to them.
        let _omitting = Omitting::install(&self.next.workflow);
        PatchFields {
            version: self.next.version,
            workflow: Head(&self.next.workflow),
            tasks: &self.tasks,
            task_logs: &self.task_logs,
            applied: self.applied,
        }
        .serialize(serializer)
    }
}

/// What changed from `prev` to `next`, or `None` when a patch cannot express it.
pub fn diff<'a>(prev: &WorkflowRecord, next: &'a WorkflowRecord) -> Option<PatchRef<'a>> {
    let (old, new) = (&prev.workflow, &next.workflow);
    if next.version <= prev.version
        || new.workflow_id != old.workflow_id
        || new.tasks.len() < old.tasks.len()
        || new.workflow_definition != old.workflow_definition
        || next.status_notice != prev.status_notice
        || next.lifecycle != prev.lifecycle
    {
        return None;
    }
    let mut tasks = Vec::new();
    for (i, task) in new.tasks.iter().enumerate() {
        match old.tasks.get(i) {
            Some(was) if was.task_id != task.task_id => return None,
            Some(was) if was == task => {}
            _ => tasks.push(task),
        }
    }
    if prev
        .task_logs
        .keys()
        .any(|k| !next.task_logs.contains_key(k))
    {
        return None;
    }
    let task_logs = next
        .task_logs
        .iter()
        .filter(|(k, v)| prev.task_logs.get(*k) != Some(*v))
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let applied = (next.applied != prev.applied).then_some(&next.applied);
    Some(PatchRef {
        next,
        tasks,
        task_logs,
        applied,
    })
}

/// A stored or replicated patch, decoded.
#[derive(Debug, Deserialize)]
pub struct RecordPatch {
    pub version: u64,
    /// The workflow's head: its `tasks` and `workflowDefinition` are empty.
    pub workflow: Workflow,
    /// The tasks that changed (each replaces the task of its id) or are new (appended in order).
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// The task log lists that changed, whole.
    #[serde(default)]
    pub task_logs: BTreeMap<String, Vec<TaskExecLog>>,
    #[serde(default)]
    pub applied: Option<Vec<String>>,
}

impl RecordPatch {
    /// Makes `record` (the record this patch was taken from) the newer record.
    pub fn apply_to(self, record: &mut WorkflowRecord) {
        let mut workflow = self.workflow;
        workflow.tasks = std::mem::take(&mut record.workflow.tasks);
        workflow.workflow_definition = std::mem::take(&mut record.workflow.workflow_definition);
        let mut changed = self.tasks;
        restore(&workflow.workflow_definition, &mut changed);
        for task in changed {
            match workflow
                .tasks
                .iter_mut()
                .find(|t| t.task_id == task.task_id)
            {
                Some(slot) => *slot = task,
                None => workflow.tasks.push(task),
            }
        }
        record.version = self.version;
        record.workflow = workflow;
        record.task_logs.extend(self.task_logs);
        if let Some(applied) = self.applied {
            record.applied = applied;
        }
    }
}

/// The first two bytes (little-endian) of a chain: the tag, then the version of the record it
/// reads as (8 bytes, big-endian), then the record's JSON and its patches'. A replica checks a
/// write against that version without a row of its own for it.
pub const CHAIN_TAG: u16 = 0x5702;
const CHAIN_HEAD: usize = 10;

/// The version a chain reads as; `None` if `row` is not a chain (see [`CHAIN_TAG`]).
pub fn chain_version(row: &[u8]) -> Option<u64> {
    match row {
        [a, b, v @ ..] if u16::from_le_bytes([*a, *b]) == CHAIN_TAG && v.len() >= 8 => {
            let mut version = [0u8; 8];
            version.copy_from_slice(&v[..8]);
            Some(u64::from_be_bytes(version))
        }
        _ => None,
    }
}

/// A chain of one record: `record` is its JSON, at `version`.
pub fn chain_start(version: u64, record: &[u8]) -> Vec<u8> {
    let mut row = Vec::with_capacity(CHAIN_HEAD + record.len());
    row.extend_from_slice(&CHAIN_TAG.to_le_bytes());
    row.extend_from_slice(&version.to_be_bytes());
    row.extend_from_slice(record);
    row
}

/// `row` with `patch` (a patch's JSON, making it `version`) appended.
pub fn chain_extend(row: &[u8], version: u64, patch: &[u8]) -> Result<Vec<u8>, CodecError> {
    let json = chain_json(row)?;
    let mut longer = Vec::with_capacity(CHAIN_HEAD + json.len() + patch.len());
    longer.extend_from_slice(&CHAIN_TAG.to_le_bytes());
    longer.extend_from_slice(&version.to_be_bytes());
    longer.extend_from_slice(json);
    longer.extend_from_slice(patch);
    Ok(longer)
}

/// The JSON of a chain: the record's, then its patches'.
fn chain_json(row: &[u8]) -> Result<&[u8], CodecError> {
    match row {
        [a, b, ..] if u16::from_le_bytes([*a, *b]) != CHAIN_TAG => {
            Err(CodecError::Version(u16::from_le_bytes([*a, *b])))
        }
        _ => row.get(CHAIN_HEAD..).ok_or(CodecError::Truncated),
    }
}

/// Reads a chain (the record's JSON, then the JSON of each patch appended to it): the record
/// with every patch applied, and how many patches there were.
pub fn decode_chain(bytes: &[u8]) -> Result<(WorkflowRecord, u32), CodecError> {
    let json = chain_json(bytes)?;
    let mut records = serde_json::Deserializer::from_slice(json).into_iter::<WorkflowRecord>();
    let mut record = match records.next() {
        Some(record) => record?,
        None => return Err(CodecError::Truncated),
    };
    let rest = &json[records.byte_offset()..];
    let mut patches = 0;
    for patch in serde_json::Deserializer::from_slice(rest).into_iter::<RecordPatch>() {
        patch?.apply_to(&mut record);
        patches += 1;
    }
    Ok((record, patches))
}
