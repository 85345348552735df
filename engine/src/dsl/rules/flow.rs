//! The rules of one scope (a task list): task names are unique in it, a `then` names
//! `continue`, `exit`, `end` or a task of the same list, and a `switch` has at most one default
//! case (a case without `when`), each case's `then` following the same rule.

use super::child;
use crate::dsl::error::Problem;
use serde_json::Value;
use std::collections::BTreeSet;

/// The flow directives that name no task.
const DIRECTIVES: [&str; 3] = ["continue", "exit", "end"];

/// One task of a list: its name, its body and the JSON pointer of the body (`/do/2/checkup`).
pub struct Entry<'a> {
    pub name: &'a str,
    pub task: &'a Value,
    pub at: String,
}

/// The problems of one list; `everywhere` holds every task name of the document, so a target in
/// another list gets a message of its own.
pub fn scope(entries: &[Entry<'_>], everywhere: &BTreeSet<&str>) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in entries {
        if !seen.insert(entry.name) {
            let message = format!(
                "a task named '{}' comes earlier in the same list; names must be unique in a list",
                entry.name
            );
            problems.push(Problem::new(&entry.at, message));
        }
    }
    for entry in entries {
        if let Some(then) = entry.task.get("then").and_then(Value::as_str) {
            let at = child(&entry.at, "then");
            problems.extend(target(then, &seen, everywhere, &at));
        }
        if let Some(cases) = entry.task.get("switch").and_then(Value::as_array) {
            let at = child(&entry.at, "switch");
            problems.extend(switch(cases, &seen, everywhere, &at));
        }
    }
    problems
}

/// Why `then` at `at` cannot be followed, if it cannot.
fn target(
    then: &str,
    names: &BTreeSet<&str>,
    everywhere: &BTreeSet<&str>,
    at: &str,
) -> Option<Problem> {
    if DIRECTIVES.contains(&then) || names.contains(then) {
        return None;
    }
    let message = if everywhere.contains(then) {
        format!(
            "'{then}' is a task of another list; `then` may only name a task of its own list \
             (or continue, exit, end)"
        )
    } else {
        format!("no task named '{then}' in this list; `then` names one, or continue, exit, end")
    };
    Some(Problem::new(at, message))
}

/// The problems of a switch's cases (at `at`, the `switch` list).
fn switch(
    cases: &[Value],
    names: &BTreeSet<&str>,
    everywhere: &BTreeSet<&str>,
    at: &str,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut default: Option<String> = None;
    let mut seen = BTreeSet::new();
    for (i, case) in cases.iter().enumerate() {
        let Some((name, body)) = case.as_object().and_then(|m| m.iter().next()) else {
            continue;
        };
        let case_at = child(&child(at, &i.to_string()), name);
        if !seen.insert(name.as_str()) {
            let message = format!("a case named '{name}' comes earlier in the same switch");
            problems.push(Problem::new(&case_at, message));
        }
        if let Some(then) = body.get("then").and_then(Value::as_str) {
            problems.extend(target(then, names, everywhere, &child(&case_at, "then")));
        }
        if body.get("when").is_some() {
            continue;
        }
        match &default {
            Some(first) => problems.push(Problem::new(
                &case_at,
                format!("a second default case (without `when`); {first} is the default already"),
            )),
            None => default = Some(case_at),
        }
    }
    problems
}
