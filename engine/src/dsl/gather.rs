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

use super::run::{waiting, Offer, Scope, Strategy};
use proto::limits::{GATHERING_BYTES_MAX, GATHER_GROUPS_MAX, GATHER_SEEN_MAX};
use proto::model::dsl::Gathering;
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

/// Whether the strategy `to` names the event type `event_type` (in a filter or its `until`):
/// the events of other types need not be offered to it.
pub fn names_type(to: &Value, event_type: &str) -> bool {
    super::run::listened_types(to)
        .iter()
        .any(|t| t == event_type)
}

/// Offers `event` (a CloudEvent, carried by the message `message_id`) to the gathering of the
/// strategy `to`; answers the group it completed, if any. A message offered before joins no
/// group again. A filter's expression that fails is an error naming its place; the state is
/// then as it was.
pub fn gather(
    to: &Value,
    state: &mut Gathering,
    message_id: &str,
    event: &Value,
) -> Result<Option<Gathered>, String> {
    if state.seen.iter().any(|s| s == message_id) {
        return Ok(None);
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
    let fault = |f: super::run::ExprFault| format!("{}: {}", f.at, f.error);
    let mut groups = state.groups.clone();
    let mut joined = None;
    for (i, group) in groups.iter_mut().enumerate() {
        if strategy.offer(group, &offer).map_err(fault)? {
            joined = Some(i);
            break;
        }
    }
    if joined.is_none() {
        let mut group = waiting(to);
        // A group opens with an event it consumes, never with one only `until` waits for.
        if strategy.offer(&mut group, &offer).map_err(fault)? && !group.events.is_empty() {
            groups.push(group);
            joined = Some(groups.len() - 1);
        }
    }
    let met = match joined {
        Some(i) => strategy.met(&groups[i]).map_err(fault)?.then_some(i),
        None => None,
    };
    let gathered = met.map(|i| {
        state.completed += 1;
        Gathered {
            seq: state.completed,
            events: groups.remove(i).events,
        }
    });
    state.groups = groups;
    remember(state, message_id);
    bound(state);
    Ok(gathered)
}

fn remember(state: &mut Gathering, message_id: &str) {
    state.seen.push(message_id.to_owned());
    let over = state.seen.len().saturating_sub(GATHER_SEEN_MAX);
    state.seen.drain(..over);
}

/// Drops the oldest groups past [`GATHER_GROUPS_MAX`] or [`GATHERING_BYTES_MAX`].
fn bound(state: &mut Gathering) {
    let size = |s: &Gathering| serde_json::to_vec(s).map_or(usize::MAX, |b| b.len());
    while !state.groups.is_empty()
        && (state.groups.len() > GATHER_GROUPS_MAX || size(state) > GATHERING_BYTES_MAX)
    {
        state.groups.remove(0);
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
        gather(to, state, id, e).expect("gathers")
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
        assert_eq!(state.groups[0].events.len(), 1);
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
        let done = offer(&to, &mut state, &event("b", "b", 0)).expect("met");
        assert_eq!(ids(&done), vec!["a3", "b"]);
    }

    #[test]
    fn one_and_any_without_until_do_not_gather() {
        assert!(!gathers(&json!({"one": {"with": {"type": "a"}}})));
        assert!(!gathers(&json!({"any": [{"with": {"type": "a"}}]})));
        assert!(gathers(&json!({"one": {"with": {"type": "a"},
            "correlate": {"k": {"from": ".id", "expect": "x"}}}})));
    }
}
