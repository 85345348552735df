//! `WorkflowMachine`: applies committed [`PartitionCommand`]s to a partition's state tree. It checks
//! versions and writes what the command carries plus the index rows derived from it; it never runs the
//! decider and never reads a clock, so every replica that applies the same log holds the same state.

use super::keys;
use cluster::storage::{Batch, Tree};
use proto::limits::EVENT_QUEUE_MAX;
use proto::model::EventExecution;
use proto::record::{
    self, Dedup, PartitionCommandView, PartitionOutcome, QueueMessage, RecordHeader, WorkflowRecord,
};
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
