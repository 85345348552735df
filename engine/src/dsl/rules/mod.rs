//! The rules of a DSL document that its JSON Schema cannot say, checked once the schema holds:
//! flow within each scope ([`flow`]), names declared under `use` ([`refs`]), runtime expressions
//! that compile ([`expr`]) and durations that are not negative ([`duration`]). Each problem names
//! the JSON pointer of the offending node.
//!
//! The walk follows the document's structure: task lists (`do`, `for.do`, `fork.branches`,
//! `try`, `catch.do`, `foreach.do`, extensions' `before`/`after`), the functions of
//! `use.functions` as tasks, and inside a task the fields whose meaning the DSL fixes. Free-form
//! values (`set`, `with`, an event's data) are searched for `${ }` expressions only; `metadata`
//! and `schema` documents are not searched.

mod duration;
pub(super) mod expr;
mod fields;
mod flow;
mod refs;

use super::error::{Error, Problem, Problems};
use flow::Entry;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// Checks the rules on a document that follows the schema; `workers` are the registered task
/// types among the names it calls (a worker's function needs no declaration).
pub fn check(doc: &Value, workers: BTreeSet<String>) -> Result<(), Error> {
    let mut walk = Walk {
        uses: refs::Uses::of(doc, workers),
        names: BTreeSet::new(),
        scopes: Vec::new(),
        vars: Vec::new(),
        problems: Vec::new(),
    };
    walk.document(doc);
    for scope in &walk.scopes {
        walk.problems.extend(flow::scope(scope, &walk.names));
    }
    if walk.problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Rules(Problems::new(walk.problems)))
    }
}

/// Every name a `call` of the document names.
pub fn called(doc: &Value, out: &mut BTreeSet<String>) {
    match doc {
        Value::Object(map) => {
            if let Some(Value::String(name)) = map.get("call") {
                out.insert(name.clone());
            }
            map.values().for_each(|v| called(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| called(v, out)),
        _ => {}
    }
}

/// The JSON pointer of `key` in the node at `at` (RFC 6901 escapes).
pub(super) fn child(at: &str, key: &str) -> String {
    format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// The items of a task list with their pointers.
fn entries<'a>(list: &'a Value, at: &str) -> Vec<Entry<'a>> {
    let items = list.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        for (name, task) in item.as_object().into_iter().flatten() {
            let at = child(&child(at, &i.to_string()), name);
            out.push(Entry { name, task, at });
        }
    }
    out
}

/// The walk: what `use` declares, the task lists met (checked by [`flow`] once every task name
/// is known, so a `then` naming a task of another list is told so), the variables the enclosing
/// tasks bind, the problems found.
struct Walk<'a> {
    uses: refs::Uses,
    names: BTreeSet<&'a str>,
    scopes: Vec<Vec<Entry<'a>>>,
    vars: Vec<String>,
    problems: Vec<Problem>,
}

impl<'a> Walk<'a> {
    fn problem(&mut self, at: &str, message: Option<String>) {
        if let Some(message) = message {
            self.problems.push(Problem::new(at, message));
        }
    }

    /// Runs `f` with `vars` bound as well.
    fn binding(&mut self, vars: Vec<String>, f: impl FnOnce(&mut Self)) {
        let before = self.vars.len();
        self.vars.extend(vars);
        f(self);
        self.vars.truncate(before);
    }

    fn document(&mut self, doc: &'a Value) {
        for (key, value) in doc.as_object().into_iter().flatten() {
            let at = child("", key);
            match key.as_str() {
                "do" => self.task_list(value, &at),
                "input" | "output" => self.data_flow(value, &at),
                "timeout" => self.timeout(value, &at),
                "schedule" => self.schedule(value, &at),
                "use" => self.uses(value, &at),
                _ => {}
            }
        }
    }

    fn task_list(&mut self, list: &'a Value, at: &str) {
        let entries = entries(list, at);
        for entry in &entries {
            self.names.insert(entry.name);
            self.task(entry.task, &entry.at);
        }
        self.scopes.push(entries);
    }

    /// A task's fields: those of every task, a `for` loop's (`for.in` sees the enclosing
    /// variables, `while` and `do` the loop's too), then those of its kind.
    fn task(&mut self, task: &'a Value, at: &str) {
        let Some(fields) = task.as_object() else {
            return;
        };
        let loop_vars = fields.get("for").map(|f| {
            let name = |key, default| f.get(key).and_then(Value::as_str).unwrap_or(default);
            vec![
                name("each", "item").to_owned(),
                name("at", "index").to_owned(),
            ]
        });
        for (key, value) in fields {
            let at = child(at, key);
            match (key.as_str(), &loop_vars) {
                ("if", _) => self.expression(value, &at),
                ("input" | "output" | "export", _) => self.data_flow(value, &at),
                ("timeout", _) => self.timeout(value, &at),
                ("then" | "metadata", _) => {}
                ("for", Some(_)) => {
                    let r#in = value.get("in").unwrap_or(&Value::Null);
                    self.expression(r#in, &child(&at, "in"));
                }
                ("while", Some(vars)) => self.binding(vars.clone(), |w| w.expression(value, &at)),
                ("do", Some(vars)) => self.binding(vars.clone(), |w| w.task_list(value, &at)),
                _ => self.kind(fields, key, value, &at),
            }
        }
    }

    /// The fields of a task's kind.
    fn kind(&mut self, task: &'a Map<String, Value>, key: &str, value: &'a Value, at: &str) {
        match key {
            "call" => {
                let message = value.as_str().and_then(|name| self.uses.call(name));
                self.problem(at, message);
            }
            "with" => self.call_arguments(task, value, at),
            "do" | "try" => self.task_list(value, at),
            "fork" => self.task_list(&value["branches"], &child(at, "branches")),
            "catch" => self.catch(value, at),
            "listen" => self.events(&value["to"], &child(at, "to")),
            "foreach" => self.iterator(value, at),
            "raise" => self.raise(value, at),
            "switch" => self.switch(value, at),
            "wait" => self.duration(value, at),
            "run" => {
                self.scan(value, at);
                let after = "/container/lifetime/after";
                if let Some(d) = value.pointer(after) {
                    self.duration(d, &format!("{at}{after}"));
                }
            }
            _ => self.scan(value, at),
        }
    }

    /// A call's `with`: searched for expressions; an MCP call's timeout and an AsyncAPI
    /// subscription's duration and iterator are known fields.
    fn call_arguments(&mut self, task: &'a Map<String, Value>, with: &'a Value, at: &str) {
        let call = task.get("call").and_then(Value::as_str);
        let Some(subscription) = with
            .get("subscription")
            .filter(|_| call == Some("asyncapi"))
        else {
            self.scan(with, at);
            if let Some(timeout) = with.get("timeout").filter(|_| call == Some("mcp")) {
                self.duration(timeout, &child(at, "timeout"));
            }
            return;
        };
        let sub_at = child(at, "subscription");
        for (key, value) in with.as_object().into_iter().flatten() {
            if key != "subscription" {
                self.scan(value, &child(at, key));
            }
        }
        for (key, value) in subscription.as_object().into_iter().flatten() {
            let field_at = child(&sub_at, key);
            match key.as_str() {
                "foreach" => self.iterator(value, &field_at),
                "consume" => {
                    self.scan(value, &field_at);
                    if let Some(d) = value.get("for") {
                        self.duration(d, &child(&field_at, "for"));
                    }
                }
                _ => self.scan(value, &field_at),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_escape_slashes_and_tildes_in_names() {
        assert_eq!(child("/do/0", "a/b~c"), "/do/0/a~1b~0c");
        let doc = json!({"do": [{"get/pet": {"set": {}, "then": "x"}}]});
        let Err(Error::Rules(problems)) = check(&doc, BTreeSet::new()) else {
            panic!("an unknown then target is refused");
        };
        assert_eq!(problems.listed[0].pointer, "/do/0/get~1pet/then");
    }
}
