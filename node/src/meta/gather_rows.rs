//! The rows of the `schedule.on` strategies that gather events (`engine::dsl::gather`):
//! `dgs/{key}`, each version's [`Gathering`], and `dgr/{key}\0{seq}`, a group gathered and
//! not yet started (its events), removed once its instance started. `{key}` is the version's
//! `namespace/name/version`. The consumer that offered the event starts the instance before it
//! acknowledges the message, so a group left gathered by a crash is started when the message
//! is delivered again.

use super::{read, remove_existing, DSL_SCHEDULES_PREFIX};
use cluster::storage::{Batch, Tree};
use engine::dsl::Schedule;
use proto::model::dsl::Gathering;
use proto::model::DslSchedule;
use proto::record::{self, MetaOutcome};
use serde_json::Value;

pub(super) const STATE_PREFIX: &[u8] = b"dgs/";
pub(super) const READY_PREFIX: &[u8] = b"dgr/";

fn state_key(key: &str) -> Vec<u8> {
    [STATE_PREFIX, key.as_bytes()].concat()
}

fn ready_prefix(key: &str) -> Vec<u8> {
    [READY_PREFIX, key.as_bytes(), b"\0"].concat()
}

/// Zero-padded, so a version's groups sort in the order they completed.
fn ready_key(key: &str, seq: u64) -> Vec<u8> {
    [ready_prefix(key), format!("{seq:020}").into_bytes()].concat()
}

/// A group gathered and not yet started.
#[derive(Debug, Clone, PartialEq)]
pub struct Gathered {
    /// The version's `namespace/name/version`.
    pub key: String,
    /// Its number among the version's groups (from 1).
    pub seq: u64,
    /// Its events, whole, in the order they came: the instance's input.
    pub events: Vec<Value>,
}

/// Offers `event` to the gathering of version `key`: a group it completes is written ready
/// to start. `NotFound` when the version has no `schedule.on` (deleted since). A filter's
/// expression that fails leaves the state as it was (logged by every replica).
pub(super) fn gather(
    state: &Tree,
    batch: &mut Batch,
    key: &str,
    message_id: &str,
    event: &Value,
) -> MetaOutcome {
    let schedule = read::<DslSchedule>(state, &[DSL_SCHEDULES_PREFIX, key.as_bytes()].concat());
    let Some(Schedule::On(to)) = schedule.and_then(|s| engine::dsl::schedule(&s.schedule)) else {
        return MetaOutcome::NotFound;
    };
    let mut gathering: Gathering = read(state, &state_key(key)).unwrap_or_default();
    let dropped = gathering.dropped;
    match engine::dsl::gather(&to, &mut gathering, message_id, event) {
        Err(e) => {
            tracing::warn!(workflow = key, message = message_id, error = %e, "a schedule's event filter failed; the event joined no group");
        }
        Ok(done) => {
            if gathering.dropped > dropped {
                tracing::warn!(
                    workflow = key,
                    dropped = gathering.dropped - dropped,
                    "a gathering schedule dropped its oldest groups unfinished"
                );
            }
            if let Some(done) = done {
                batch.insert(ready_key(key, done.seq), record::encode(&done.events));
            }
            batch.insert(state_key(key), record::encode(&gathering));
        }
    }
    MetaOutcome::Applied
}

/// Removes group `seq` of version `key` once its instance started.
pub(super) fn started(state: &Tree, batch: &mut Batch, key: &str, seq: u64) -> MetaOutcome {
    remove_existing(state, batch, ready_key(key, seq))
}

/// Removes what version `key` gathered (it is deleted).
pub(super) fn remove(state: &Tree, batch: &mut Batch, key: &str) {
    batch.remove(state_key(key));
    for (k, _) in state.scan_prefix(ready_prefix(key)).flatten() {
        batch.remove(k.to_vec());
    }
}

/// Forgets the groups version `key` is gathering (its strategy changed); the count of those
/// completed goes on, so the next group's start is not taken for an earlier one's.
pub(super) fn reset(state: &Tree, batch: &mut Batch, key: &str) {
    let held: Gathering = read(state, &state_key(key)).unwrap_or_default();
    let kept = Gathering {
        completed: held.completed,
        dropped: held.dropped,
        ..Gathering::default()
    };
    batch.insert(state_key(key), record::encode(&kept));
}

/// The groups of version `key` gathered and not yet started, oldest first.
pub(super) fn ready(state: &Tree, key: &str) -> Vec<Gathered> {
    let prefix = ready_prefix(key);
    let rows = state.scan_prefix(&prefix).flatten();
    rows.filter_map(|(k, v)| {
        let seq = std::str::from_utf8(&k[prefix.len()..]).ok()?.parse().ok()?;
        let events = record::decode(&v).ok()?;
        Some(Gathered {
            key: key.to_owned(),
            seq,
            events,
        })
    })
    .collect()
}

/// What version `key` holds between events, as the replica has it.
#[cfg(test)]
pub(super) fn gathering(state: &Tree, key: &str) -> Gathering {
    read(state, &state_key(key)).unwrap_or_default()
}
