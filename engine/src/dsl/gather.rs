//! A `schedule.on` that gathers events: `all` (one event per filter), `any` with `until` (events
//! until the condition holds on them, or until `until`'s own events come), or filters that
//! `correlate`. Events that arrive apart become one start: the runtime keeps a [`Gathering`]
//! per registered version, offers it each event its filters name, and starts an instance with
//! a group's events once the group meets the strategy.
//!
//! An event joins the first group, oldest first, that still waits for a filter it matches and
//! whose correlation values it agrees with (a key without `expect` takes the group's first
//! event's value), else it opens a group of its own. The decision is a pure function of the
//! state, the message and the event, so every replica of the gathering agrees on it.

use super::run::{keep, waiting, ExprFault, Offer, Scope, Strategy, Take};
use proto::limits::{GATHERING_BYTES_MAX, GATHER_GROUPS_MAX, GATHER_SEEN_MAX};
use proto::model::dsl::{Gathering, Listening};
use serde_json::Value;
use std::collections::BTreeMap;

/// Where a document's `schedule.on` is written (the pointer faults name).
const BASE: &str = "/schedule/on";

/// A group that met the strategy: the start it makes (numbered from 1 per version) and its
/// events, in the order they came, whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Gathered {
    pub seq: u64,
    pub events: Vec<Value>,
}

/// Whether the strategy `to` gathers events across messages (`all`, `until`, `correlate`);
/// one that does not starts an instance per event ([`super::starts_on`]).
pub fn gathers(to: &Value) -> bool {
    let (filters, _) = super::run::listen_filters(to);
    to.get("all").is_some()
        || to.get("until").is_some()
        || filters.iter().any(|f| f.get("correlate").is_some())
}

/// Whether the strategy `to` names the event type `event_type` (in a filter or its `until`),
/// or hears every type: the events of other types need not be offered to it.
pub fn names_type(to: &Value, event_type: &str) -> bool {
    super::run::listened_types(to)
        .iter()
        .any(|t| t == event_type || t == super::run::ANY_TYPE)
}

/// What an offered event did to a gathering.
#[derive(Debug, Clone, PartialEq)]
pub enum Joined {
    /// It joined no group: its message came before, or no filter took it.
    Nothing,
    /// It joined, or opened, the group of this number, which gathers on (unless the bound
    /// dropped it at once).
    Group(u64),
    /// It completed a group, which left the gathering.
    Completed(Gathered),
}

/// Offers `event` (a CloudEvent, carried by the message `message_id`) to the gathering of the
/// strategy `to`. A message offered before joins no group again. A filter's expression that
/// fails is an error naming its place; the state is then as it was. The work is the search for
/// the group to join and a copy of that group alone.
pub fn gather(
    to: &Value,
    state: &mut Gathering,
    message_id: &str,
    event: &Value,
) -> Result<Joined, String> {
    if state.seen.iter().any(|s| s == message_id) {
        return Ok(Joined::Nothing);
    }
    let vars = BTreeMap::new();
    let scope = Scope::new(&vars);
    let strategy = Strategy {
        to,
        base: BASE,
        scope: &scope,
        input: &Value::Null,
    };
    let offer = Offer {
        message_id,
        event,
        read: Some("envelope"),
        queue: false,
    };
    let fault = |f: ExprFault| format!("{}: {}", f.at, f.error);
    let found = joining(&strategy, state, &offer).map_err(fault)?;
    let Some((id, group)) = found else {
        remember(state, message_id);
        return Ok(Joined::Nothing);
    };
    let met = strategy.met(&group).map_err(fault)?;
    remember(state, message_id);
    if let Some(old) = id.and_then(|id| state.groups.remove(&id)) {
        state.bytes = state.bytes.saturating_sub(size(&old));
    }
    let joined = if met {
        state.completed += 1;
        Joined::Completed(Gathered {
            seq: state.completed,
            events: group.events,
        })
    } else {
        let id = id.unwrap_or_else(|| {
            state.opened += 1;
            state.opened
        });
        state.bytes += size(&group);
        state.groups.insert(id, group);
        Joined::Group(id)
    };
    bound(state);
    Ok(joined)
}

/// The group the offered event joins, oldest first, with the event in it (and the number it
/// has, `None` for a group the event opens), if one takes it. Leaves `state` as it is.
fn joining(
    strategy: &Strategy,
    state: &Gathering,
    offer: &Offer,
) -> Result<Option<(Option<u64>, Listening)>, ExprFault> {
    for (id, group) in &state.groups {
        if let Some(take) = strategy.take(group, offer)? {
            let mut group = group.clone();
            keep(&mut group, take, offer);
            return Ok(Some((Some(*id), group)));
        }
    }
    // A group's own types and seen ids are the gathering's: it keeps neither.
    let mut group = Listening {
        types: Vec::new(),
        ..waiting(strategy.to)
    };
    // A group opens with an event it consumes, never with one only `until` waits for.
    match strategy.take(&group, offer)? {
        Some(take @ Take::Consumed(..)) => {
            keep(&mut group, take, offer);
            Ok(Some((None, group)))
        }
        _ => Ok(None),
    }
}

fn remember(state: &mut Gathering, message_id: &str) {
    state.seen.push(message_id.to_owned());
    let over = state.seen.len().saturating_sub(GATHER_SEEN_MAX);
    state.seen.drain(..over);
}

/// A group's size as the bound counts it: its JSON.
fn size(group: &Listening) -> u64 {
    serde_json::to_vec(group).map_or(0, |b| b.len() as u64)
}

/// Drops the oldest groups past [`GATHER_GROUPS_MAX`] or [`GATHERING_BYTES_MAX`].
fn bound(state: &mut Gathering) {
    while state.groups.len() > GATHER_GROUPS_MAX || state.bytes > GATHERING_BYTES_MAX as u64 {
        let Some((_, oldest)) = state.groups.pop_first() else {
            break;
        };
        state.bytes = state.bytes.saturating_sub(size(&oldest));
        state.dropped += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(id: &str, kind: &str, order: u64) -> Value {
        json!({"specversion": "1.0", "id": id, "source": "test", "type": kind,
            "data": {"order": order}})
    }

    fn ids(g: &Gathered) -> Vec<&str> {
        g.events
            .iter()
            .map(|e| e["id"].as_str().unwrap_or(""))
            .collect()
    }

    fn offer(to: &Value, state: &mut Gathering, e: &Value) -> Option<Gathered> {
        let id = e["id"].as_str().unwrap_or_default();
        match gather(to, state, id, e).expect("gathers") {
            Joined::Completed(done) => Some(done),
            Joined::Group(_) | Joined::Nothing => None,
        }
    }

    #[test]
    fn all_waits_for_one_event_per_filter_and_keeps_them_in_order() {
        let to = json!({"all": [{"with": {"type": "a"}}, {"with": {"type": "b"}}]});
        assert!(gathers(&to));
        let mut state = Gathering::default();
        assert_eq!(offer(&to, &mut state, &event("1", "a", 1)), None);
        assert_eq!(offer(&to, &mut state, &event("2", "a", 2)), None);
        assert_eq!(state.groups.len(), 2, "a second 'a' opens its own group");
        let done = offer(&to, &mut state, &event("3", "b", 3)).expect("a group met");
        assert_eq!((done.seq, ids(&done)), (1, vec!["1", "3"]));
        let done = offer(&to, &mut state, &event("4", "b", 4)).expect("the next met");
        assert_eq!((done.seq, ids(&done)), (2, vec!["2", "4"]));
        assert!(state.groups.is_empty());
    }

    #[test]
    fn correlated_events_gather_by_their_values() {
        let to = json!({"all": [
            {"with": {"type": "a"}, "correlate": {"order": {"from": "${ .data.order }"}}},
            {"with": {"type": "b"}, "correlate": {"order": {"from": "${ .data.order }"}}}]});
        let mut state = Gathering::default();
        assert_eq!(offer(&to, &mut state, &event("1", "a", 7)), None);
        assert_eq!(offer(&to, &mut state, &event("2", "a", 8)), None);
        let done = offer(&to, &mut state, &event("3", "b", 8)).expect("order 8 met");
        assert_eq!(ids(&done), vec!["2", "3"]);
        assert_eq!(
            offer(&to, &mut state, &event("4", "b", 9)),
            None,
            "no 'a' of order 9"
        );
        let done = offer(&to, &mut state, &event("5", "b", 7)).expect("order 7 met");
        assert_eq!(ids(&done), vec!["1", "5"]);
    }

    #[test]
    fn a_message_delivered_again_joins_no_group() {
        let to = json!({"all": [{"with": {"type": "a"}}, {"with": {"type": "b"}}]});
        let mut state = Gathering::default();
        let a = event("1", "a", 1);
        assert_eq!(offer(&to, &mut state, &a), None);
        assert_eq!(offer(&to, &mut state, &a), None);
        assert_eq!(state.groups.len(), 1);
        assert_eq!(state.groups[&1].events.len(), 1);
    }

    #[test]
    fn any_until_gathers_until_the_condition_holds_on_the_events() {
        let to = json!({"any": [{"with": {"type": "a"}}], "until": "${ length >= 3 }"});
        let mut state = Gathering::default();
        assert_eq!(offer(&to, &mut state, &event("1", "a", 1)), None);
        assert_eq!(offer(&to, &mut state, &event("2", "a", 2)), None);
        let done = offer(&to, &mut state, &event("3", "a", 3)).expect("three came");
        assert_eq!(ids(&done), vec!["1", "2", "3"]);
    }

    #[test]
    fn any_until_events_ends_a_group_with_what_it_gathered() {
        let to = json!({"any": [{"with": {"type": "a"}}],
            "until": {"one": {"with": {"type": "stop"}}}});
        let mut state = Gathering::default();
        assert_eq!(offer(&to, &mut state, &event("0", "stop", 0)), None);
        assert!(state.groups.is_empty(), "a stop opens no group");
        assert_eq!(offer(&to, &mut state, &event("1", "a", 1)), None);
        assert_eq!(offer(&to, &mut state, &event("2", "a", 2)), None);
        let done = offer(&to, &mut state, &event("3", "stop", 3)).expect("stopped");
        assert_eq!(ids(&done), vec!["1", "2"]);
    }

    #[test]
    fn a_failing_condition_names_its_place_and_changes_nothing() {
        let to = json!({"all": [{"with": {"type": "a", "source": "${ error(\"no\") }"}}]});
        let mut state = Gathering::default();
        let err = gather(&to, &mut state, "1", &event("1", "a", 1)).expect_err("fails");
        assert!(err.starts_with("/schedule/on/all/0/with/source"), "{err}");
        assert_eq!(state, Gathering::default());
    }

    #[test]
    fn the_oldest_groups_go_past_the_bound() {
        let to = json!({"all": [{"with": {"type": "a"}}, {"with": {"type": "b"}}]});
        let mut state = Gathering::default();
        for i in 0..GATHER_GROUPS_MAX + 3 {
            offer(&to, &mut state, &event(&format!("a{i}"), "a", i as u64));
        }
        assert_eq!(state.groups.len(), GATHER_GROUPS_MAX);
        assert_eq!(state.dropped, 3);
        assert_eq!(state.bytes, state.groups.values().map(size).sum::<u64>());
        let done = offer(&to, &mut state, &event("b", "b", 0)).expect("met");
        assert_eq!(ids(&done), vec!["a3", "b"]);
    }

    #[test]
    fn the_groups_bytes_are_kept_as_they_change_and_bounded() {
        let to = json!({"all": [{"with": {"type": "a"}}, {"with": {"type": "b"}}]});
        let big = "x".repeat(GATHERING_BYTES_MAX / 4);
        let mut state = Gathering::default();
        for i in 0..5 {
            let mut e = event(&format!("a{i}"), "a", i);
            e["data"]["pad"] = json!(big);
            offer(&to, &mut state, &e);
            let held = state.groups.values().map(size).sum::<u64>();
            assert_eq!(state.bytes, held, "after a{i}");
            assert!(state.bytes <= GATHERING_BYTES_MAX as u64);
        }
        assert_eq!((state.groups.len(), state.dropped), (3, 2));
        assert_eq!(state.groups.keys().copied().collect::<Vec<_>>(), [3, 4, 5]);
        let done = offer(&to, &mut state, &event("b", "b", 0)).expect("met");
        assert_eq!(ids(&done), vec!["a2", "b"]);
        assert_eq!(state.bytes, state.groups.values().map(size).sum::<u64>());
    }

    #[test]
    fn one_and_any_without_until_do_not_gather() {
        assert!(!gathers(&json!({"one": {"with": {"type": "a"}}})));
        assert!(!gathers(&json!({"any": [{"with": {"type": "a"}}]})));
        assert!(gathers(&json!({"one": {"with": {"type": "a"},
            "correlate": {"k": {"from": ".id", "expect": "x"}}}})));
    }
}
