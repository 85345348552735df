//! The data flow's schemas: a task's `input.schema` (checked on its input after `input.from`),
//! `output.schema` (after `output.as`) and `export.schema` (on the new `$context`), and the
//! document's own `input.schema` and `output.schema`. A value that does not match raises the
//! validation error (400). Only inline JSON schemas (`document`) are checked; a schema given by
//! `resource` is refused when the document is registered.

use super::{errors, Runner};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// How many compiled schemas a thread keeps before it forgets them all.
const COMPILED_KEPT_MAX: usize = 256;

thread_local! {
    static COMPILED: RefCell<BTreeMap<String, Rc<jsonschema::Validator>>> =
        const { RefCell::new(BTreeMap::new()) };
}

impl Runner<'_, '_> {
    /// Checks `value` against the schema at `at` (a DSL `schema`: `{format, document}`).
    pub(super) fn check_schema(
        &self,
        at: &str,
        schema: Option<&Value>,
        value: &Value,
    ) -> Result<(), Value> {
        check(at, schema, value)
    }
}

/// [`Runner::check_schema`], for the document's own schemas too.
pub(super) fn check(at: &str, schema: Option<&Value>, value: &Value) -> Result<(), Value> {
    let Some(document) = schema.and_then(|s| s.get("document")) else {
        return Ok(());
    };
    let validator = compiled(document).map_err(|e| errors::configuration_error(at, &e))?;
    let mut problems: Vec<String> = validator
        .iter_errors(value)
        .map(|e| {
            let path = e.instance_path().to_string();
            format!("{}: {e}", if path.is_empty() { "/" } else { &path })
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    problems.sort();
    problems.truncate(proto::limits::SCHEMA_ERRORS_MAX);
    Err(errors::standard(
        errors::Kind::Validation,
        at,
        &problems.join("; "),
    ))
}

/// The validator of `document`, from this thread's cache when it was compiled before.
fn compiled(document: &Value) -> Result<Rc<jsonschema::Validator>, String> {
    let key = document.to_string();
    if let Some(hit) = COMPILED.with(|c| c.borrow().get(&key).cloned()) {
        return Ok(hit);
    }
    let validator = jsonschema::validator_for(document)
        .map_err(|e| format!("the schema is not a valid JSON Schema: {e}"))?;
    let validator = Rc::new(validator);
    COMPILED.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= COMPILED_KEPT_MAX {
            cache.clear();
        }
        cache.insert(key, validator.clone());
    });
    Ok(validator)
}
