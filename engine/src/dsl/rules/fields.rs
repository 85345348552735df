//! The walk through the fields whose meaning the DSL fixes: `catch`, retry policies, timeouts,
//! durations, event strategies, iterators, `use`, and the data flow (`input`, `output`,
//! `export`), down to the expressions in them.

use super::{child, duration, expr, refs, Walk};
use serde_json::Value;

impl<'a> Walk<'a> {
    /// A field that is an expression by definition (`if`, `when`, `for.in`, ...).
    pub(super) fn expression(&mut self, value: &'a Value, at: &str) {
        match value.as_str() {
            Some(text) => {
                let message = expr::check(text, &self.vars);
                self.problem(at, message);
            }
            None => self.scan(value, at),
        }
    }

    /// A free-form value: every `${ }` string in it is an expression.
    pub(super) fn scan(&mut self, value: &'a Value, at: &str) {
        match value {
            Value::String(text) if expr::enclosed(text).is_some() => {
                let message = expr::check(text, &self.vars);
                self.problem(at, message);
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.scan(item, &child(at, &i.to_string()));
                }
            }
            Value::Object(fields) => {
                for (key, item) in fields {
                    self.scan(item, &child(at, key));
                }
            }
            _ => {}
        }
    }

    /// `input` (`from`), `output` and `export` (`as`): an expression, or a value searched for
    /// expressions; the `schema` is a document, not searched.
    pub(super) fn data_flow(&mut self, value: &'a Value, at: &str) {
        for (key, field) in value.as_object().into_iter().flatten() {
            match key.as_str() {
                "from" | "as" => self.expression(field, &child(at, key)),
                _ => {}
            }
        }
    }

    /// A duration: an object is checked by [`duration::check`], a `${ }` string compiled.
    pub(super) fn duration(&mut self, value: &'a Value, at: &str) {
        let message = duration::check(value);
        self.problem(at, message);
        self.scan(value, at);
    }

    /// A timeout: a name of `use.timeouts`, or one with its duration (`after`).
    pub(super) fn timeout(&mut self, value: &'a Value, at: &str) {
        match value {
            Value::String(name) => {
                let message = refs::named("timeouts", &self.uses.timeouts, name);
                self.problem(at, message);
            }
            _ => {
                let after = value.get("after").unwrap_or(&Value::Null);
                self.duration(after, &child(at, "after"));
            }
        }
    }

    /// A retry policy: its conditions and durations.
    pub(super) fn retry(&mut self, policy: &'a Value, at: &str) {
        for key in ["when", "exceptWhen"] {
            if let Some(condition) = policy.get(key) {
                self.expression(condition, &child(at, key));
            }
        }
        for pointer in [
            "/delay",
            "/limit/attempt/duration",
            "/limit/duration",
            "/jitter/from",
            "/jitter/to",
        ] {
            if let Some(d) = policy.pointer(pointer) {
                self.duration(d, &format!("{at}{pointer}"));
            }
        }
    }

    /// `try.catch`: `when`, `exceptWhen` and `do` see the caught error under its name (`as`,
    /// `error` by default); `retry` is a policy or a name of `use.retries`.
    pub(super) fn catch(&mut self, catch: &'a Value, at: &str) {
        let name = catch.get("as").and_then(Value::as_str).unwrap_or("error");
        for (key, value) in catch.as_object().into_iter().flatten() {
            let field_at = child(at, key);
            match key.as_str() {
                "when" | "exceptWhen" => {
                    self.binding(vec![name.to_owned()], |w| w.expression(value, &field_at))
                }
                "do" => self.binding(vec![name.to_owned()], |w| w.task_list(value, &field_at)),
                "retry" => match value.as_str() {
                    Some(retry) => {
                        let message = refs::named("retries", &self.uses.retries, retry);
                        self.problem(&field_at, message);
                    }
                    None => self.retry(value, &field_at),
                },
                _ => {}
            }
        }
    }

    /// `raise.error`: an error, or a name of `use.errors`.
    pub(super) fn raise(&mut self, raise: &'a Value, at: &str) {
        let at = child(at, "error");
        match raise.get("error") {
            Some(Value::String(name)) => {
                let message = refs::named("errors", &self.uses.errors, name);
                self.problem(&at, message);
            }
            Some(error) => self.scan(error, &at),
            None => {}
        }
    }

    /// A switch's cases: each `when` is an expression (their `then` is checked with the scope).
    pub(super) fn switch(&mut self, cases: &'a Value, at: &str) {
        for (i, case) in cases.as_array().into_iter().flatten().enumerate() {
            for (name, body) in case.as_object().into_iter().flatten() {
                if let Some(when) = body.get("when") {
                    let case_at = child(&child(at, &i.to_string()), name);
                    self.expression(when, &child(&case_at, "when"));
                }
            }
        }
    }

    /// An event consumption strategy (`listen.to`, `schedule.on`): filters, and `until`.
    pub(super) fn events(&mut self, strategy: &'a Value, at: &str) {
        for (key, value) in strategy.as_object().into_iter().flatten() {
            let field_at = child(at, key);
            match (key.as_str(), value) {
                ("all" | "any", Value::Array(filters)) => {
                    for (i, filter) in filters.iter().enumerate() {
                        self.event_filter(filter, &child(&field_at, &i.to_string()));
                    }
                }
                ("one", filter) => self.event_filter(filter, &field_at),
                ("until", Value::String(_)) => self.expression(value, &field_at),
                ("until", nested) => self.events(nested, &field_at),
                _ => {}
            }
        }
    }

    /// An event filter: `with` attributes (searched for expressions) and `correlate` keys,
    /// whose `from` is an expression.
    fn event_filter(&mut self, filter: &'a Value, at: &str) {
        if let Some(with) = filter.get("with") {
            self.scan(with, &child(at, "with"));
        }
        let correlate = filter.get("correlate").and_then(Value::as_object);
        for (key, correlation) in correlate.into_iter().flatten() {
            let key_at = child(&child(at, "correlate"), key);
            if let Some(from) = correlation.get("from") {
                self.expression(from, &child(&key_at, "from"));
            }
            if let Some(expect) = correlation.get("expect") {
                self.scan(expect, &child(&key_at, "expect"));
            }
        }
    }

    /// `foreach` of a listen or a subscription: `do`, `output` and `export` see the item and
    /// its index under their names (`item` and `index` by default).
    pub(super) fn iterator(&mut self, iterator: &'a Value, at: &str) {
        let name = |key, default| iterator.get(key).and_then(Value::as_str).unwrap_or(default);
        let vars = vec![
            name("item", "item").to_owned(),
            name("at", "index").to_owned(),
        ];
        self.binding(vars, |w| {
            for (key, value) in iterator.as_object().into_iter().flatten() {
                let field_at = child(at, key);
                match key.as_str() {
                    "do" => w.task_list(value, &field_at),
                    "output" | "export" => w.data_flow(value, &field_at),
                    _ => {}
                }
            }
        });
    }

    /// The workflow's `schedule`: its durations and its events.
    pub(super) fn schedule(&mut self, schedule: &'a Value, at: &str) {
        for (key, value) in schedule.as_object().into_iter().flatten() {
            let field_at = child(at, key);
            match key.as_str() {
                "every" | "after" => self.duration(value, &field_at),
                "on" => self.events(value, &field_at),
                _ => {}
            }
        }
    }

    /// `use`: functions are tasks, retry policies and timeouts have durations, extensions
    /// have a condition and task lists; the rest is searched for expressions.
    pub(super) fn uses(&mut self, uses: &'a Value, at: &str) {
        for (kind, declared) in uses.as_object().into_iter().flatten() {
            let kind_at = child(at, kind);
            if kind == "extensions" {
                self.extensions(declared, &kind_at);
                continue;
            }
            for (name, value) in declared.as_object().into_iter().flatten() {
                let item_at = child(&kind_at, name);
                match kind.as_str() {
                    "functions" => self.task(value, &item_at),
                    "retries" => self.retry(value, &item_at),
                    "timeouts" => self.timeout(value, &item_at),
                    _ => self.scan(value, &item_at),
                }
            }
        }
    }

    /// `use.extensions`: a list of single-key maps, each with `when`, `before` and `after`.
    fn extensions(&mut self, list: &'a Value, at: &str) {
        for (i, item) in list.as_array().into_iter().flatten().enumerate() {
            for (name, extension) in item.as_object().into_iter().flatten() {
                let ext_at = child(&child(at, &i.to_string()), name);
                for (key, value) in extension.as_object().into_iter().flatten() {
                    match key.as_str() {
                        "when" => self.expression(value, &child(&ext_at, key)),
                        "before" | "after" => self.task_list(value, &child(&ext_at, key)),
                        _ => {}
                    }
                }
            }
        }
    }
}
