//! The audit log's rows: `au/{seq}` (big-endian, so they sort by sequence) holding an
//! [`AuditEntry`], and `aus`, the next sequence. An entry is written in the same batch as the
//! change it records, so a change and its entry are applied together or not at all. The log is
//! bounded: each entry written removes the one [`AUDIT_ENTRIES_MAX`] before it, and up to
//! [`PRUNED_PER_ENTRY`] entries older than [`AUDIT_RETENTION_MS`].

use cluster::storage::{Batch, Tree};
use proto::limits::{AUDIT_ENTRIES_MAX, AUDIT_RETENTION_MS};
use proto::model::EpochMs;
use proto::record;
use proto::record::audit::AuditEntry;

pub(super) const ENTRY_PREFIX: &[u8] = b"au/";
pub(super) const NEXT_KEY: &[u8] = b"aus";
/// Most entries past their retention one new entry removes (bounded work per apply).
const PRUNED_PER_ENTRY: usize = 16;

fn entry_key(seq: u64) -> Vec<u8> {
    [ENTRY_PREFIX, &seq.to_be_bytes()].concat()
}

fn next_seq(state: &Tree) -> u64 {
    super::counter(state, NEXT_KEY)
}

/// Records the change `action` made to `target` at `at` for `by`, and prunes what the bounds
/// let go.
pub(super) fn append(
    state: &Tree,
    batch: &mut Batch,
    by: String,
    at: EpochMs,
    action: &str,
    target: String,
) {
    let seq = next_seq(state);
    let entry = AuditEntry {
        seq,
        at,
        by,
        action: action.to_owned(),
        target,
    };
    batch.insert(entry_key(seq), record::encode(&entry));
    super::set_counter(batch, NEXT_KEY, seq + 1);
    if let Some(gone) = seq.checked_sub(AUDIT_ENTRIES_MAX) {
        batch.remove(entry_key(gone));
    }
    let expired = state
        .scan_prefix(ENTRY_PREFIX)
        .take(PRUNED_PER_ENTRY)
        .filter_map(|kv| kv.ok())
        .filter_map(|(k, v)| Some((k, record::decode::<AuditEntry>(&v).ok()?)))
        .take_while(|(_, e)| e.at < at.saturating_sub(AUDIT_RETENTION_MS));
    for (key, _) in expired {
        batch.remove(key.to_vec());
    }
}

/// Entries with a sequence below `before` (the newest when `None`), newest first, at most
/// `limit`. Sequences are contiguous, so the page is one range read.
pub(super) fn read(state: &Tree, before: Option<u64>, limit: usize) -> Vec<AuditEntry> {
    let next = next_seq(state);
    let end = before.unwrap_or(next).min(next);
    let start = end.saturating_sub(limit as u64);
    let mut entries: Vec<AuditEntry> = state
        .range(entry_key(start)..entry_key(end))
        .filter_map(|kv| kv.ok())
        .filter_map(|(_, v)| record::decode(&v).ok())
        .collect();
    entries.reverse();
    entries
}

#[cfg(test)]
mod tests {
    use super::super::{apply, MetaState};
    use super::*;
    use proto::record::{MetaCommand, MetaOutcome};

    #[test]
    fn changes_are_recorded_with_who_and_when_and_refusals_are_not() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("db");
        let state = db.open_tree("meta").expect("tree");
        let meta = MetaState::new(state.clone());
        let run = |at, command| {
            let mut batch = Batch::default();
            let audited = MetaCommand::Audited {
                by: "billing (a1)".into(),
                at,
                command: Box::new(command),
            };
            let outcome = apply(&state, &mut batch, audited);
            state.apply_batch(batch).expect("applies");
            outcome
        };
        let delete = |name: &str| MetaCommand::DeleteWebhook { name: name.into() };
        assert_eq!(run(5, delete("nothing")), MetaOutcome::NotFound);
        assert!(meta.audit(None, 10).is_empty(), "a refusal changes nothing");
        for n in 0..3 {
            let schedule = MetaCommand::DeleteTaskDef {
                name: format!("t{n}"),
            };
            let mut batch = Batch::default();
            let def = proto::model::TaskDef {
                name: format!("t{n}"),
                ..Default::default()
            };
            apply(&state, &mut batch, MetaCommand::PutTaskDefs(vec![def]));
            state.apply_batch(batch).expect("applies");
            assert_eq!(run(10 + n, schedule), MetaOutcome::Applied);
        }
        let entries = meta.audit(None, 10);
        let seen: Vec<(u64, i64, &str, &str)> = entries
            .iter()
            .map(|e| (e.seq, e.at, e.action.as_str(), e.target.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                (2, 12, "DeleteTaskDef", "t2"),
                (1, 11, "DeleteTaskDef", "t1"),
                (0, 10, "DeleteTaskDef", "t0")
            ]
        );
        assert!(entries.iter().all(|e| e.by == "billing (a1)"));
        let page: Vec<u64> = meta.audit(Some(2), 1).iter().map(|e| e.seq).collect();
        assert_eq!(page, [1]);

        // Past its retention an entry goes when the next one comes.
        let late = 11 + AUDIT_RETENTION_MS + 1;
        let def = proto::model::TaskDef {
            name: "late".into(),
            ..Default::default()
        };
        assert_eq!(
            run(late, MetaCommand::PutTaskDefs(vec![def])),
            MetaOutcome::Applied
        );
        let left: Vec<u64> = meta.audit(None, 10).iter().map(|e| e.seq).collect();
        assert_eq!(left, [3, 2], "0 and 1 were older than the retention");
    }
}
