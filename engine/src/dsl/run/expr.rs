//! Runtime expressions as a decision evaluates them: jq (through the jaq crates, without the
//! functions that read a clock or the environment, so the same state gives the same answer on
//! every replica and in every replay), with the DSL's arguments (`$context`, `$input`,
//! `$output`, `$task`, `$workflow`, `$runtime`, `$secrets`, `$authorization`) and the
//! variables the enclosing tasks bind (`$item`, `$index`, a caught error).
//!
//! In the `loose` mode a document may ask for (`evaluate.mode`), every string of a value is an
//! expression, `${ }` or not: one that does not compile or fails stays the string it is.
//!
//! Compiled queries are kept per thread (at most [`COMPILED_KEPT_MAX`]); keeping them changes
//! no answer.

use crate::jq;
use serde_json::Value;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// How many compiled queries a thread keeps before it forgets them all.
const COMPILED_KEPT_MAX: usize = 1024;

/// The DSL's arguments, in the order a query is compiled and run with them.
const ARGUMENTS: [&str; 8] = [
    "context",
    "input",
    "output",
    "secrets",
    "authorization",
    "task",
    "workflow",
    "runtime",
];

thread_local! {
    static COMPILED: RefCell<BTreeMap<String, Rc<jq::Filter>>> = const { RefCell::new(BTreeMap::new()) };
}

/// What an expression sees besides its input: every argument and bound variable, by name
/// without its `$`. An argument left out is `null`.
///
/// A query is given only the arguments and variables its text names (the others are `null`):
/// converting a value for jq costs its size, and `$workflow` holds the whole document.
#[derive(Default)]
pub struct Scope<'a> {
    values: BTreeMap<&'a str, Cow<'a, Value>>,
    lazy: BTreeMap<&'a str, Box<dyn Fn() -> Value + 'a>>,
    vars: Option<&'a BTreeMap<String, Value>>,
    /// `evaluate.mode: loose`.
    loose: bool,
}

impl<'a> Scope<'a> {
    /// A scope with the variables the enclosing tasks bind.
    pub fn new(vars: &'a BTreeMap<String, Value>) -> Self {
        Self {
            values: BTreeMap::new(),
            lazy: BTreeMap::new(),
            vars: Some(vars),
            loose: false,
        }
    }

    /// Evaluates every string of a value (`evaluate.mode: loose`) when `loose`.
    pub fn loose(mut self, loose: bool) -> Self {
        self.loose = loose;
        self
    }

    /// Sets an argument (`context`, `input`, ...).
    pub fn with(mut self, name: &'a str, value: Value) -> Self {
        self.values.insert(name, Cow::Owned(value));
        self
    }

    /// [`Scope::with`], borrowing the value.
    pub fn with_ref(mut self, name: &'a str, value: &'a Value) -> Self {
        self.values.insert(name, Cow::Borrowed(value));
        self
    }

    /// Sets an argument made only when a query names it.
    pub fn with_lazy(mut self, name: &'a str, make: impl Fn() -> Value + 'a) -> Self {
        self.lazy.insert(name, Box::new(make));
        self
    }

    /// Runs `query` on `input`: its first output (`null` when it has none).
    pub fn query(&self, query: &str, input: &Value) -> Result<Value, String> {
        let bound: Vec<&String> = self.vars.into_iter().flat_map(|v| v.keys()).collect();
        let mut names: Vec<String> = ARGUMENTS.iter().map(|a| format!("${a}")).collect();
        names.extend(bound.iter().map(|b| format!("${b}")));
        let filter = compiled(query, &names)?;
        let null = Value::Null;
        let made: Vec<Value> = ARGUMENTS
            .iter()
            .map(|a| match self.lazy.get(a) {
                Some(make) if names_var(query, a) => make(),
                _ => Value::Null,
            })
            .collect();
        let mut values: Vec<&Value> = ARGUMENTS
            .iter()
            .zip(&made)
            .map(|(a, made)| match self.values.get(a) {
                Some(v) if names_var(query, a) => v.as_ref(),
                Some(_) => &null,
                None => made,
            })
            .collect();
        let bound = self.vars.into_iter().flatten();
        values.extend(bound.map(|(k, v)| if names_var(query, k) { v } else { &null }));
        let out = jq::run_with(&filter, input, &values)?;
        Ok(out.into_iter().next().unwrap_or(Value::Null))
    }

    /// A field that is an expression by definition (`if`, `input.from`, `output.as`, `for.in`,
    /// ...): a string is a query, `${ }` or not; any other value has its `${ }` strings
    /// evaluated.
    pub fn expression(&self, field: &Value, input: &Value) -> Result<Value, String> {
        match field {
            Value::String(text) => {
                let query = crate::dsl::rules::expr::enclosed(text).unwrap_or(text);
                self.query(query, input)
            }
            other => self.deep(other, input),
        }
    }

    /// A value whose `${ }` strings are expressions, anywhere in it (`set`, `with`, an event);
    /// in the loose mode its other strings too, each kept as it is when it is no expression.
    pub fn deep(&self, value: &Value, input: &Value) -> Result<Value, String> {
        Ok(match value {
            Value::String(text) => match crate::dsl::rules::expr::enclosed(text) {
                Some(query) => self.query(query, input)?,
                None if self.loose => self.query(text, input).unwrap_or_else(|_| value.clone()),
                None => value.clone(),
            },
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|v| self.deep(v, input))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => {
                let mut out = serde_json::Map::new();
                for (k, v) in map {
                    out.insert(k.clone(), self.deep(v, input)?);
                }
                Value::Object(out)
            }
            other => other.clone(),
        })
    }

    /// A condition (`if`, `when`, `while`): it must give a boolean.
    pub fn condition(&self, field: &Value, input: &Value) -> Result<bool, String> {
        match self.expression(field, input)? {
            Value::Bool(b) => Ok(b),
            other => Err(format!("the condition gave {other}, not a boolean")),
        }
    }
}

/// Whether `query`'s text names the variable `$name`.
fn names_var(query: &str, name: &str) -> bool {
    query
        .match_indices('$')
        .any(|(i, _)| query[i + 1..].starts_with(name))
}

/// `query` compiled with `names` declared, from this thread's cache when it was compiled before.
fn compiled(query: &str, names: &[String]) -> Result<Rc<jq::Filter>, String> {
    let key = format!("{}\n{query}", names.join(","));
    if let Some(hit) = COMPILED.with(|c| c.borrow().get(&key).cloned()) {
        return Ok(hit);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let filter = Rc::new(jq::compile_pure(query, &refs)?);
    COMPILED.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= COMPILED_KEPT_MAX {
            cache.clear();
        }
        cache.insert(key, filter.clone());
    });
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expressions_see_arguments_and_bound_variables() {
        let vars = BTreeMap::from([("color".to_owned(), json!("red"))]);
        let scope = Scope::new(&vars).with("input", json!({"n": 1}));
        let input = json!({"colors": ["blue"]});
        assert_eq!(
            scope.expression(&json!("${ .colors + [$color] }"), &input),
            Ok(json!(["blue", "red"]))
        );
        assert_eq!(
            scope.expression(&json!(".colors[0]"), &input),
            Ok(json!("blue"))
        );
        assert_eq!(
            scope.deep(
                &json!({"a": "${ $input.n }", "b": "plain", "c": [1]}),
                &input
            ),
            Ok(json!({"a": 1, "b": "plain", "c": [1]}))
        );
        assert_eq!(
            scope.expression(&json!("$context"), &input),
            Ok(Value::Null)
        );
        assert_eq!(
            scope.condition(&json!(".colors | length == 1"), &input),
            Ok(true)
        );
        assert!(scope.condition(&json!(".colors"), &input).is_err());
        assert!(scope
            .expression(&json!("${ .a + 1 }"), &json!({"a": "x"}))
            .is_err());
    }
}
