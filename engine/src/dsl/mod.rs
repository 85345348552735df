//! Serverless Workflow DSL 1.0 documents (CNCF, versions 1.0.0 to 1.0.3), read and checked:
//! the text (YAML or JSON, size-limited) is parsed ([`parse`]), its DSL version checked, then
//! validated against the DSL's JSON Schema ([`schema`]) and against the rules the schema cannot
//! say ([`rules`]: scopes and `then`, declared names, jq expressions, durations). A refusal is an
//! [`Error`] listing each problem with the JSON pointer of the offending node, and renders as
//! the RFC 7807 problem details the DSL uses.
//!
//! An instance of a document is a workflow whose definition carries the document
//! ([`workflow_def`]); [`run`] is its decider, and [`view`] shows it in the DSL's terms.

mod document;
mod duration;
mod error;
mod gather;
mod instance;
pub(crate) mod lifecycle;
mod parse;
mod rules;
pub mod run;
mod schedule;
mod schema;
mod support;

pub use document::{Document, Header};
pub use duration::millis;
pub use error::{
    Error, Location, Problem, ProblemDetails, Problems, CONFIGURATION_TYPE, VALIDATION_TYPE,
};
pub use gather::{gather, gathers, names_type, Gathered, Joined};
pub use instance::{
    instance_input, instance_output, is_dsl, phase, stored_input, stored_output, view,
    workflow_def, INPUT_KEY, OUTPUT_KEY,
};
pub use proto::model::dsl::TASK_TYPE_PREFIX;
pub use run::ANY_TYPE;
pub use schedule::{on_types, schedule, starts_on, Schedule};
pub use support::{check_supported, processes, ProcessUse};

/// Parses and checks a document: size, syntax, DSL version, schema, then rules. The first step
/// that fails answers.
pub fn load(text: &str) -> Result<Document, Error> {
    load_with(text, &crate::NoCatalog)
}

/// [`load`], where a `call` may also name a task type `catalog` holds: a function served by
/// workers (polling over HTTP or pushed over QUIC), whose name is its task type.
pub fn load_with(text: &str, catalog: &dyn crate::Catalog) -> Result<Document, Error> {
    let json = parse::parse(text)?;
    schema::check_version(&json)?;
    schema::check(&json)?;
    let mut called = std::collections::BTreeSet::new();
    rules::called(&json, &mut called);
    called.retain(|name| catalog.task_def(name).is_some());
    rules::check(&json, called)?;
    Document::new(json)
}

/// The event types a document consumes: those its `listen` tasks wait for, wherever they are
/// in it, and those its `schedule.on` starts instances for; [`ANY_TYPE`] when a filter hears
/// events of every type.
pub fn listened_types(doc: &Document) -> Vec<String> {
    let mut types = on_types(doc.json());
    each_listen(doc.json(), String::new(), &mut |to, _| {
        types.extend(run::listened_types(to));
    });
    types.sort_unstable();
    types.dedup();
    types
}

/// Where a document's event filters (its `listen` tasks', its `schedule.on`'s) name no event
/// type and hear events of every type ([`ANY_TYPE`]): the pointer of each.
pub fn any_type_filters(doc: &Document) -> Vec<String> {
    let json = doc.json();
    let mut found = Vec::new();
    if let Some(to) = json.pointer("/schedule/on") {
        found.extend(run::any_type_filters(to, "/schedule/on"));
    }
    each_listen(json, String::new(), &mut |to, at| {
        found.extend(run::any_type_filters(to, &format!("{at}/listen/to")));
    });
    found
}

/// Calls `f` with the strategy (`listen.to`) of every `listen` task under `value` (written at
/// the pointer `at`) and the task's pointer.
fn each_listen(
    value: &serde_json::Value,
    at: String,
    f: &mut impl FnMut(&serde_json::Value, &str),
) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(to) = map.get("listen").and_then(|l| l.get("to")) {
                f(to, &at);
            }
            for (key, v) in map {
                let token = key.replace('~', "~0").replace('/', "~1");
                each_listen(v, format!("{at}/{token}"), f);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                each_listen(v, format!("{at}/{i}"), f);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
