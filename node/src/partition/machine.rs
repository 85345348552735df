//! `WorkflowMachine`: applies committed [`PartitionCommand`]s to a partition's state tree. It checks
//! versions and writes what the command carries plus the index rows derived from it; it never runs the
//! decider and never reads a clock, so every replica that applies the same log holds the same state.

use super::keys;
use cluster::storage::{Batch, Tree};
use proto::record::{self, PartitionCommandView, PartitionOutcome, RecordHeader, WorkflowRecord};
use serde_json::value::RawValue;

/// The state machine of a workflow partition.
#[derive(Debug, Default)]
pub struct WorkflowMachine;

impl WorkflowMachine {
    /// Stores `raw` (a record's JSON, as the proposer encoded it) if the versions allow; only its
    /// header is decoded.
    fn put(state: &Tree, batch: &mut Batch, raw: &RawValue, expected: u64) -> PartitionOutcome {
        let header: RecordHeader = match serde_json::from_str(raw.get()) {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(error = %e, "undecodable workflow record in a put; skipped");
                return PartitionOutcome::VersionConflict { stored: 0 };
            }
        };
        let wf = &header.workflow;
        let id = &wf.workflow_id;
        let stored = stored_version(state, id);
        if stored != expected || header.version <= stored {
            return PartitionOutcome::VersionConflict { stored };
        }
        batch.insert(keys::workflow(id), record::encode_raw(raw));
        batch.insert(keys::version(id), header.version.to_be_bytes().to_vec());
        for task in &wf.tasks {
            let key = keys::task(&task.task_id);
            if !matches!(state.contains_key(&key), Ok(true)) {
                batch.insert(key, id.as_str().as_bytes());
            }
        }
        let running_key = keys::running(&wf.workflow_name, id);
        if wf.status.is_terminal() {
            batch.remove(running_key);
        } else {
            batch.insert(running_key, wf.workflow_version.to_be_bytes().to_vec());
        }
        if let Some(c) = &wf.correlation_id {
            batch.insert(keys::correlated(c, id), Vec::new());
        }
        PartitionOutcome::Applied
    }

    fn remove(state: &Tree, batch: &mut Batch, id: &proto::WorkflowId) -> PartitionOutcome {
        let Ok(Some(bytes)) = state.get(keys::workflow(id)) else {
            return PartitionOutcome::NotFound;
        };
        batch.remove(keys::workflow(id));
        batch.remove(keys::version(id));
        // A record this build cannot decode still goes; its index rows are left for a later sweep.
        if let Ok(rec) = record::decode::<WorkflowRecord>(&bytes) {
            let wf = rec.workflow;
            for task in &wf.tasks {
                batch.remove(keys::task(&task.task_id));
            }
            batch.remove(keys::running(&wf.workflow_name, id));
            if let Some(c) = &wf.correlation_id {
                batch.remove(keys::correlated(c, id));
            }
        }
        PartitionOutcome::Applied
    }
}

/// The version of the stored record of `id`, 0 when none.
pub fn stored_version(state: &Tree, id: &proto::WorkflowId) -> u64 {
    match state.get(keys::version(id)) {
        Ok(Some(v)) if v.len() == 8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&v);
            u64::from_be_bytes(b)
        }
        _ => 0,
    }
}

impl cluster::StateMachine for WorkflowMachine {
    fn apply(&self, state: &Tree, batch: &mut Batch, command: &[u8]) -> Vec<u8> {
        let outcome = match record::decode_borrowed::<PartitionCommandView>(command) {
            Ok(PartitionCommandView::PutWorkflow {
                record,
                expected_version,
            }) => Self::put(state, batch, record, expected_version),
            Ok(PartitionCommandView::RemoveWorkflow { workflow_id }) => {
                Self::remove(state, batch, &workflow_id)
            }
            Err(e) => {
                // Only this build's proposers write the log, so this means a newer format reached an old
                // replica; refusing (and saying so) keeps replicas identical.
                tracing::error!(error = %e, "undecodable partition command; skipped");
                PartitionOutcome::VersionConflict { stored: 0 }
            }
        };
        record::encode(&outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::{def_of, simple, H};
    use cluster::StateMachine;
    use proto::record::{PartitionCommand, PartitionCommandRef};
    use serde_json::json;

    fn outcome(bytes: &[u8]) -> PartitionOutcome {
        record::decode(bytes).expect("an outcome")
    }

    #[test]
    fn a_put_stores_the_proposers_bytes_with_its_index_rows_and_only_once() {
        let h = H::start(def_of(vec![simple("a")]), json!({}));
        let borrowed = record::encode(&PartitionCommandRef::PutWorkflow {
            record: &h.rec,
            expected_version: 0,
        });
        let owned = record::encode(&PartitionCommand::PutWorkflow {
            record: Box::new(h.rec.clone()),
            expected_version: 0,
        });
        assert_eq!(
            borrowed, owned,
            "the borrowed command encodes as the owned one"
        );

        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let state = db.open_tree("state").expect("a tree");
        let mut batch = Batch::default();
        let out = WorkflowMachine.apply(&state, &mut batch, &borrowed);
        assert_eq!(outcome(&out), PartitionOutcome::Applied);
        state.apply_batch(batch).expect("the batch applies");

        let id = &h.rec.workflow.workflow_id;
        let stored = state
            .get(keys::workflow(id))
            .expect("reads")
            .expect("stored");
        assert_eq!(stored.as_ref(), record::encode(&h.rec).as_slice());
        assert_eq!(stored_version(&state, id), 1);
        assert!(!h.rec.workflow.tasks.is_empty());
        for task in &h.rec.workflow.tasks {
            assert!(state
                .contains_key(keys::task(&task.task_id))
                .expect("reads"));
        }
        let running = keys::running(&h.rec.workflow.workflow_name, id);
        assert!(state.contains_key(running).expect("reads"));

        let mut again = Batch::default();
        let out = WorkflowMachine.apply(&state, &mut again, &borrowed);
        assert_eq!(
            outcome(&out),
            PartitionOutcome::VersionConflict { stored: 1 }
        );
        assert!(again.is_empty(), "a conflicting put writes nothing");
    }
}
