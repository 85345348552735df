//! `WorkflowMachine`: applies committed [`PartitionCommand`]s to a partition's state tree. It checks
//! versions and writes what the command carries plus the index rows derived from it; it never runs the
//! decider and never reads a clock, so every replica that applies the same log holds the same state.

use super::keys;
use cluster::storage::{Batch, Tree};
use proto::limits::EVENT_QUEUE_MAX;
use proto::model::EventExecution;
use proto::record::dead_letter::Attempts;
use proto::record::{
    self, patch,
    write::{WriteHead, WriteKind},
    Dedup, PartitionCommand, PartitionOutcome, QueueMessage,
};
use proto::WorkflowId;

/// The state machine of a workflow partition.
#[derive(Debug, Default)]
pub struct WorkflowMachine;

impl WorkflowMachine {
    /// Applies a workflow's write (see [`record::write`]): the head says what to check and which
    /// rows to write, and the body goes into the row as the proposer encoded it.
    fn write(state: &Tree, batch: &mut Batch, head: &WriteHead, body: &[u8]) -> PartitionOutcome {
        let Ok(id) = WorkflowId::parse(head.workflow_id) else {
            tracing::error!(
                id = head.workflow_id,
                "a write names no workflow id; skipped"
            );
            return PartitionOutcome::Undecodable;
        };
        Self::store(state, batch, &id, head, body)
    }

    /// Stores `body` (a record's JSON, or a patch's to append to the stored chain) at the head's
    /// version if the stored version is the head's expected one, with the index rows.
    fn store(
        state: &Tree,
        batch: &mut Batch,
        id: &WorkflowId,
        head: &WriteHead,
        body: &[u8],
    ) -> PartitionOutcome {
        let key = keys::workflow(id);
        let row = state.get(&key).ok().flatten();
        let stored = row.as_deref().and_then(patch::chain_version).unwrap_or(0);
        let version = head.version;
        if stored != head.expected_version || version <= stored {
            return PartitionOutcome::VersionConflict { stored };
        }
        let chain = match (head.kind, &row) {
            (WriteKind::Put, _) => patch::chain_start(version, body),
            (WriteKind::Patch, Some(row)) => match patch::chain_extend(row, version, body) {
                Ok(chain) => chain,
                Err(e) => {
                    tracing::error!(%id, error = %e, "stored chain unreadable; patch skipped");
                    return PartitionOutcome::VersionConflict { stored };
                }
            },
            (WriteKind::Patch, None) => return PartitionOutcome::VersionConflict { stored },
        };
        batch.insert(key, chain);
        Self::index(batch, id, head, row.is_none());
        PartitionOutcome::Applied
    }

    /// The index rows of a write (`new`: the workflow had no row before it).
    fn index(batch: &mut Batch, id: &WorkflowId, wf: &WriteHead, new: bool) {
        // No row per task: a task's id begins with its workflow's (`TaskId::of_workflow`), which
        // is how `stored::owner_of_task` finds it; nor for the version, which the chain begins
        // with.
        let running_key = keys::running(wf.workflow_name, id);
        if wf.terminal {
            batch.remove(running_key);
            // Only terminal writes touch this row (few: the end, and the publications'
            // attempts and reports), so a running workflow's steps cost nothing for it.
            let notice_key = keys::status_notice(id);
            if wf.owes_publication {
                batch.insert(notice_key, Vec::new());
            } else {
                batch.remove(notice_key);
            }
        } else if new {
            // A workflow that ends before the next checkpoint then leaves no trace of this row
            // for sled to look up (see `Batch::insert_fresh`).
            batch.insert_fresh(running_key, wf.workflow_version.to_be_bytes().to_vec());
        } else {
            batch.insert(running_key, wf.workflow_version.to_be_bytes().to_vec());
        }
        if let Some(c) = wf.correlation_id {
            batch.insert(keys::correlated(c, id), Vec::new());
        }
        // A terminal workflow listens no more; a running one's head says for what it listens.
        match &wf.listening {
            _ if wf.terminal => batch.remove(keys::listening(id)),
            Some(types) if types.is_empty() => batch.remove(keys::listening(id)),
            // A list of strings always encodes.
            Some(types) => batch.insert(
                keys::listening(id),
                serde_json::to_vec(types).unwrap_or_default(),
            ),
            None => {}
        }
    }

    fn remove(state: &Tree, batch: &mut Batch, id: &proto::WorkflowId) -> PartitionOutcome {
        if !matches!(state.contains_key(keys::workflow(id)), Ok(true)) {
            return PartitionOutcome::NotFound;
        }
        // A record this build cannot read still goes; its index rows are left for a later sweep.
        if let Ok(Some(stored)) = super::stored::read(state, id) {
            let wf = stored.record.workflow;
            batch.remove(keys::running(&wf.workflow_name, id));
            batch.remove(keys::status_notice(id));
            batch.remove(keys::listening(id));
            if let Some(c) = &wf.correlation_id {
                batch.remove(keys::correlated(c, id));
            }
        }
        batch.remove(keys::workflow(id));
        PartitionOutcome::Applied
    }
}

impl WorkflowMachine {
    /// Moves a workflow's row, unchanged, into the quarantine with `reason`, and drops the
    /// running row the caller found for it (its other index rows are read as pointing nowhere).
    fn quarantine(
        state: &Tree,
        batch: &mut Batch,
        id: &proto::WorkflowId,
        name: Option<&str>,
        reason: String,
        time: i64,
    ) -> PartitionOutcome {
        let Ok(Some(row)) = state.get(keys::workflow(id)) else {
            return PartitionOutcome::NotFound;
        };
        let entry = record::quarantine::Quarantined {
            reason,
            time,
            row: row.to_vec(),
        };
        batch.insert(keys::quarantined(id), record::quarantine::encode(&entry));
        batch.remove(keys::workflow(id));
        batch.remove(keys::status_notice(id));
        batch.remove(keys::listening(id));
        if let Some(name) = name {
            batch.remove(keys::running(name, id));
        }
        PartitionOutcome::Applied
    }

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

    /// Counts one more handling of a message begun.
    fn begin_attempt(
        state: &Tree,
        batch: &mut Batch,
        event: &str,
        message_id: &str,
        now: proto::model::EpochMs,
        last_error: Option<String>,
    ) -> PartitionOutcome {
        let key = keys::attempts(event, message_id);
        let stored = state
            .get(&key)
            .ok()
            .flatten()
            .and_then(|v| record::decode::<Attempts>(&v).ok());
        let attempts = Attempts {
            attempts: stored.as_ref().map_or(0, |a| a.attempts).saturating_add(1),
            first: stored.as_ref().map_or(now, |a| a.first),
            last_error: last_error.or_else(|| stored.and_then(|a| a.last_error)),
        };
        batch.insert(key, record::encode(&attempts));
        PartitionOutcome::Attempts(Box::new(attempts))
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

/// The version of the stored record of `id` (what its chain begins with), 0 when none.
pub fn stored_version(state: &Tree, id: &proto::WorkflowId) -> u64 {
    let row = state.get(keys::workflow(id)).ok().flatten();
    row.as_deref().and_then(patch::chain_version).unwrap_or(0)
}

impl cluster::StateMachine for WorkflowMachine {
    fn apply(&self, state: &Tree, batch: &mut Batch, command: &[u8]) -> Vec<u8> {
        let outcome = match record::write::decode(command) {
            Ok(Some((head, body))) => Self::write(state, batch, &head, body),
            Ok(None) => Self::command(state, batch, command),
            Err(e) => {
                tracing::error!(error = %e, "undecodable workflow write; skipped");
                crate::metrics::undecodable_command("partition");
                PartitionOutcome::Undecodable
            }
        };
        record::encode(&outcome)
    }
}

impl WorkflowMachine {
    /// Applies a command other than a workflow's write.
    fn command(state: &Tree, batch: &mut Batch, command: &[u8]) -> PartitionOutcome {
        match record::decode::<PartitionCommand>(command) {
            Ok(PartitionCommand::RemoveWorkflow { workflow_id }) => {
                Self::remove(state, batch, &workflow_id)
            }
            Ok(PartitionCommand::PutExecution {
                handler,
                execution,
                create,
            }) => Self::put_execution(state, batch, &handler, *execution, create),
            Ok(PartitionCommand::Publish {
                queue,
                message,
                dedup,
            }) => match dedup {
                Some(d) if Self::seen(state, batch, d) => PartitionOutcome::Duplicate,
                _ => Self::publish(state, batch, &queue, &message),
            },
            Ok(PartitionCommand::MarkSchedule { name, time }) => {
                let key = keys::schedule_mark(&name);
                if time > read_u64(state, &key) as i64 {
                    batch.insert(key, time.to_be_bytes().to_vec());
                }
                PartitionOutcome::Applied
            }
            Ok(PartitionCommand::Ack { queue, seq }) => Self::ack(state, batch, &queue, seq),
            Ok(PartitionCommand::Quarantine {
                workflow_id,
                name,
                reason,
                time,
            }) => Self::quarantine(state, batch, &workflow_id, name.as_deref(), reason, time),
            Ok(PartitionCommand::DropQuarantined { workflow_id }) => {
                let key = keys::quarantined(&workflow_id);
                if !matches!(state.contains_key(&key), Ok(true)) {
                    return PartitionOutcome::NotFound;
                }
                batch.remove(key);
                PartitionOutcome::Applied
            }
            Ok(PartitionCommand::BeginAttempt {
                event,
                message_id,
                now,
                last_error,
            }) => Self::begin_attempt(state, batch, &event, &message_id, now, last_error),
            Ok(PartitionCommand::EndAttempts { event, message_id }) => {
                batch.remove(keys::attempts(&event, &message_id));
                PartitionOutcome::Applied
            }
            Ok(PartitionCommand::PutDeadLetter { letter }) => {
                batch.remove(keys::attempts(&letter.event, &letter.message_id));
                let key = keys::dead_letter(&letter.event, &letter.message_id);
                batch.insert(key, record::encode(&letter));
                PartitionOutcome::Applied
            }
            Ok(PartitionCommand::RemoveDeadLetter { event, message_id }) => {
                let key = keys::dead_letter(&event, &message_id);
                if !matches!(state.contains_key(&key), Ok(true)) {
                    return PartitionOutcome::NotFound;
                }
                batch.remove(key);
                PartitionOutcome::Applied
            }
            Err(e) => {
                // Only this build's proposers write the log, so this means a newer format reached an old
                // replica; refusing (and saying so) keeps replicas identical.
                tracing::error!(error = %e, "undecodable partition command; skipped");
                crate::metrics::undecodable_command("partition");
                PartitionOutcome::Undecodable
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster::StateMachine;
    use engine::testing::{def_of, simple, H};
    use proto::record::patch::diff;
    use proto::record::write::encode_json;
    use proto::record::WorkflowRecord;
    use serde_json::json;

    fn outcome(bytes: &[u8]) -> PartitionOutcome {
        record::decode(bytes).expect("an outcome")
    }

    #[test]
    fn a_put_stores_the_proposers_bytes_with_its_index_rows_and_only_once() {
        let h = H::start(def_of(vec![simple("a")]), json!({}));
        let put = write_of(None, &h.rec, 0);

        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let state = db.open_tree("state").expect("a tree");
        assert_eq!(apply_bytes(&state, &put), PartitionOutcome::Applied);

        let id = &h.rec.workflow.workflow_id;
        let stored = state
            .get(keys::workflow(id))
            .expect("reads")
            .expect("stored");
        let json = &record::encode(&h.rec)[2..];
        assert_eq!(
            stored.as_ref(),
            proto::record::patch::chain_start(1, json).as_slice(),
            "the proposer's JSON after the version"
        );
        assert_eq!(stored_version(&state, id), 1);
        assert!(!h.rec.workflow.tasks.is_empty());
        for task in &h.rec.workflow.tasks {
            assert_eq!(
                crate::partition::stored::owner_of_task(&state, &task.task_id).expect("reads"),
                Some(id.clone())
            );
        }
        let running = keys::running(&h.rec.workflow.workflow_name, id);
        assert!(state.contains_key(running).expect("reads"));

        let mut again = Batch::default();
        let out = WorkflowMachine.apply(&state, &mut again, &put);
        assert_eq!(
            outcome(&out),
            PartitionOutcome::VersionConflict { stored: 1 }
        );
        assert!(again.is_empty(), "a conflicting put writes nothing");
    }

    #[test]
    fn a_tasks_owner_is_found_by_the_prefix_it_shares_with_its_workflow() {
        use crate::partition::stored::owner_of_task;
        use proto::{TaskId, WorkflowId};
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let state = db.open_tree("state").expect("a tree");
        let h = H::start(def_of(vec![simple("a")]), json!({}));
        // A second workflow whose id begins like the first one's: only the one holding the
        // task owns it.
        let first = h.rec.workflow.workflow_id.clone();
        let mut twin = h.rec.clone();
        let twin_id = format!(
            "{}ffff-ffffffff{}",
            &first.as_str()[..19],
            &first.as_str()[32..]
        );
        twin.workflow.workflow_id = WorkflowId::parse(&twin_id).expect("an id");
        for task in &mut twin.workflow.tasks {
            task.task_id = TaskId::of_workflow(&twin.workflow.workflow_id, 7 << 16);
        }
        for rec in [&twin, &h.rec] {
            let put = write_of(None, rec, 0);
            assert_eq!(apply_bytes(&state, &put), PartitionOutcome::Applied);
        }
        for rec in [&twin, &h.rec] {
            let task = &rec.workflow.tasks[0].task_id;
            assert_eq!(
                owner_of_task(&state, task).expect("reads"),
                Some(rec.workflow.workflow_id.clone())
            );
        }
        let unknown = TaskId::of_workflow(&first, 9 << 16);
        assert_eq!(owner_of_task(&state, &unknown).expect("reads"), None);
    }

    /// Applies `bytes` (a workflow's write or an encoded command).
    fn apply_bytes(state: &Tree, bytes: &[u8]) -> PartitionOutcome {
        let mut batch = Batch::default();
        let out = WorkflowMachine.apply(state, &mut batch, bytes);
        state.apply_batch(batch).expect("the batch applies");
        outcome(&out)
    }

    /// A workflow's write of `next` following the stored version `expected`, as the actor makes
    /// it: the patch from `prev` when given, else the whole record.
    fn write_of(prev: Option<&WorkflowRecord>, next: &WorkflowRecord, expected: u64) -> Vec<u8> {
        let head = |kind| WriteHead::of(kind, expected, next);
        match prev {
            Some(prev) => encode_json(&head(WriteKind::Patch), &diff(prev, next).expect("a patch")),
            None => encode_json(&head(WriteKind::Put), next),
        }
    }

    #[test]
    fn writes_store_chains_and_index_rows_and_apply_once() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let by_write = db.open_tree("writes").expect("a tree");
        let mut def = def_of(vec![simple("a"), simple("b")]);
        def.name = "ordered".into();
        let mut h = H::start(def, json!({}));
        h.rec.workflow.correlation_id = Some("order-7".into());
        let mut history = vec![h.rec.clone()];
        h.poll("a");
        history.push(h.rec.clone());
        h.complete("a", json!({"done": true}));
        history.push(h.rec.clone());
        h.poll("b");
        history.push(h.rec.clone());
        h.complete("b", json!({}));
        history.push(h.rec.clone());
        assert!(h.rec.workflow.status.is_terminal());
        let mut prev: Option<&WorkflowRecord> = None;
        for (step, next) in history.iter().enumerate() {
            // Puts first and last, patches between, as the actor writes them.
            let patch = step > 0 && step + 1 < history.len();
            let expected = prev.map_or(0, |p| p.version);
            let write = write_of(prev.filter(|_| patch), next, expected);
            assert_eq!(
                apply_bytes(&by_write, &write),
                PartitionOutcome::Applied,
                "step {step}"
            );
            let read = crate::partition::stored::read(&by_write, &h.rec.workflow.workflow_id)
                .expect("reads")
                .expect("stored");
            assert_eq!(&read.record, next, "step {step}");
            if step == 2 {
                assert_eq!(read.patches, 2);
                let running = keys::running("ordered", &h.rec.workflow.workflow_id);
                assert!(by_write.contains_key(running).expect("reads"));
                let correlated = keys::correlated("order-7", &h.rec.workflow.workflow_id);
                assert!(by_write.contains_key(correlated).expect("reads"));
            }
            // The same write again, or one that skips ahead, conflicts and writes nothing.
            let mut again = Batch::default();
            let out = WorkflowMachine.apply(&by_write, &mut again, &write);
            assert_eq!(
                outcome(&out),
                PartitionOutcome::VersionConflict {
                    stored: next.version
                }
            );
            assert!(again.is_empty());
            prev = Some(next);
        }
        let running = keys::running("ordered", &h.rec.workflow.workflow_id);
        assert!(!by_write.contains_key(running).expect("reads"));
        // A damaged head is refused without a write.
        let mut batch = Batch::default();
        let damaged = &write_of(None, &history[0], 0)[..5];
        let out = WorkflowMachine.apply(&by_write, &mut batch, damaged);
        assert_eq!(outcome(&out), PartitionOutcome::Undecodable);
        assert!(batch.is_empty());
    }

    #[test]
    fn a_terminal_workflow_owing_its_status_publication_keeps_a_row_until_it_is_done() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let state = db.open_tree("state").expect("a tree");
        let mut def = def_of(vec![simple("a")]);
        def.workflow_status_listener_enabled = true;
        def.workflow_status_listener_sink = Some("conductor:ends".into());
        let mut h = H::start(def, json!({}));
        let id = h.rec.workflow.workflow_id.clone();
        let owing = keys::status_notice(&id);
        assert_eq!(
            apply_bytes(&state, &write_of(None, &h.rec, 0)),
            PartitionOutcome::Applied
        );
        assert!(
            !state.contains_key(&owing).expect("reads"),
            "a running one owes nothing"
        );
        h.ok(engine::Input::Terminate { reason: None });
        assert!(h.rec.owes_status_notice());
        assert_eq!(
            apply_bytes(&state, &write_of(None, &h.rec, 1)),
            PartitionOutcome::Applied
        );
        assert!(
            state.contains_key(&owing).expect("reads"),
            "recovery finds it"
        );
        let found: Vec<_> = state
            .scan_prefix(keys::STATUS_NOTICE_PREFIX)
            .map(|kv| keys::id_after_status_notice(&kv.expect("reads").0))
            .collect();
        assert_eq!(found, vec![Some(id.clone())]);
        let end_time = h.rec.workflow.end_time;
        h.ok(engine::Input::StatusPublished { end_time });
        assert_eq!(
            apply_bytes(&state, &write_of(None, &h.rec, 2)),
            PartitionOutcome::Applied
        );
        assert!(
            !state.contains_key(&owing).expect("reads"),
            "done: the row goes"
        );
        // A removal takes the row with it.
        h.ok(engine::Input::Retry);
        h.ok(engine::Input::Terminate { reason: None });
        assert_eq!(
            apply_bytes(&state, &write_of(None, &h.rec, 3)),
            PartitionOutcome::Applied
        );
        assert!(
            state.contains_key(&owing).expect("reads"),
            "the next end is owed"
        );
        let remove = PartitionCommand::RemoveWorkflow { workflow_id: id };
        assert_eq!(apply(&state, &remove), PartitionOutcome::Applied);
        assert!(!state.contains_key(&owing).expect("reads"));
    }

    #[test]
    fn patches_follow_the_record_until_a_full_write_replaces_them() {
        use crate::partition::stored;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let state = db.open_tree("state").expect("a tree");
        let mut h = H::start(def_of(vec![simple("a"), simple("b")]), json!({}));
        let id = h.rec.workflow.workflow_id.clone();
        let first = h.rec.clone();
        // A patch needs a record to follow.
        h.poll("a");
        let early = write_of(Some(&first), &h.rec, 0);
        assert_eq!(
            apply_bytes(&state, &early),
            PartitionOutcome::VersionConflict { stored: 0 }
        );
        assert_eq!(
            apply_bytes(&state, &write_of(None, &first, 0)),
            PartitionOutcome::Applied
        );

        let mut prev = first.clone();
        for (step, expected) in [(0, 1u64), (1, 2)] {
            if step == 1 {
                h.complete("a", json!({"done": true}));
            }
            let write = write_of(Some(&prev), &h.rec, expected);
            assert_eq!(apply_bytes(&state, &write), PartitionOutcome::Applied);
            assert_eq!(
                apply_bytes(&state, &write),
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
        // Task b was added by the second patch; its owner is found.
        let b = h.task("b").task_id.clone();
        assert_eq!(
            stored::owner_of_task(&state, &b).expect("reads"),
            Some(id.clone())
        );
        assert_eq!(stored_version(&state, &id), 3);

        h.poll("b");
        assert_eq!(
            apply_bytes(&state, &write_of(None, &h.rec, 3)),
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
            proto::record::patch::chain_start(h.rec.version, &record::encode(&h.rec)[2..])
                .as_slice(),
            "the put replaced the chain"
        );

        h.complete("b", json!({}));
        let write = write_of(Some(&read_back(&state, &id)), &h.rec, 4);
        assert_eq!(apply_bytes(&state, &write), PartitionOutcome::Applied);
        let remove = PartitionCommand::RemoveWorkflow {
            workflow_id: id.clone(),
        };
        assert_eq!(apply(&state, &remove), PartitionOutcome::Applied);
        assert_eq!(state.scan_prefix(keys::WORKFLOW_PREFIX).count(), 0);
        assert_eq!(stored::owner_of_task(&state, &b).expect("reads"), None);
        assert!(stored::read(&state, &id).expect("reads").is_none());
    }

    fn read_back(state: &Tree, id: &proto::WorkflowId) -> WorkflowRecord {
        crate::partition::stored::read(state, id)
            .expect("reads")
            .expect("stored")
            .record
    }

    fn apply(state: &Tree, command: &PartitionCommand) -> PartitionOutcome {
        apply_bytes(state, &record::encode(command))
    }

    #[test]
    fn attempts_count_up_until_the_message_is_handled_or_set_aside() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("sled opens");
        let state = db.open_tree("state").expect("a tree");
        let begin = |now: i64, last_error: Option<&str>| PartitionCommand::BeginAttempt {
            event: "conductor:q".into(),
            message_id: "m1".into(),
            now,
            last_error: last_error.map(str::to_owned),
        };
        let attempts = |outcome: PartitionOutcome| match outcome {
            PartitionOutcome::Attempts(a) => *a,
            other => panic!("expected attempts, got {other:?}"),
        };
        let first = attempts(apply(&state, &begin(10, None)));
        assert_eq!(
            (first.attempts, first.first, first.last_error),
            (1, 10, None)
        );
        let second = attempts(apply(&state, &begin(20, Some("boom"))));
        assert_eq!((second.attempts, second.first), (2, 10));
        assert_eq!(second.last_error.as_deref(), Some("boom"));
        // A crash loses the reason, not the one known before.
        let third = attempts(apply(&state, &begin(30, None)));
        assert_eq!(third.attempts, 3);
        assert_eq!(third.last_error.as_deref(), Some("boom"));

        let end = PartitionCommand::EndAttempts {
            event: "conductor:q".into(),
            message_id: "m1".into(),
        };
        assert_eq!(apply(&state, &end), PartitionOutcome::Applied);
        assert_eq!(attempts(apply(&state, &begin(40, None))).attempts, 1);

        let letter = proto::record::dead_letter::DeadLetter {
            message_id: "m1".into(),
            event: "conductor:q".into(),
            payload: json!({"a": 1}),
            trace_id: String::new(),
            attempts: 5,
            reason: "5 handlings failed".into(),
            first_attempt: 40,
            created: 50,
        };
        let put = PartitionCommand::PutDeadLetter {
            letter: Box::new(letter.clone()),
        };
        assert_eq!(apply(&state, &put), PartitionOutcome::Applied);
        let stored = state
            .get(keys::dead_letter("conductor:q", "m1"))
            .expect("reads")
            .expect("stored");
        assert_eq!(
            record::decode::<proto::record::dead_letter::DeadLetter>(&stored).expect("decodes"),
            letter
        );
        assert_eq!(
            attempts(apply(&state, &begin(60, None))).attempts,
            1,
            "setting it aside forgot its attempts"
        );
        let remove = PartitionCommand::RemoveDeadLetter {
            event: "conductor:q".into(),
            message_id: "m1".into(),
        };
        assert_eq!(apply(&state, &remove), PartitionOutcome::Applied);
        assert_eq!(apply(&state, &remove), PartitionOutcome::NotFound);
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
