//! Orkes' input and output schemas: a workflow or task definition with `enforceSchema` names a
//! registered JSON Schema for its input (`inputSchema`) and its output (`outputSchema`), and a
//! value that does not match is refused (a start's input) or fails what produced it (a task's
//! input when it is scheduled, a COMPLETED result's output, a completed workflow's output).
//!
//! Schemas are looked up through the [`Catalog`](crate::Catalog), compiled by the `jsonschema`
//! crate (no remote or file `$ref` is ever fetched: such a reference does not compile). The
//! errors of a value are sorted before they are cut to [`SCHEMA_ERRORS_MAX`], so a reason is a
//! function of the schema and the value alone. Not here: storing schemas (the meta group).

use crate::Catalog;
use proto::limits::SCHEMA_ERRORS_MAX;
use proto::model::{Json, SchemaDef, SchemaRef, SchemaType, Schemas};
use serde_json::Value;

/// A registered schema, compiled once for the values it checks.
pub struct Compiled {
    name: String,
    version: u32,
    /// The validator, or why the schema cannot check anything (not JSON, does not compile).
    validator: Result<jsonschema::Validator, String>,
}

impl Compiled {
    pub fn new(def: &SchemaDef) -> Self {
        Self {
            name: def.name.clone(),
            version: def.version,
            validator: compile(def),
        }
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    /// Why `value` does not match: at most [`SCHEMA_ERRORS_MAX`] errors, sorted, then how many
    /// more there were; empty when it matches.
    pub fn errors(&self, value: &Json) -> Vec<String> {
        let validator = match &self.validator {
            Ok(v) => v,
            Err(why) => return vec![why.clone()],
        };
        let value = Value::Object(value.clone());
        let mut errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("{at}: {e}")
            })
            .collect();
        errors.sort();
        errors.dedup();
        if errors.len() > SCHEMA_ERRORS_MAX {
            let more = errors.len() - SCHEMA_ERRORS_MAX;
            errors.truncate(SCHEMA_ERRORS_MAX);
            errors.push(format!("and {more} more"));
        }
        errors
    }
}

/// A schema's validator: only JSON schemas compile; the data must be a valid JSON Schema whose
/// references all resolve inside it.
fn compile(def: &SchemaDef) -> Result<jsonschema::Validator, String> {
    if def.schema_type != SchemaType::Json {
        return Err(format!(
            "schema '{}' is of type {}; only JSON schemas can be enforced",
            def.name,
            def.schema_type.as_str()
        ));
    }
    jsonschema::validator_for(&Value::Object(def.data.clone()))
        .map_err(|e| format!("schema '{}' is not a valid JSON Schema: {e}", def.name))
}

/// Checks a schema before it is registered: a JSON schema must compile (other types are stored
/// as they are).
pub fn check(def: &SchemaDef) -> Result<(), crate::Error> {
    if def.schema_type != SchemaType::Json {
        return Ok(());
    }
    compile(def).map(|_| ()).map_err(crate::Error::Invalid)
}

/// Which of a definition's schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Input,
    Output,
}

impl Side {
    fn of(self, def: &dyn Schemas) -> Option<&SchemaRef> {
        match self {
            Side::Input => def.input_schema(),
            Side::Output => def.output_schema(),
        }
    }
}

/// What `def`'s schema on `side` says of `value`, `what` naming the value for the reason
/// ("workflow input", "output of task 'x'"): `None` when the definition enforces no schema there
/// or the value matches; the reason otherwise, naming the schema and the errors. A schema that
/// is no longer registered fails the check too.
pub fn violation(
    catalog: &dyn Catalog,
    def: &dyn Schemas,
    side: Side,
    what: &str,
    value: &Json,
) -> Option<String> {
    if !def.enforce_schema() {
        return None;
    }
    let wanted = side.of(def)?;
    let Some(schema) = catalog.schema(&wanted.name, wanted.version) else {
        return Some(format!(
            "{what} cannot be checked: schema {} is not registered",
            wanted.describe()
        ));
    };
    let errors = schema.errors(value);
    if errors.is_empty() {
        return None;
    }
    Some(format!(
        "{what} does not match schema '{}' version {}: {}",
        schema.name,
        schema.version,
        errors.join("; ")
    ))
}
