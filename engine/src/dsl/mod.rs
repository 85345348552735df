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
/// in it, and those its `schedule.on` starts instances for.
pub fn listened_types(doc: &Document) -> Vec<String> {
    let mut types = on_types(doc.json());
    listens_in(doc.json(), &mut types);
    types.sort_unstable();
    types.dedup();
    types
}

fn listens_in(value: &serde_json::Value, types: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(to) = map.get("listen").and_then(|l| l.get("to")) {
                types.extend(run::listened_types(to));
            }
            map.values().for_each(|v| listens_in(v, types));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| listens_in(v, types)),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
