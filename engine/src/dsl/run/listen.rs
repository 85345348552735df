//! `listen`: a task that waits for events. Its Conductor task (`dsl/listen`) stays IN_PROGRESS
//! while it waits; the runtime offers it every CloudEvent of a type its filters name
//! ([`crate::Input::Listened`]), and the task consumes those its filters match: `one` event,
//! one event per filter for `all`, and for `any` the first event (or, with `until`, events
//! until the condition holds on the events consumed, or until events that meet `until`'s own
//! strategy come: those are not consumed). A filter matches when every attribute of
//! its `with` does (a literal equal to the event's attribute or matching it as a regular
//! expression, or a `${ }` expression that holds on the attribute) and its `correlate` keys
//! agree: a key with `expect` must extract that value, a key without takes the first consumed
//! event's value and later events must agree with it (across the task's filters). The task's
//! output is the list of the events consumed, each as `read` says (`data`, the default;
//! `envelope`, the whole event; `raw`, the data as it came).

use super::expr::Scope;
use super::{errors, Outcome, Runner};
use proto::model::dsl::{Body, Frame, Listening, LISTEN_SEEN_MAX};
use serde_json::Value;
use std::collections::BTreeMap;

/// The Conductor task type of a `listen`.
pub const LISTEN_TASK_TYPE: &str = "dsl/listen";

/// An event offered to the instance's `listen` tasks, named by the message that carried it.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    pub message_id: String,
    pub event: Value,
}

/// The filters of a consumption strategy (`to`), and whether each must match (`all`).
pub(crate) fn filters(to: &Value) -> (Vec<Value>, bool) {
    if let Some(one) = to.get("one") {
        return (vec![one.clone()], false);
    }
    if let Some(Value::Array(all)) = to.get("all") {
        return (all.clone(), true);
    }
    let any = to.get("any").and_then(Value::as_array);
    (any.cloned().unwrap_or_default(), false)
}

/// The `until` of a strategy when it is events to wait for (a strategy itself).
pub(crate) fn until_events(to: &Value) -> Option<&Value> {
    to.get("until").filter(|u| u.is_object())
}

/// What a strategy lists among its types when one of its filters names no event type (none,
/// or an expression) or it is an `any` without filters: it hears events of every type.
pub const ANY_TYPE: &str = "*";

/// The event type a filter is offered events of: its literal `type`, else [`ANY_TYPE`].
fn offered_type(filter: &Value) -> &str {
    match filter.pointer("/with/type").and_then(Value::as_str) {
        Some(t) if crate::dsl::rules::expr::enclosed(t).is_none() => t,
        _ => ANY_TYPE,
    }
}

/// The strategy `to` (written at `base`) and, when its `until` is events to wait for, that
/// strategy too (written at `{base}/until`).
fn with_until<'a>(to: &'a Value, base: &str) -> Vec<(&'a Value, String)> {
    let mut strategies = vec![(to, base.to_owned())];
    strategies.extend(until_events(to).map(|u| (u, format!("{base}/until"))));
    strategies
}

/// A strategy's kind: `one`, `all`, or `any` (also when it names none).
fn kind(strategy: &Value) -> &'static str {
    ["one", "all", "any"]
        .into_iter()
        .find(|k| strategy.get(*k).is_some())
        .unwrap_or("any")
}

/// The event types a strategy's filters name, its `until`'s among them; [`ANY_TYPE`] when
/// one hears events of every type.
pub(crate) fn types(to: &Value) -> Vec<String> {
    let mut types: Vec<String> = with_until(to, "")
        .into_iter()
        .flat_map(|(strategy, _)| filters(strategy).0)
        .map(|f| offered_type(&f).to_owned())
        .collect();
    if !any_type_filters(to, "").is_empty() {
        types.push(ANY_TYPE.to_owned());
    }
    types.sort_unstable();
    types.dedup();
    types
}

/// Where the filters of the strategy `to` (written at `base`) that hear events of every type
/// are: each such filter's `with` (its pointer), `until`'s among them, or the `any` that has
/// no filter.
pub(crate) fn any_type_filters(to: &Value, base: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (strategy, base) in with_until(to, base) {
        let (filters, _) = filters(strategy);
        let kind = kind(strategy);
        if filters.is_empty() && kind == "any" {
            found.push(format!("{base}/any"));
        }
        for (i, filter) in filters.iter().enumerate() {
            if offered_type(filter) == ANY_TYPE {
                found.push(match kind {
                    "one" => format!("{base}/one/with"),
                    _ => format!("{base}/{kind}/{i}/with"),
                });
            }
        }
    }
    found
}

/// A `listen` (or a gathering `schedule.on`) that waits for the events of the strategy `to`.
pub(crate) fn waiting(to: &Value) -> Listening {
    let (filters, all) = filters(to);
    Listening {
        types: types(to),
        events: Vec::new(),
        matched: if all {
            vec![false; filters.len()]
        } else {
            Vec::new()
        },
        correlations: BTreeMap::new(),
        seen: Vec::new(),
        until_matched: match until_events(to).map(self::filters) {
            Some((until, true)) => vec![false; until.len()],
            _ => Vec::new(),
        },
        until_met: false,
        queued: Vec::new(),
        iteration: None,
    }
}

/// A runtime expression of a strategy that failed: where it is written, and why.
#[derive(Debug)]
pub(crate) struct ExprFault {
    pub at: String,
    pub error: String,
}

impl ExprFault {
    fn new(at: impl Into<String>, error: String) -> Self {
        Self {
            at: at.into(),
            error,
        }
    }
}

/// An event offered to a strategy, and how a consumed one is kept.
pub(crate) struct Offer<'a> {
    pub message_id: &'a str,
    pub event: &'a Value,
    /// The `listen`'s `read` (`data` by default).
    pub read: Option<&'a str>,
    /// Consumed events wait in `queued` (a `foreach` processes them) instead of `events`.
    pub queue: bool,
}

/// The strategy `to` (written at the pointer `base`) as it waits in `listening`. Expressions
/// are evaluated in `scope`; a correlation's `expect` on `input`.
pub(crate) struct Strategy<'a> {
    pub to: &'a Value,
    pub base: &'a str,
    pub scope: &'a Scope<'a>,
    pub input: &'a Value,
}

/// What an offered event is to a strategy: taken by `until`'s own filter `i` (then not
/// consumed), or consumed by filter `i`, with the correlation values it settles.
pub(crate) enum Take {
    Until(usize),
    Consumed(usize, BTreeMap<String, Value>),
}

impl Strategy<'_> {
    /// Offers an event: the first filter it matches (of those `all` still waits for) consumes
    /// it, and its message is remembered. Whether it was consumed, or taken by `until`'s own
    /// strategy.
    pub(crate) fn offer(
        &self,
        listening: &mut Listening,
        offer: &Offer,
    ) -> Result<bool, ExprFault> {
        let Some(take) = self.take(listening, offer)? else {
            return Ok(false);
        };
        keep(listening, take, offer);
        remember(listening, offer.message_id);
        Ok(true)
    }

    /// What the event would be to the strategy as it waits in `listening` (which it leaves
    /// as it is): `None` when it has had enough, or saw the message, or no filter matches.
    pub(crate) fn take(
        &self,
        listening: &Listening,
        offer: &Offer,
    ) -> Result<Option<Take>, ExprFault> {
        let to = self.to;
        let one_is_enough =
            to.get("one").is_some() || (to.get("any").is_some() && to.get("until").is_none());
        let enough = listening.until_met || (one_is_enough && listening.consumed() > 0);
        if enough || listening.seen.iter().any(|s| s == offer.message_id) {
            return Ok(None);
        }
        if let Some(until) = until_events(to) {
            if let Some(i) = self.take_until(until, listening, offer)? {
                return Ok(Some(Take::Until(i)));
            }
        }
        let (filters, _) = filters(to);
        let strategy = kind(to);
        for (i, filter) in filters.iter().enumerate() {
            if listening.matched.get(i) == Some(&true) {
                continue;
            }
            let at = match strategy {
                "one" => format!("{}/one", self.base),
                _ => format!("{}/{strategy}/{i}", self.base),
            };
            if let Some(settled) = self.matches(filter, &at, listening, offer.event)? {
                return Ok(Some(Take::Consumed(i, settled)));
            }
        }
        let no_filter = filters.is_empty() && strategy == "any";
        Ok(no_filter.then(|| Take::Consumed(0, BTreeMap::new())))
    }

    /// Which of the filters of the events `until` waits for (those it still waits for) takes
    /// the event, if any.
    fn take_until(
        &self,
        until: &Value,
        listening: &Listening,
        offer: &Offer,
    ) -> Result<Option<usize>, ExprFault> {
        let (filters, all) = filters(until);
        let base = format!("{}/until", self.base);
        for (i, filter) in filters.iter().enumerate() {
            if listening.until_matched.get(i) == Some(&true) {
                continue;
            }
            let at = match until.get("one") {
                Some(_) => format!("{base}/one"),
                None => format!("{base}/{}/{i}", if all { "all" } else { "any" }),
            };
            if self.matches(filter, &at, listening, offer.event)?.is_some() {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Whether `filter` matches the event: `None` if not, else the correlation values it
    /// settles.
    fn matches(
        &self,
        filter: &Value,
        at: &str,
        listening: &Listening,
        event: &Value,
    ) -> Result<Option<BTreeMap<String, Value>>, ExprFault> {
        let holds = with_holds(self.scope, filter, event)
            .map_err(|(name, e)| ExprFault::new(format!("{at}/with/{name}"), e))?;
        if !holds {
            return Ok(None);
        }
        let mut settled = BTreeMap::new();
        let keys = filter.get("correlate").and_then(Value::as_object);
        for (key, correlation) in keys.into_iter().flatten() {
            let from = correlation.get("from").unwrap_or(&Value::Null);
            let value = self
                .scope
                .expression(from, event)
                .map_err(|e| ExprFault::new(format!("{at}/correlate/{key}/from"), e))?;
            let expected = match correlation.get("expect") {
                Some(expect) => Some(
                    self.scope
                        .deep(expect, self.input)
                        .map_err(|e| ExprFault::new(format!("{at}/correlate/{key}/expect"), e))?,
                ),
                None => listening.correlations.get(key).cloned(),
            };
            if expected.as_ref().is_some_and(|e| *e != value) {
                return Ok(None);
            }
            settled.insert(key.clone(), value);
        }
        Ok(Some(settled))
    }

    /// Whether the strategy is met: `one` event, one per filter for `all`, and for `any` one
    /// event, or with `until`, events for which its condition holds (evaluated on the list of
    /// the events consumed) or `until`'s own strategy met.
    pub(crate) fn met(&self, listening: &Listening) -> Result<bool, ExprFault> {
        let to = self.to;
        if to.get("one").is_some() {
            return Ok(!listening.events.is_empty());
        }
        if to.get("all").is_some() {
            return Ok(listening.matched.iter().all(|m| *m));
        }
        if until_events(to).is_some() {
            return Ok(listening.until_met);
        }
        if listening.events.is_empty() {
            return Ok(false);
        }
        let Some(until) = to.get("until") else {
            return Ok(true);
        };
        let events = Value::Array(listening.events.clone());
        self.scope
            .condition(until, &events)
            .map_err(|e| ExprFault::new(format!("{}/until", self.base), e))
    }
}

/// Makes what [`Strategy::take`] found of `offer` part of `listening`: a filter matched (and
/// the values it settled), the event consumed as `read` says, or `until` met.
pub(crate) fn keep(listening: &mut Listening, take: Take, offer: &Offer) {
    match take {
        Take::Until(i) => {
            if let Some(m) = listening.until_matched.get_mut(i) {
                *m = true;
            }
            listening.until_met = listening.until_matched.iter().all(|m| *m);
        }
        Take::Consumed(i, settled) => {
            if let Some(m) = listening.matched.get_mut(i) {
                *m = true;
            }
            listening.correlations.extend(settled);
            let event = read_as(offer.event, offer.read);
            match offer.queue {
                true => listening.queued.push(event),
                false => listening.events.push(event),
            }
        }
    }
}

/// Remembers an offered message's id (the latest [`LISTEN_SEEN_MAX`]).
fn remember(listening: &mut Listening, message_id: &str) {
    listening.seen.push(message_id.to_owned());
    let over = listening.seen.len().saturating_sub(LISTEN_SEEN_MAX);
    listening.seen.drain(..over);
}

impl Runner<'_, '_> {
    /// Starts a `listen`: its Conductor task waits IN_PROGRESS for the events it names.
    pub(super) fn start_listen(
        &mut self,
        at: &str,
        name: &str,
        def: &Value,
        input: Value,
    ) -> Frame {
        let to = def.pointer("/listen/to").unwrap_or(&Value::Null);
        let task_id = self.open_task(at, name, LISTEN_TASK_TYPE, "", &input);
        Frame {
            at: at.to_owned(),
            name: name.to_owned(),
            task_id,
            input,
            body: Body::Listen(Box::new(waiting(to))),
            deadline: None,
        }
    }

    /// Moves a `listen` on: consumes the event being delivered if it matches, then ends when
    /// its strategy is satisfied.
    pub(super) fn listen(&mut self, frame: &mut Frame, vars: &BTreeMap<String, Value>) -> Outcome {
        let def = self.doc.pointer(&frame.at).cloned().unwrap_or_default();
        let to = def.pointer("/listen/to").cloned().unwrap_or_default();
        let base = format!("{}/listen/to", frame.at);
        let fault = |f: ExprFault| Outcome::Fault(errors::expression_error(&f.at, &f.error));
        if let (Some(delivery), Body::Listen(listening)) = (&self.delivery, &mut frame.body) {
            let offer = Offer {
                message_id: &delivery.message_id,
                event: &delivery.event,
                read: def.pointer("/listen/read").and_then(Value::as_str),
                queue: def.get("foreach").is_some(),
            };
            let offered = self.with_strategy(vars, &frame.input, (&to, &base), |strategy| {
                strategy.offer(listening, &offer)
            });
            if let Err(f) = offered {
                return fault(f);
            }
        }
        if let Some(each) = def.get("foreach") {
            match self.foreach(frame, each, vars) {
                Outcome::Done { .. } => {}
                other => return other,
            }
        }
        let Body::Listen(listening) = &frame.body else {
            return Outcome::Pending;
        };
        let met = self.with_strategy(vars, &frame.input, (&to, &base), |strategy| {
            strategy.met(listening)
        });
        match met {
            Err(f) => fault(f),
            Ok(false) => Outcome::Pending,
            Ok(true) => {
                let keys = listening.correlations.clone().into_iter().collect();
                self.ctx
                    .correlated
                    .insert(frame.task_id.clone(), Value::Object(keys));
                Outcome::done(Value::Array(listening.events.clone()))
            }
        }
    }

    /// Runs `f` with the strategy `to`, written at `base`, of a `listen` whose task's input is
    /// `input`: its expressions see the instance's variables.
    fn with_strategy<R>(
        &self,
        vars: &BTreeMap<String, Value>,
        input: &Value,
        (to, base): (&Value, &str),
        f: impl FnOnce(&Strategy) -> R,
    ) -> R {
        let scope = self.scope(vars, input, None);
        f(&Strategy {
            to,
            base,
            scope: &scope,
            input,
        })
    }
}

/// Whether every attribute of `filter`'s `with` holds on `event`: a literal equal to the
/// attribute or matching it as a whole regular expression, a `${ }` condition that holds on it,
/// any other value equal to it. A condition that fails is the attribute's name and the error.
fn with_holds(scope: &Scope, filter: &Value, event: &Value) -> Result<bool, (String, String)> {
    let with = filter.get("with").and_then(Value::as_object);
    for (name, expected) in with.into_iter().flatten() {
        let actual = event.get(name).unwrap_or(&Value::Null);
        let holds = match expected.as_str().map(crate::dsl::rules::expr::enclosed) {
            Some(Some(_)) => scope
                .condition(expected, actual)
                .map_err(|e| (name.clone(), e))?,
            Some(None) => attribute_matches(expected.as_str().unwrap_or_default(), actual),
            None => expected == actual,
        };
        if !holds {
            return Ok(false);
        }
    }
    Ok(true)
}

/// [`with_holds`] outside an instance (a document's `schedule.on`): conditions see no
/// variables. A failing condition is an error naming its place under `at`.
pub(crate) fn event_matches(filter: &Value, at: &str, event: &Value) -> Result<bool, String> {
    let vars = BTreeMap::new();
    let scope = Scope::new(&vars);
    with_holds(&scope, filter, event).map_err(|(name, e)| format!("{at}/with/{name}: {e}"))
}

/// Whether an event attribute matches a filter's literal: equal to it, or, read as a regular
/// expression, matching the whole attribute.
fn attribute_matches(literal: &str, actual: &Value) -> bool {
    let text = match actual {
        Value::String(s) => s.clone(),
        Value::Null => return false,
        other => other.to_string(),
    };
    if text == literal {
        return true;
    }
    regex::Regex::new(&format!("^(?:{literal})$")).is_ok_and(|re| re.is_match(&text))
}

/// An event as a `listen` reads it.
fn read_as(event: &Value, read: Option<&str>) -> Value {
    match read {
        Some("envelope") => event.clone(),
        Some("raw") => event
            .get("data_base64")
            .or_else(|| event.get("data"))
            .cloned()
            .unwrap_or_default(),
        _ => event.get("data").cloned().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_literal_matches_equal_or_as_a_whole_pattern() {
        assert!(attribute_matches("com.x.a", &json!("com.x.a")));
        assert!(attribute_matches("com\\.x\\..*", &json!("com.x.b")));
        assert!(!attribute_matches("com.x", &json!("com.x.a")));
        assert!(!attribute_matches("a", &Value::Null));
        assert!(!attribute_matches("(", &json!("x")));
    }

    #[test]
    fn strategies_name_their_filters_and_types() {
        let to = json!({"all": [{"with": {"type": "b"}}, {"with": {"type": "a"}}]});
        assert_eq!(filters(&to).0.len(), 2);
        assert!(filters(&to).1);
        assert_eq!(types(&to), ["a", "b"]);
        assert_eq!(types(&json!({"one": {"with": {"type": "x"}}})), ["x"]);
        assert_eq!(types(&json!({"any": []})), [ANY_TYPE]);
    }

    #[test]
    fn filters_that_name_no_type_hear_every_type_and_say_where_they_are() {
        let to = json!({"all": [{"with": {"type": "a"}}, {"with": {"source": "s"}},
            {"with": {"type": "${ . }"}}], "until": {"one": {"with": {"id": "x"}}}});
        assert_eq!(types(&to), [ANY_TYPE, "a"]);
        assert_eq!(
            any_type_filters(&to, "/b"),
            ["/b/all/1/with", "/b/all/2/with", "/b/until/one/with"]
        );
        let typed = json!({"any": [{"with": {"type": "a"}}]});
        assert!(any_type_filters(&typed, "/b").is_empty());
        assert_eq!(any_type_filters(&json!({"any": []}), "/b"), ["/b/any"]);
    }

    #[test]
    fn read_modes() {
        let event = json!({"type": "t", "data": {"a": 1}});
        assert_eq!(read_as(&event, None), json!({"a": 1}));
        assert_eq!(read_as(&event, Some("envelope")), event);
        assert_eq!(
            read_as(&json!({"data_base64": "aGk="}), Some("raw")),
            json!("aGk=")
        );
    }
}
