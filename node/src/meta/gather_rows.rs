//! The rows of the `schedule.on` strategies that gather events (`engine::dsl::gather`):
//! `dgs/{key}`, each version's [`Gathering`] but its groups, `dgg/{key}\0{number}`, each group
//! gathering (an event rewrites only the group it joined), and `dgr/{key}\0{seq}`, a group
//! gathered and not yet started (its events), removed once its instance started. `{key}` is the version's
//! `namespace/name/version`. The consumer that offered the event starts the instance before it
//! acknowledges the message, so a group left gathered by a crash is started when the message
//! is delivered again.

use super::{read, remove_existing, DSL_SCHEDULES_PREFIX};
use cluster::storage::{Batch, Tree};
use engine::dsl::{Joined, Schedule};
use proto::model::dsl::Gathering;
use proto::model::DslSchedule;
use proto::record::{self, MetaOutcome};
use serde_json::Value;

pub(super) const STATE_PREFIX: &[u8] = b"dgs/";
pub(super) const GROUP_PREFIX: &[u8] = b"dgg/";
pub(super) const READY_PREFIX: &[u8] = b"dgr/";

fn state_key(key: &str) -> Vec<u8> {
    [STATE_PREFIX, key.as_bytes()].concat()
}

fn group_prefix(key: &str) -> Vec<u8> {
    [GROUP_PREFIX, key.as_bytes(), b"\0"].concat()
}

/// Zero-padded, so a version's groups sort oldest first.
fn group_key(key: &str, number: u64) -> Vec<u8> {
    [group_prefix(key), format!("{number:020}").into_bytes()].concat()
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
    let mut gathering = load(state, key);
    let (dropped, held): (_, Vec<u64>) = (
        gathering.dropped,
        gathering.groups.keys().copied().collect(),
    );
    let joined = match engine::dsl::gather(&to, &mut gathering, message_id, event) {
        Ok(joined) => joined,
        Err(e) => {
            tracing::warn!(workflow = key, message = message_id, error = %e, "a schedule's event filter failed; the event joined no group");
            return MetaOutcome::Applied;
        }
    };
    if gathering.dropped > dropped {
        tracing::warn!(
            workflow = key,
            dropped = gathering.dropped - dropped,
            "a gathering schedule dropped its oldest groups unfinished"
        );
    }
    match joined {
        Joined::Completed(done) => {
            batch.insert(ready_key(key, done.seq), record::encode(&done.events));
        }
        Joined::Group(number) => {
            if let Some(group) = gathering.groups.get(&number) {
                batch.insert(group_key(key, number), record::encode(group));
            }
        }
        Joined::Nothing => {}
    }
    for gone in held.iter().filter(|n| !gathering.groups.contains_key(n)) {
        batch.remove(group_key(key, *gone));
    }
    store(batch, key, gathering);
    MetaOutcome::Applied
}

/// Version `key`'s gathering, its groups read from their rows.
fn load(state: &Tree, key: &str) -> Gathering {
    let mut gathering: Gathering = read(state, &state_key(key)).unwrap_or_default();
    gathering.groups = numbered(state, group_prefix(key)).collect();
    gathering
}

/// Writes version `key`'s gathering but its groups (each in its own row).
fn store(batch: &mut Batch, key: &str, gathering: Gathering) {
    let head = Gathering {
        groups: Default::default(),
        ..gathering
    };
    batch.insert(state_key(key), record::encode(&head));
}

/// Removes group `seq` of version `key` once its instance started.
pub(super) fn started(state: &Tree, batch: &mut Batch, key: &str, seq: u64) -> MetaOutcome {
    remove_existing(state, batch, ready_key(key, seq))
}

/// Removes what version `key` gathered (it is deleted).
pub(super) fn remove(state: &Tree, batch: &mut Batch, key: &str) {
    batch.remove(state_key(key));
    remove_groups(state, batch, key);
    for (k, _) in state.scan_prefix(ready_prefix(key)).flatten() {
        batch.remove(k.to_vec());
    }
}

fn remove_groups(state: &Tree, batch: &mut Batch, key: &str) {
    for (k, _) in state.scan_prefix(group_prefix(key)).flatten() {
        batch.remove(k.to_vec());
    }
}

/// Forgets the groups version `key` is gathering (its strategy changed); the count of those
/// completed goes on, so the next group's start is not taken for an earlier one's.
pub(super) fn reset(state: &Tree, batch: &mut Batch, key: &str) {
    let held: Gathering = read(state, &state_key(key)).unwrap_or_default();
    let kept = Gathering {
        opened: held.opened,
        completed: held.completed,
        dropped: held.dropped,
        ..Gathering::default()
    };
    remove_groups(state, batch, key);
    store(batch, key, kept);
}

/// The groups of version `key` gathered and not yet started, oldest first.
pub(super) fn ready(state: &Tree, key: &str) -> Vec<Gathered> {
    let rows = numbered(state, ready_prefix(key));
    rows.map(|(seq, events)| Gathered {
        key: key.to_owned(),
        seq,
        events,
    })
    .collect()
}

/// The rows under `prefix` whose keys end in a number (zero-padded), decoded, in order.
fn numbered<T: serde::de::DeserializeOwned>(
    state: &Tree,
    prefix: Vec<u8>,
) -> impl Iterator<Item = (u64, T)> + '_ {
    let skip = prefix.len();
    let rows = state.scan_prefix(prefix).flatten();
    rows.filter_map(move |(k, v)| {
        let number = std::str::from_utf8(&k[skip..]).ok()?.parse().ok()?;
        Some((number, record::decode(&v).ok()?))
    })
}

/// What version `key` holds between events, as the replica has it.
#[cfg(test)]
pub(super) fn gathering(state: &Tree, key: &str) -> Gathering {
    load(state, key)
}
