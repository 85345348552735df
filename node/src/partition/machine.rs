//! `WorkflowMachine`: applies committed [`PartitionCommand`]s to a partition's state tree. It checks
//! versions and writes what the command carries plus the index rows derived from it; it never runs the
//! decider and never reads a clock, so every replica that applies the same log holds the same state.

use super::keys;
use cluster::storage::{Batch, Tree};
use proto::limits::EVENT_QUEUE_MAX;
use proto::model::EventExecution;
use proto::record::{
    self, Dedup, PartitionCommandView, PartitionOutcome, PatchHeader, QueueMessage, RecordHeader,
    TaskHeader, WorkflowHeader,
};
use serde_json::value::RawValue;

/// The state machine of a workflow partition.
#[derive(Debug, Default)]
pub struct WorkflowMachine;

impl WorkflowMachine {
    /// Stores `raw` (a record's JSON, as the proposer encoded it) if the versions allow, in place
    /// of what was stored (a record and its patches); only its header is decoded.
    fn put(state: &Tree, batch: &mut Batch, raw: &RawValue, expected: u64) -> PartitionOutcome {
        let Some(header) = header::<RecordHeader>(raw, "workflow record in a put") else {
            return PartitionOutcome::VersionConflict { stored: 0 };
        };
        let id = &header.workflow.workflow_id;
        let stored = stored_version(state, id);
        if stored != expected || header.version <= stored {
            return PartitionOutcome::VersionConflict { stored };
        }
        batch.insert(keys::workflow(id), record::encode_raw(raw));
        Self::index(
            batch,
            header.version,
            &header.workflow,
            &header.workflow.tasks,
        );
        PartitionOutcome::Applied
    }

    /// Appends `raw` (a patch's JSON) to the stored chain if the versions allow; only its header
    /// is decoded.
    fn patch(state: &Tree, batch: &mut Batch, raw: &RawValue, expected: u64) -> PartitionOutcome {
        let Some(header) = header::<PatchHeader>(raw, "workflow patch") else {
            return PartitionOutcome::VersionConflict { stored: 0 };
        };
        let id = &header.workflow.workflow_id;
        let stored = stored_version(state, id);
        let key = keys::workflow(id);
        let chain = match state.get(&key) {
            Ok(Some(chain)) if stored == expected && header.version > stored => chain,
            _ => return PartitionOutcome::VersionConflict { stored },
        };
        let mut longer = Vec::with_capacity(chain.len() + raw.get().len());
        longer.extend_from_slice(&chain);
        longer.extend_from_slice(raw.get().as_bytes());
        batch.insert(key, longer);
        Self::index(batch, header.version, &header.workflow, &header.tasks);
        PartitionOutcome::Applied
    }

    /// The version row and the index rows of a write (`tasks`: those it carries).
    fn index(batch: &mut Batch, version: u64, wf: &WorkflowHeader, tasks: &[TaskHeader]) {
        let id = &wf.workflow_id;
        batch.insert(keys::version(id), version.to_be_bytes().to_vec());
        // Written whether or not the row exists: the state tree buffers writes in memory
        // (`storage/buffered.rs`), so a row written again before the next checkpoint costs
        // nothing more on disk, while looking for it first missed the buffer and read sled for
        // every new task (2% of a loaded node's CPU).
        for task in tasks {
            batch.insert(keys::task(&task.task_id), id.as_str().as_bytes());
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
    }

    fn remove(state: &Tree, batch: &mut Batch, id: &proto::WorkflowId) -> PartitionOutcome {
        if !matches!(state.contains_key(keys::workflow(id)), Ok(true)) {
            return PartitionOutcome::NotFound;
        }
        // A record this build cannot read still goes; its index rows are left for a later sweep.
        if let Ok(Some(stored)) = super::stored::read(state, id) {
            let wf = stored.record.workflow;
            for task in &wf.tasks {
                batch.remove(keys::task(&task.task_id));
            }
            batch.remove(keys::running(&wf.workflow_name, id));
            if let Some(c) = &wf.correlation_id {
                batch.remove(keys::correlated(c, id));
            }
        }
        batch.remove(keys::workflow(id));
        batch.remove(keys::version(id));
        PartitionOutcome::Applied
    }
}

impl WorkflowMachine {
    fn put_execution(
        state: &Tree,
        batch: &mut Batch,
        handler: &str,
        execution: EventExecution,
        create: bool,
    ) -> PartitionOutcome {
        let key = keys::execution(handler, &execution.id);
        let stored = state
            .get(&key)
            .ok()
            .flatten()
            .and_then(|b| record::decode::<EventExecution>(&b).ok());
        let keep = match &stored {
            Some(s) => create || s.status.is_final(),
            None => false,
        };
        match stored {
            Some(s) if keep => PartitionOutcome::Execution(Box::new(s)),
            _ => {
                batch.insert(key, record::encode(&execution));
                PartitionOutcome::Execution(Box::new(execution))
            }
        }
    }

    fn publish(
        state: &Tree,
        batch: &mut Batch,
        queue: &str,
        message: &QueueMessage,
    ) -> PartitionOutcome {
        let len = read_u64(state, &keys::queue_len(queue));
        if len >= EVENT_QUEUE_MAX {
            return PartitionOutcome::QueueFull;
        }
        let seq = read_u64(state, keys::MESSAGE_SEQ) + 1;
        batch.insert(keys::MESSAGE_SEQ, seq.to_be_bytes().to_vec());
        batch.insert(keys::queue_len(queue), (len + 1).to_be_bytes().to_vec());
        batch.insert(keys::message(queue, seq), record::encode(message));
        PartitionOutcome::Published { seq }
    }

    /// Whether the fingerprint was published within the window; records it when not, and
    /// expires a few fingerprints older than the window.
    fn seen(state: &Tree, batch: &mut Batch, d: Dedup) -> bool {
        let key = keys::fingerprint(d.fingerprint);
        let last = state
            .get(&key)
            .ok()
            .flatten()
            .map(|_| read_u64(state, &key) as i64);
        if last.is_some_and(|t| d.now.saturating_sub(t) < d.window_ms) {
            return true;
        }
        if let Some(t) = last {
            batch.remove(keys::fingerprint_by_time(t, d.fingerprint));
        }
        batch.insert(key, d.now.to_be_bytes().to_vec());
        batch.insert(keys::fingerprint_by_time(d.now, d.fingerprint), Vec::new());
        for kv in state
            .scan_prefix(keys::FINGERPRINT_TIME_PREFIX)
            .take(FINGERPRINTS_EXPIRED_PER_PUBLISH)
        {
            let Ok((k, _)) = kv else { break };
            match keys::parse_fingerprint_by_time(&k) {
                // Its own old row, already replaced above.
                Some((_, fp)) if fp == d.fingerprint => {}
                Some((t, fp)) if d.now.saturating_sub(t) >= d.window_ms => {
                    batch.remove(k.to_vec());
                    batch.remove(keys::fingerprint(fp));
                }
                _ => break,
            }
        }
        false
    }

    fn ack(state: &Tree, batch: &mut Batch, queue: &str, seq: u64) -> PartitionOutcome {
        let key = keys::message(queue, seq);
        if !matches!(state.contains_key(&key), Ok(true)) {
            return PartitionOutcome::NotFound;
        }
        batch.remove(key);
        let len = read_u64(state, &keys::queue_len(queue));
        if len > 1 {
            batch.insert(keys::queue_len(queue), (len - 1).to_be_bytes().to_vec());
        } else {
            batch.remove(keys::queue_len(queue));
        }
        PartitionOutcome::Applied
    }
}

/// The header of a put's record or a patch; `None` (logged) when it does not decode.
fn header<T: serde::de::DeserializeOwned>(raw: &RawValue, what: &str) -> Option<T> {
    serde_json::from_str(raw.get())
        .map_err(|e| tracing::error!(error = %e, "undecodable {what}; skipped"))
        .ok()
}

/// How many expired fingerprints one publish removes (keeps the table bounded by the rate).
const FINGERPRINTS_EXPIRED_PER_PUBLISH: usize = 8;

/// A u64 (big-endian) row, 0 when absent.
fn read_u64(state: &Tree, key: &[u8]) -> u64 {
    match state.get(key) {
        Ok(Some(v)) if v.len() == 8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&v);
            u64::from_be_bytes(b)
        }
        _ => 0,
    }
}

/// The version of the stored record of `id`, 0 when none.
pub fn stored_version(state: &Tree, id: &proto::WorkflowId) -> u64 {
    read_u64(state, &keys::version(id))
}

impl cluster::StateMachine for WorkflowMachine {
    fn apply(&self, state: &Tree, batch: &mut Batch, command: &[u8]) -> Vec<u8> {
        let outcome = match record::decode_borrowed::<PartitionCommandView>(command) {
            Ok(PartitionCommandView::PutWorkflow {
                record,
                expected_version,
            }) => Self::put(state, batch, record, expected_version),
            Ok(PartitionCommandView::PatchWorkflow {
                patch,
                expected_version,
            }) => Self::patch(state, batch, patch, expected_version),
            Ok(PartitionCommandView::RemoveWorkflow { workflow_id }) => {
                Self::remove(state, batch, &workflow_id)
            }
            Ok(PartitionCommandView::PutExecution {
                handler,
                execution,
                create,
            }) => Self::put_execution(state, batch, &handler, *execution, create),
            Ok(PartitionCommandView::Publish {
                queue,
                message,
                dedup,
            }) => match dedup {
                Some(d) if Self::seen(state, batch, d) => PartitionOutcome::Duplicate,
                _ => Self::publish(state, batch, &queue, &message),
            },
            Ok(PartitionCommandView::MarkSchedule { name, time }) => {
                let key = keys::schedule_mark(&name);
                if time > read_u64(state, &key) as i64 {
                    batch.insert(key, time.to_be_bytes().to_vec());
                }
                PartitionOutcome::Applied
            }
            Ok(PartitionCommandView::Ack { queue, seq }) => Self::ack(state, batch, &queue, seq),
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
    use proto::record::{PartitionCommand, PartitionCommandRef, WorkflowRecord};
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

    /// Applies a borrowed command (a put or a patch).
    fn apply_ref(state: &Tree, command: &PartitionCommandRef) -> PartitionOutcome {
        let mut batch = Batch::default();
        let out = WorkflowMachine.apply(state, &mut batch, &record::encode(command));
        state.apply_batch(batch).expect("the batch applies");
        outcome(&out)
    }

    #[test]
    fn patches_follow_the_record_until_a_full_write_replaces_them() {
        use crate::partition::stored;
        use proto::record::patch::diff;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let state = db.open_tree("state").expect("a tree");
        let mut h = H::start(def_of(vec![simple("a"), simple("b")]), json!({}));
        let id = h.rec.workflow.workflow_id.clone();
        let first = h.rec.clone();
        fn put(rec: &WorkflowRecord, expected_version: u64) -> PartitionCommandRef<'_> {
            PartitionCommandRef::PutWorkflow {
                record: rec,
                expected_version,
            }
        }
        // A patch needs a record to follow.
        h.poll("a");
        let early = PartitionCommandRef::PatchWorkflow {
            patch: diff(&first, &h.rec).expect("a patch"),
            expected_version: 0,
        };
        assert_eq!(
            apply_ref(&state, &early),
            PartitionOutcome::VersionConflict { stored: 0 }
        );
        assert_eq!(
            apply_ref(&state, &put(&first, 0)),
            PartitionOutcome::Applied
        );

        let mut prev = first.clone();
        for (step, expected) in [(0, 1u64), (1, 2)] {
            if step == 1 {
                h.complete("a", json!({"done": true}));
            }
            let cmd = PartitionCommandRef::PatchWorkflow {
                patch: diff(&prev, &h.rec).expect("a patch"),
                expected_version: expected,
            };
            let bytes = record::encode(&cmd);
            let owned: PartitionCommand = record::decode(&bytes).expect("decodes");
            assert_eq!(
                record::encode(&owned),
                bytes,
                "the owned patch encodes alike"
            );
            assert_eq!(apply_ref(&state, &cmd), PartitionOutcome::Applied);
            assert_eq!(
                apply_ref(&state, &cmd),
                PartitionOutcome::VersionConflict {
                    stored: expected + 1
                },
                "a patch applies once"
            );
            prev = h.rec.clone();
        }
        let read = stored::read(&state, &id).expect("reads").expect("stored");
        assert_eq!((read.record.clone(), read.patches), (h.rec.clone(), 2));
        assert_eq!(
            stored::records(&state).collect::<Vec<_>>(),
            vec![h.rec.clone()]
        );
        // Task b was added by the second patch; its index row came with it.
        let b = h.task("b").task_id.clone();
        assert!(state.contains_key(keys::task(&b)).expect("reads"));
        assert_eq!(stored_version(&state, &id), 3);

        h.poll("b");
        assert_eq!(
            apply_ref(&state, &put(&h.rec, 3)),
            PartitionOutcome::Applied
        );
        let read = stored::read(&state, &id).expect("reads").expect("stored");
        assert_eq!((read.record, read.patches), (h.rec.clone(), 0));
        let row = state
            .get(keys::workflow(&id))
            .expect("reads")
            .expect("stored");
        assert_eq!(
            row.as_ref(),
            record::encode(&h.rec).as_slice(),
            "the put replaced the chain"
        );

        h.complete("b", json!({}));
        let cmd = PartitionCommandRef::PatchWorkflow {
            patch: diff(&read_back(&state, &id), &h.rec).expect("a patch"),
            expected_version: 4,
        };
        assert_eq!(apply_ref(&state, &cmd), PartitionOutcome::Applied);
        let remove = PartitionCommand::RemoveWorkflow {
            workflow_id: id.clone(),
        };
        assert_eq!(apply(&state, &remove), PartitionOutcome::Applied);
        assert_eq!(state.scan_prefix(keys::WORKFLOW_PREFIX).count(), 0);
        assert!(!state.contains_key(keys::task(&b)).expect("reads"));
        assert!(stored::read(&state, &id).expect("reads").is_none());
    }

    fn read_back(state: &Tree, id: &proto::WorkflowId) -> WorkflowRecord {
        crate::partition::stored::read(state, id)
            .expect("reads")
            .expect("stored")
            .record
    }

    fn apply(state: &Tree, command: &PartitionCommand) -> PartitionOutcome {
        let mut batch = Batch::default();
        let out = WorkflowMachine.apply(state, &mut batch, &record::encode(command));
        state.apply_batch(batch).expect("the batch applies");
        outcome(&out)
    }

    fn execution(status: proto::model::ExecutionStatus) -> proto::model::EventExecution {
        proto::model::EventExecution {
            id: "m1_0".into(),
            message_id: "m1".into(),
            name: "h".into(),
            event: "conductor:q".into(),
            created: 1,
            status,
            action: proto::model::ActionType::StartWorkflow,
            output: Default::default(),
        }
    }

    #[test]
    fn the_first_execution_record_wins_and_a_final_one_absorbs() {
        use proto::model::ExecutionStatus::*;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let state = db.open_tree("state").expect("a tree");
        let put = |status, create| PartitionCommand::PutExecution {
            handler: "h".into(),
            execution: Box::new(execution(status)),
            create,
        };
        let stored = |o: PartitionOutcome| match o {
            PartitionOutcome::Execution(e) => e.status,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(stored(apply(&state, &put(InProgress, true))), InProgress);
        // A second claim (a redelivery) finds the first.
        assert_eq!(stored(apply(&state, &put(Completed, true))), InProgress);
        assert_eq!(stored(apply(&state, &put(Completed, false))), Completed);
        // Final records absorb: neither a claim nor a finish changes them.
        assert_eq!(stored(apply(&state, &put(InProgress, true))), Completed);
        assert_eq!(stored(apply(&state, &put(Failed, false))), Completed);
    }

    #[test]
    fn queued_messages_keep_their_order_and_the_queue_is_bounded() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let state = db.open_tree("state").expect("a tree");
        let publish = |id: &str| PartitionCommand::Publish {
            queue: "a:b".into(),
            message: Box::new(QueueMessage {
                id: id.into(),
                payload: json!({"id": id}),
                published: 0,
                source: Default::default(),
                trace_id: String::new(),
                priority: 1,
            }),
            dedup: None,
        };
        assert_eq!(
            apply(&state, &publish("x")),
            PartitionOutcome::Published { seq: 1 }
        );
        assert_eq!(
            apply(&state, &publish("y")),
            PartitionOutcome::Published { seq: 2 }
        );
        let queued: Vec<(String, u64)> = state
            .scan_prefix(keys::MESSAGE_PREFIX)
            .map(|kv| keys::parse_message(&kv.expect("reads").0).expect("a message key"))
            .collect();
        assert_eq!(queued, vec![("a:b".into(), 1), ("a:b".into(), 2)]);
        let ack = |seq| PartitionCommand::Ack {
            queue: "a:b".into(),
            seq,
        };
        assert_eq!(apply(&state, &ack(1)), PartitionOutcome::Applied);
        assert_eq!(apply(&state, &ack(1)), PartitionOutcome::NotFound);
        assert_eq!(read_u64(&state, &keys::queue_len("a:b")), 1);

        state
            .insert(
                keys::queue_len("a:b"),
                EVENT_QUEUE_MAX.to_be_bytes().to_vec(),
            )
            .expect("writes");
        assert_eq!(apply(&state, &publish("z")), PartitionOutcome::QueueFull);
    }

    #[test]
    fn the_gate_drops_the_same_content_within_its_window_and_forgets_old_fingerprints() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let state = db.open_tree("state").expect("a tree");
        let publish = |fingerprint: u64, now: i64| PartitionCommand::Publish {
            queue: "webhook:w".into(),
            message: Box::new(QueueMessage {
                id: format!("m{now}"),
                payload: json!({}),
                published: now,
                source: Default::default(),
                trace_id: String::new(),
                priority: 1,
            }),
            dedup: Some(Dedup {
                fingerprint,
                now,
                window_ms: 1_000,
            }),
        };
        assert!(matches!(
            apply(&state, &publish(7, 10_000)),
            PartitionOutcome::Published { .. }
        ));
        assert_eq!(
            apply(&state, &publish(7, 10_500)),
            PartitionOutcome::Duplicate
        );
        assert!(matches!(
            apply(&state, &publish(8, 10_600)),
            PartitionOutcome::Published { .. }
        ));
        // Past the window the same content is new again, and the stale fingerprint 8 expires.
        assert!(matches!(
            apply(&state, &publish(7, 11_700)),
            PartitionOutcome::Published { .. }
        ));
        assert!(!state.contains_key(keys::fingerprint(8)).expect("reads"));
        let by_time: Vec<_> = state
            .scan_prefix(keys::FINGERPRINT_TIME_PREFIX)
            .map(|kv| keys::parse_fingerprint_by_time(&kv.expect("reads").0).expect("a key"))
            .collect();
        assert_eq!(by_time, vec![(11_700, 7)]);
    }
}
