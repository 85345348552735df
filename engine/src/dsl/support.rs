//! What a valid document may ask that this runtime does not do yet, found before it is
//! registered, so that such a document is refused with the place it asks for it instead of
//! faulting when an instance reaches it: `listen` filters without an event type, `until` as
//! events and `foreach`, `run` of a shell, script or container
//! (or of a workflow not awaited), calls of grpc, asyncapi and mcp, a2a's streaming methods,
//! calls of cataloged or URI functions, schemas given by `resource`, authentication other than
//! basic and bearer, and a `schedule.on` that gathers several events (`all`, `until`, `correlate`). A schedule's
//! `every` or `after` under [`DSL_SCHEDULE_INTERVAL_MIN_MS`] is refused as well.

use super::error::{Error, Problem, Problems};
use super::rules::child;
use super::run::{kind_of, UNSUPPORTED_CALLS};
use super::Document;
use proto::limits::DSL_SCHEDULE_INTERVAL_MIN_MS;
use serde_json::Value;

/// Refuses a document that asks for something this runtime does not do yet.
pub fn check_supported(doc: &Document) -> Result<(), Error> {
    let json = doc.json();
    let mut problems = Vec::new();
    if let Some(on) = json.pointer("/schedule/on") {
        schedule_on(on, &mut problems);
    }
    for key in ["every", "after"] {
        let at = format!("/schedule/{key}");
        let ms = json.pointer(&at).and_then(|d| super::millis(d).ok());
        if ms.is_some_and(|ms| ms < DSL_SCHEDULE_INTERVAL_MIN_MS) {
            let detail =
                format!("a schedule's '{key}' is at least {DSL_SCHEDULE_INTERVAL_MIN_MS} ms");
            problems.push(Problem::new(at, detail));
        }
    }
    for side in ["input", "output"] {
        schema_resource(json.get(side), &format!("/{side}"), &mut problems);
    }
    list(json.get("do"), "/do", &mut problems);
    let declared = json
        .pointer("/use/authentications")
        .and_then(Value::as_object);
    for (name, policy) in declared.into_iter().flatten() {
        authentication(policy, &child("/use/authentications", name), &mut problems);
    }
    let functions = json.pointer("/use/functions").and_then(Value::as_object);
    for (name, function) in functions.into_iter().flatten() {
        task(function, &child("/use/functions", name), &mut problems);
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::Unsupported(Problems::new(problems)))
}

fn not_yet(at: &str, what: &str) -> Problem {
    Problem::new(at, format!("{what} is not supported by this runtime yet"))
}

fn list(list: Option<&Value>, at: &str, problems: &mut Vec<Problem>) {
    let items = list.and_then(Value::as_array);
    for (i, item) in items.into_iter().flatten().enumerate() {
        for (name, def) in item.as_object().into_iter().flatten() {
            task(def, &child(&child(at, &i.to_string()), name), problems);
        }
    }
}

fn task(def: &Value, at: &str, problems: &mut Vec<Problem>) {
    for side in ["input", "output", "export"] {
        schema_resource(def.get(side), &child(at, side), problems);
    }
    let kind = kind_of(def);
    match kind {
        "listen" => listen(def, at, problems),
        "run" => run(def, at, problems),
        "call" => call(def, at, problems),
        "do" => list(def.get("do"), &child(at, "do"), problems),
        "for" => list(def.get("do"), &child(at, "do"), problems),
        "fork" => list(
            def.pointer("/fork/branches"),
            &format!("{at}/fork/branches"),
            problems,
        ),
        "try" => {
            list(def.get("try"), &child(at, "try"), problems);
            list(
                def.pointer("/catch/do"),
                &format!("{at}/catch/do"),
                problems,
            );
        }
        _ => {}
    }
}

/// A `listen` is supported when each of its filters names the event `type` (which decides the
/// events offered to it) and its `until`, if any, is a condition; `foreach` is not yet.
fn listen(def: &Value, at: &str, problems: &mut Vec<Problem>) {
    let to = def.pointer("/listen/to").unwrap_or(&Value::Null);
    let strategy = ["one", "all", "any"]
        .into_iter()
        .find(|k| to.get(*k).is_some());
    let base = format!("{at}/listen/to/{}", strategy.unwrap_or("any"));
    let (filters, _) = super::run::listen_filters(to);
    if filters.is_empty() {
        problems.push(Problem::new(
            &base,
            "a listen must name the events it waits for: a filter with their 'type'".to_owned(),
        ));
    }
    for (i, filter) in filters.iter().enumerate() {
        if filter
            .pointer("/with/type")
            .and_then(Value::as_str)
            .is_none()
        {
            let pointer = match strategy {
                Some("one") => base.clone(),
                _ => format!("{base}/{i}"),
            };
            problems.push(Problem::new(
                format!("{pointer}/with"),
                "an event filter must name the event 'type' (the events offered to a listen are chosen by type)".to_owned(),
            ));
        }
    }
    if to.get("until").is_some_and(Value::is_object) {
        problems.push(not_yet(
            &format!("{at}/listen/to/until"),
            "'until' as events to consume",
        ));
    }
    if def.get("foreach").is_some() {
        problems.push(not_yet(&child(at, "foreach"), "'foreach' on a listen"));
    }
}

/// A `schedule.on` starts one instance per accepted event: `one`, or `any` without `until`,
/// each filter naming its event `type`; `all`, `until` and `correlate` gather events across
/// messages and are not supported yet.
fn schedule_on(to: &Value, problems: &mut Vec<Problem>) {
    for key in ["all", "until"] {
        if to.get(key).is_some() {
            let what = format!("'{key}' in a schedule's events");
            problems.push(not_yet(&format!("/schedule/on/{key}"), &what));
        }
    }
    let (filters, _) = super::run::listen_filters(to);
    let base = match to.get("one") {
        Some(_) => "/schedule/on/one".to_owned(),
        None => "/schedule/on/any".to_owned(),
    };
    if filters.is_empty() && to.get("all").is_none() {
        let detail = "a schedule must name the events that start it: a filter with their 'type'";
        problems.push(Problem::new(&base, detail.to_owned()));
    }
    for (i, filter) in filters.iter().enumerate() {
        let at = match to.get("one") {
            Some(_) => base.clone(),
            None => format!("{base}/{i}"),
        };
        if filter
            .pointer("/with/type")
            .and_then(Value::as_str)
            .is_none()
        {
            let detail = "an event filter must name the event 'type'".to_owned();
            problems.push(Problem::new(format!("{at}/with"), detail));
        }
        if filter.get("correlate").is_some() {
            problems.push(not_yet(
                &format!("{at}/correlate"),
                "'correlate' in a schedule's events",
            ));
        }
    }
}

/// A `run` of a workflow, awaited, is supported; shell, script and container are not.
fn run(def: &Value, at: &str, problems: &mut Vec<Problem>) {
    let run = def.get("run").unwrap_or(&Value::Null);
    if run.get("workflow").is_none() {
        let what = ["shell", "script", "container"]
            .into_iter()
            .find(|k| run.get(*k).is_some());
        let pointer = child(&child(at, "run"), what.unwrap_or("workflow"));
        problems.push(not_yet(
            &pointer,
            &format!("'run: {}'", what.unwrap_or("?")),
        ));
    } else if run.get("await") == Some(&Value::Bool(false)) {
        problems.push(not_yet(&format!("{at}/run/await"), "a run not awaited"));
    }
}

fn call(def: &Value, at: &str, problems: &mut Vec<Problem>) {
    let target = def.get("call").and_then(Value::as_str).unwrap_or_default();
    let foreign = target.contains(':') || target.contains('@');
    if UNSUPPORTED_CALLS.contains(&target) || foreign {
        problems.push(not_yet(&child(at, "call"), &format!("'call: {target}'")));
    }
    if target == "a2a" && at.starts_with("/use/functions") {
        problems.push(not_yet(&child(at, "call"), "a function that calls a2a"));
    } else if target == "a2a" {
        a2a(
            def.get("with").unwrap_or(&Value::Null),
            &child(at, "with"),
            problems,
        );
    }
    if let Some(policy) = def.pointer("/with/endpoint/authentication") {
        authentication(
            policy,
            &format!("{at}/with/endpoint/authentication"),
            problems,
        );
    }
}

/// An A2A call names its method and where the agent is (`agentCard` or `server`); it does
/// not stream.
fn a2a(with: &Value, at: &str, problems: &mut Vec<Problem>) {
    match with.get("method").and_then(Value::as_str) {
        None => problems.push(Problem::new(at, "an a2a call needs a 'method'".to_owned())),
        Some(method @ ("message/stream" | "tasks/resubscribe")) => {
            problems.push(not_yet(&child(at, "method"), &format!("'{method}'")));
        }
        Some(_) => {}
    }
    if with.get("agentCard").is_none() && with.get("server").is_none() {
        let detail = "an a2a call needs an 'agentCard' or a 'server'".to_owned();
        problems.push(Problem::new(at, detail));
    }
    for key in ["agentCard/endpoint/authentication", "server/authentication"] {
        if let Some(policy) = with.pointer(&format!("/{key}")) {
            authentication(policy, &format!("{at}/{key}"), problems);
        }
    }
}

/// Basic and bearer authentication are supported (inline, or a name of use.authentications).
fn authentication(policy: &Value, at: &str, problems: &mut Vec<Problem>) {
    if policy.get("use").is_some() {
        return;
    }
    let supported = policy.get("basic").is_some() || policy.get("bearer").is_some();
    if !supported {
        problems.push(not_yet(at, "authentication other than basic and bearer"));
    }
}

fn schema_resource(side: Option<&Value>, at: &str, problems: &mut Vec<Problem>) {
    if side.and_then(|s| s.pointer("/schema/resource")).is_some() {
        let pointer = format!("{at}/schema/resource");
        problems.push(not_yet(&pointer, "a schema given by resource"));
    }
}
