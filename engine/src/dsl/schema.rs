//! A document against the DSL's JSON Schema (draft 2020-12, `workflow.schema.yaml` beside this
//! file, vendored with its licence; see NOTICE), compiled once. The schema refers only to
//! itself, and the `jsonschema` crate is built without remote or file resolving. Formats are
//! annotations (the 2020-12 default): the schema offers a `uri` and a `uri-template` for the same
//! string, which only a format-blind check accepts.
//!
//! Where a `oneOf` (a task's kind, a call's protocol) fails, the problem names the node inside
//! the alternative the document meant — the one not ruled out by its discriminating keys
//! (`required`, `type`, `const`, `not`, `enum`) — rather than the whole task.

use super::error::{Error, Problem, Problems};
use jsonschema::error::ValidationErrorKind;
use jsonschema::{Draft, ValidationError, Validator};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

const SCHEMA: &str = include_str!("workflow.schema.yaml");

/// The longest message a problem repeats from the validator (which can quote a whole value).
const MESSAGE_CHARS_MAX: usize = 200;

static VALIDATOR: LazyLock<Validator> = LazyLock::new(|| {
    let schema: Value =
        serde_yaml_ng::from_str(SCHEMA).expect("the vendored DSL schema is YAML (tested)");
    jsonschema::options()
        .with_draft(Draft::Draft202012)
        .build(&schema)
        .expect("the vendored DSL schema compiles (tested)")
});

/// Refuses a document whose `document.dsl` names a version other than 1.0.0 to 1.0.3 (a missing
/// or malformed one is left to the schema).
pub fn check_version(doc: &Value) -> Result<(), Error> {
    let Some(dsl) = doc.pointer("/document/dsl").and_then(Value::as_str) else {
        return Ok(());
    };
    match dsl.strip_prefix("1.0.") {
        Some("0" | "1" | "2" | "3") => Ok(()),
        _ => Err(Error::Version(dsl.to_owned())),
    }
}

/// Checks `doc` against the schema. A node's problems are one problem, their messages joined;
/// a node with a problem below it is not reported itself.
pub fn check(doc: &Value) -> Result<(), Error> {
    let errors: Vec<ValidationError<'_>> = VALIDATOR.iter_errors(doc).collect();
    let alternatives_at: BTreeSet<String> = errors
        .iter()
        .filter(|e| alternatives(e).is_some())
        .map(|e| e.instance_path().to_string())
        .collect();
    let mut by_pointer: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for error in &errors {
        // A failed `oneOf` leaves its properties unevaluated: that says nothing more.
        let unevaluated = matches!(
            error.kind(),
            ValidationErrorKind::UnevaluatedProperties { .. }
        );
        if unevaluated && alternatives_at.contains(&error.instance_path().to_string()) {
            continue;
        }
        for problem in problems_of(error) {
            let messages = by_pointer.entry(problem.pointer).or_default();
            if !messages.contains(&problem.message) {
                messages.push(problem.message);
            }
        }
    }
    let pointers: Vec<String> = by_pointer.keys().cloned().collect();
    let problems: Vec<Problem> = by_pointer
        .into_iter()
        .filter(|(at, _)| !pointers.iter().any(|p| p.starts_with(&format!("{at}/"))))
        .map(|(at, messages)| Problem::new(at, messages.join("; ")))
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Schema(Problems::new(problems)))
    }
}

/// The errors of each alternative of a failed `oneOf` or `anyOf`.
fn alternatives<'a>(error: &'a ValidationError<'_>) -> Option<&'a [Vec<ValidationError<'static>>]> {
    match error.kind() {
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            Some(context)
        }
        _ => None,
    }
}

/// The problems one error stands for: a failed `oneOf`/`anyOf` is replaced by the errors of the
/// alternatives the document meant, if any.
fn problems_of(error: &ValidationError<'_>) -> Vec<Problem> {
    let at = error.instance_path().to_string();
    let Some(alternatives) = alternatives(error) else {
        return vec![Problem::new(at, short(error.to_string()))];
    };
    let meant: Vec<&Vec<ValidationError<'static>>> = alternatives
        .iter()
        .filter(|errors| !errors.iter().any(|e| rules_out(e, depth(&at))))
        .collect();
    if meant.is_empty() {
        return vec![Problem::new(
            at,
            "matches none of the forms the schema allows here",
        )];
    }
    meant
        .into_iter()
        .flatten()
        .flat_map(|e| problems_of(e))
        .collect()
}

/// Whether `error` shows that its alternative is not the one the document meant: the value is
/// not of the alternative's type or lacks its required key, or a key of it (`call: http`) has
/// another value.
fn rules_out(error: &ValidationError<'_>, at_depth: usize) -> bool {
    let below = depth(&error.instance_path().to_string()).saturating_sub(at_depth);
    match error.kind() {
        ValidationErrorKind::Required { .. } | ValidationErrorKind::Type { .. } => below == 0,
        ValidationErrorKind::Constant { .. }
        | ValidationErrorKind::Not { .. }
        | ValidationErrorKind::Enum { .. } => below <= 1,
        // A nested choice (a call among the kinds of task) none of whose forms was meant.
        _ => alternatives(error).is_some_and(|alternatives| {
            below == 0
                && alternatives
                    .iter()
                    .all(|errors| errors.iter().any(|e| rules_out(e, at_depth)))
        }),
    }
}

/// How many levels below the document's root a JSON pointer points.
fn depth(pointer: &str) -> usize {
    pointer.matches('/').count()
}

fn short(message: String) -> String {
    if message.chars().count() <= MESSAGE_CHARS_MAX {
        return message;
    }
    let cut: String = message.chars().take(MESSAGE_CHARS_MAX).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(dsl: &str, tasks: Value) -> Value {
        json!({
            "document": {"dsl": dsl, "namespace": "test", "name": "t", "version": "0.1.0"},
            "do": tasks
        })
    }

    #[test]
    fn the_vendored_schema_compiles_and_accepts_a_minimal_document() {
        let ok = doc("1.0.3", json!([{"s": {"set": {"a": 1}}}]));
        assert_eq!(check(&ok), Ok(()));
    }

    #[test]
    fn dsl_versions_1_0_0_to_1_0_3_are_read() {
        for v in ["1.0.0", "1.0.1", "1.0.2", "1.0.3"] {
            assert_eq!(check_version(&doc(v, json!([]))), Ok(()), "{v}");
        }
        for v in ["1.0.4", "0.8", "1.1.0", "1.0.30"] {
            let refused = check_version(&doc(v, json!([])));
            assert_eq!(refused, Err(Error::Version(v.to_owned())));
        }
    }

    #[test]
    fn a_wrong_task_is_named_inside_the_kind_it_meant() {
        let bad = doc(
            "1.0.3",
            json!([{"wait1": {"wait": "soon"}}, {"get": {"call": "http", "with": {"method": 3, "endpoint": "https://x.test"}}}]),
        );
        let Err(Error::Schema(problems)) = check(&bad) else {
            panic!("the schema refuses it");
        };
        let pointers: Vec<&str> = problems.listed.iter().map(|p| p.pointer.as_str()).collect();
        assert!(pointers.contains(&"/do/0/wait1/wait"), "{problems:?}");
        assert!(pointers.contains(&"/do/1/get/with/method"), "{problems:?}");
    }

    #[test]
    fn a_task_of_no_known_kind_is_named_as_a_whole() {
        let bad = doc("1.0.3", json!([{"x": {"frobnicate": {}}}]));
        let Err(Error::Schema(problems)) = check(&bad) else {
            panic!("the schema refuses it");
        };
        assert_eq!(
            problems.listed,
            vec![Problem::new(
                "/do/0/x",
                "matches none of the forms the schema allows here"
            )]
        );
    }
}
