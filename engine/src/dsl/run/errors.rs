//! The DSL's errors as RFC 7807 problem details (`type`, `status`, `instance`, `title`,
//! `detail`), with the standard types the specification defines.

use serde_json::{json, Map, Value};

/// Where the standard error types live; each type is this followed by its kind.
pub const STANDARD_TYPES: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/";
/// The older spelling of the standard types, which the conformance kit's filters still use.
const STANDARD_TYPES_DSL: &str = "https://serverlessworkflow.io/dsl/errors/types/";

/// The standard kinds of error this runtime raises, with their status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Configuration,
    Validation,
    Expression,
    Timeout,
    Communication,
    Runtime,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Configuration => "configuration",
            Kind::Validation => "validation",
            Kind::Expression => "expression",
            Kind::Timeout => "timeout",
            Kind::Communication => "communication",
            Kind::Runtime => "runtime",
        }
    }

    fn status(self) -> u16 {
        match self {
            Kind::Configuration | Kind::Validation | Kind::Expression => 400,
            Kind::Timeout => 408,
            Kind::Communication | Kind::Runtime => 500,
        }
    }
}

/// An error of a standard `kind` raised at `instance` (a JSON pointer into the document).
pub fn standard(kind: Kind, instance: &str, detail: &str) -> Value {
    with_status(kind, kind.status(), instance, detail)
}

/// [`standard`] with another status (a communication error carries the HTTP status).
pub fn with_status(kind: Kind, status: u16, instance: &str, detail: &str) -> Value {
    let mut title = kind.name().to_owned();
    title[..1].make_ascii_uppercase();
    let mut error = Map::new();
    error.insert(
        "type".into(),
        format!("{STANDARD_TYPES}{}", kind.name()).into(),
    );
    error.insert("status".into(), status.into());
    error.insert("instance".into(), instance.into());
    error.insert("title".into(), format!("{title} error").into());
    if !detail.is_empty() {
        error.insert("detail".into(), detail.into());
    }
    Value::Object(error)
}

/// The timeout error (408) of a task or workflow that ran out of time.
pub fn timeout_error(instance: &str, detail: &str) -> Value {
    standard(Kind::Timeout, instance, detail)
}

/// A runtime expression that failed (does not evaluate, or gives the wrong kind of value).
pub fn expression_error(instance: &str, detail: &str) -> Value {
    standard(Kind::Expression, instance, detail)
}

/// A runtime error: the instance cannot go on as its document says.
pub fn runtime_error(instance: &str, detail: &str) -> Value {
    standard(Kind::Runtime, instance, detail)
}

/// What this runtime is not configured to do.
pub fn configuration_error(instance: &str, detail: &str) -> Value {
    standard(Kind::Configuration, instance, detail)
}

/// Whether two error types name the same error: equal, or the same standard kind in either
/// spelling.
pub fn same_type(a: &str, b: &str) -> bool {
    let kind = |t: &str| {
        t.strip_prefix(STANDARD_TYPES)
            .or_else(|| t.strip_prefix(STANDARD_TYPES_DSL))
            .map(str::to_owned)
    };
    a == b || matches!((kind(a), kind(b)), (Some(x), Some(y)) if x == y)
}

/// An error a `raise` defines, completed: `instance` where it was raised unless it names one.
pub fn raised(mut error: Value, instance: &str) -> Value {
    if let Some(map) = error.as_object_mut() {
        map.entry("instance").or_insert_with(|| json!(instance));
    }
    error
}
