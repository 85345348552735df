//! Checks a workflow definition before it is stored or started: names, unique reference names, known
//! task types and the shape each system task needs. Every message names the offending task.

use super::nav::{is_known_type, next_after, Next};
use super::*;
use proto::limits::{DEF_TASKS_MAX, NAME_LEN_MAX};
use proto::model::{task_type, WorkflowTask};
use std::collections::BTreeSet;

/// Checks a workflow definition before it is stored.
pub fn validate_workflow_def(def: &WorkflowDef) -> Result<(), Error> {
    let bad = |m: String| Err(Error::Invalid(m));
    if def.name.trim().is_empty() {
        return bad("workflow definition has no name".into());
    }
    if def.name.len() > NAME_LEN_MAX {
        return bad(format!("workflow name is longer than {NAME_LEN_MAX} bytes"));
    }
    if def.tasks.is_empty() {
        return bad(format!("workflow '{}' has no tasks", def.name));
    }
    let all = def.all_tasks();
    if all.len() > DEF_TASKS_MAX {
        return bad(format!(
            "workflow '{}' has {} tasks; at most {DEF_TASKS_MAX} are allowed",
            def.name,
            all.len()
        ));
    }
    let mut refs = BTreeSet::new();
    for t in &all {
        let r = t.task_reference_name.as_str();
        if r.trim().is_empty() {
            return bad(format!("task '{}' has no taskReferenceName", t.name));
        }
        if r.len() > NAME_LEN_MAX || t.name.len() > NAME_LEN_MAX {
            return bad(format!(
                "task '{r}': name or taskReferenceName is longer than {NAME_LEN_MAX} bytes"
            ));
        }
        if t.name.trim().is_empty() {
            return bad(format!("task '{r}' has no name"));
        }
        if !refs.insert(r) {
            return bad(format!(
                "taskReferenceName '{r}' is used by more than one task"
            ));
        }
    }
    for t in &all {
        check_task(t, &refs)?;
    }
    check_forks_joined(def)
}

/// Every FORK_JOIN is followed by a JOIN: the task scheduled after it, by the same rule the
/// decider schedules with (a fork last in a SWITCH case is followed by what follows the SWITCH,
/// as in Conductor). Conductor fails such a workflow when it reaches the fork; refusing the
/// definition says so before any workflow starts.
fn check_forks_joined(def: &WorkflowDef) -> Result<(), Error> {
    for fork in def.all_tasks().into_iter().filter(|t| {
        t.task_type == task_type::FORK_JOIN || t.task_type == task_type::FORK_JOIN_DYNAMIC
    }) {
        let r = &fork.task_reference_name;
        match next_after(&def.tasks, r) {
            Some(Next::Task(j)) if j.task_type == task_type::JOIN => {}
            _ => {
                return Err(Error::Invalid(format!(
                    "{} task '{r}' is not followed by a JOIN task",
                    fork.task_type
                )))
            }
        }
    }
    Ok(())
}

fn check_task(t: &WorkflowTask, refs: &BTreeSet<&str>) -> Result<(), Error> {
    let r = &t.task_reference_name;
    if !is_known_type(&t.task_type) {
        return Err(Error::Invalid(format!(
            "task '{r}' has type '{}', which Baton does not support",
            t.task_type
        )));
    }
    let problem = match t.task_type.as_str() {
        task_type::FORK_JOIN => fork_problem(t),
        task_type::EVENT => event_problem(t),
        task_type::JOIN | task_type::EXCLUSIVE_JOIN => join_problem(t, refs),
        task_type::SWITCH => switch_problem(t),
        task_type::DECISION => decision_problem(t),
        task_type::DO_WHILE => return check_loop(t),
        task_type::FORK_JOIN_DYNAMIC
        | task_type::DYNAMIC
        | task_type::INLINE
        | task_type::LAMBDA
        | task_type::JSON_JQ_TRANSFORM
        | task_type::START_WORKFLOW
        | task_type::HTTP
        | task_type::SUB_WORKFLOW => return super::params::check(t),
        _ => None,
    };
    match problem {
        Some(p) => Err(Error::Invalid(format!("{} task '{r}' {p}", t.task_type))),
        None => Ok(()),
    }
}

fn blank(s: Option<&str>) -> bool {
    s.is_none_or(|s| s.trim().is_empty())
}

fn fork_problem(t: &WorkflowTask) -> Option<String> {
    if t.fork_tasks.is_empty() {
        return Some("has no forkTasks".into());
    }
    let n = t.fork_tasks.iter().position(Vec::is_empty)?;
    Some(format!("has an empty branch (forkTasks[{n}])"))
}

fn event_problem(t: &WorkflowTask) -> Option<String> {
    match t.sink.as_deref().map(str::trim) {
        None | Some("") => Some("has no sink".into()),
        Some("conductor") => None,
        Some(s) if proto::model::split_event(s).is_none() => {
            Some(format!("has sink '{s}'; use 'conductor' or provider:queue"))
        }
        Some(_) => None,
    }
}

fn join_problem(t: &WorkflowTask, refs: &BTreeSet<&str>) -> Option<String> {
    let r = &t.task_reference_name;
    if t.join_on.iter().any(|j| j == r) {
        return Some("joins on itself".into());
    }
    let mut on = t.join_on.iter().chain(&t.default_exclusive_join_task);
    let missing = on.find(|j| !refs.contains(j.as_str()))?;
    Some(format!(
        "joins on '{missing}', which is not a task of this workflow"
    ))
}

fn switch_problem(t: &WorkflowTask) -> Option<String> {
    match t.evaluator_type.as_deref() {
        None | Some("") => return Some("has no evaluatorType".into()),
        Some("value-param" | "javascript" | "graaljs") => {}
        Some(other) => {
            return Some(format!(
                "has evaluatorType '{other}'; use 'value-param', 'javascript' or 'graaljs'"
            ))
        }
    }
    blank(t.expression.as_deref()).then(|| "has no expression".into())
}

fn decision_problem(t: &WorkflowTask) -> Option<String> {
    let neither = blank(t.case_value_param.as_deref()) && blank(t.case_expression.as_deref());
    neither.then(|| "has neither caseValueParam nor caseExpression".into())
}

/// A DO_WHILE has a condition and a body, and no loop inside it.
fn check_loop(t: &WorkflowTask) -> Result<(), Error> {
    let r = &t.task_reference_name;
    let bad = |m: &str| Err(Error::Invalid(format!("DO_WHILE task '{r}' {m}")));
    // An empty condition is Conductor's too: it is false, so the body runs once.
    if t.loop_condition.is_none() {
        return bad("has no loopCondition");
    }
    if t.loop_over.is_empty() {
        return bad("has no loopOver tasks");
    }
    let body = WorkflowDef {
        tasks: t.loop_over.clone(),
        ..Default::default()
    };
    if body
        .all_tasks()
        .iter()
        .any(|b| b.task_type == task_type::DO_WHILE)
    {
        return bad("holds another DO_WHILE; Baton does not nest loops");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wt(r: &str, ty: &str) -> WorkflowTask {
        WorkflowTask {
            name: r.into(),
            task_reference_name: r.into(),
            task_type: ty.into(),
            ..Default::default()
        }
    }

    fn with_params(r: &str, ty: &str, params: serde_json::Value) -> WorkflowTask {
        let serde_json::Value::Object(input_parameters) = params else {
            panic!("parameters are an object");
        };
        WorkflowTask {
            input_parameters,
            ..wt(r, ty)
        }
    }

    trait Tap: Sized {
        fn tap(self, f: impl FnOnce(&mut Self)) -> Self;
    }

    impl Tap for WorkflowTask {
        fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
            f(&mut self);
            self
        }
    }

    fn def(tasks: Vec<WorkflowTask>) -> WorkflowDef {
        WorkflowDef {
            name: "w".into(),
            tasks,
            ..Default::default()
        }
    }

    #[test]
    fn rejects_bad_definitions() {
        let mut fork_empty_branch = wt("f", "FORK_JOIN");
        fork_empty_branch.fork_tasks = vec![vec![wt("a", "SIMPLE")], vec![]];
        let mut join_missing = wt("j", "JOIN");
        join_missing.join_on = vec!["zz".into()];
        let mut js_switch = wt("s", "SWITCH");
        js_switch.evaluator_type = Some("python".into());
        js_switch.expression = Some("1".into());
        let mut no_expr = wt("s", "SWITCH");
        no_expr.evaluator_type = Some("value-param".into());
        let mut nested_dup = wt("f", "FORK_JOIN");
        nested_dup.fork_tasks = vec![vec![wt("a", "SIMPLE")]];
        let mut join_self = wt("j", "JOIN");
        join_self.join_on = vec!["j".into()];
        let mut unjoined = wt("f", "FORK_JOIN");
        unjoined.fork_tasks = vec![vec![wt("a", "SIMPLE")]];
        let mut nested_unjoined = wt("g", "FORK_JOIN");
        nested_unjoined.fork_tasks = vec![vec![unjoined.clone(), wt("b", "SIMPLE")]];
        let table: Vec<(WorkflowDef, &str)> = vec![
            (
                WorkflowDef {
                    name: String::new(),
                    ..def(vec![wt("a", "SIMPLE")])
                },
                "no name",
            ),
            (def(vec![]), "has no tasks"),
            (def(vec![wt("", "SIMPLE")]), "has no taskReferenceName"),
            (
                def(vec![wt("a", "SIMPLE"), wt("a", "SIMPLE")]),
                "'a' is used by more than one task",
            ),
            (
                def(vec![nested_dup, wt("a", "SIMPLE")]),
                "'a' is used by more than one task",
            ),
            (def(vec![wt("h", "HTTP_X")]), "task 'h' has type 'HTTP_X'"),
            (
                def(vec![wt("f", "FORK_JOIN")]),
                "FORK_JOIN task 'f' has no forkTasks",
            ),
            (
                def(vec![fork_empty_branch]),
                "FORK_JOIN task 'f' has an empty branch",
            ),
            (def(vec![join_missing]), "JOIN task 'j' joins on 'zz'"),
            (def(vec![join_self]), "JOIN task 'j' joins on itself"),
            (
                def(vec![unjoined, wt("z", "SIMPLE")]),
                "FORK_JOIN task 'f' is not followed by a JOIN task",
            ),
            (
                def(vec![nested_unjoined, wt("jg", "JOIN")]),
                "FORK_JOIN task 'f' is not followed by a JOIN task",
            ),
            (
                def(vec![wt("s", "SWITCH")]),
                "SWITCH task 's' has no evaluatorType",
            ),
            (def(vec![js_switch]), "evaluatorType 'python'"),
            (def(vec![no_expr]), "SWITCH task 's' has no expression"),
            (
                def(vec![wt("d", "DECISION")]),
                "DECISION task 'd' has neither caseValueParam nor caseExpression",
            ),
            (
                def(vec![wt(&"x".repeat(NAME_LEN_MAX + 1), "SIMPLE")]),
                "longer than",
            ),
            (
                def(vec![wt("f", "FORK_JOIN_DYNAMIC"), wt("j", "JOIN")]),
                "FORK_JOIN_DYNAMIC task 'f' has no dynamicForkTasksParam",
            ),
            (
                def(vec![with_params(
                    "f",
                    "FORK_JOIN_DYNAMIC",
                    json!({"forkTaskInputs": []}),
                )]),
                "FORK_JOIN_DYNAMIC task 'f' is not followed by a JOIN task",
            ),
            (
                def(vec![
                    wt("l", "DO_WHILE").tap(|t| t.loop_over = vec![wt("a", "SIMPLE")])
                ]),
                "DO_WHILE task 'l' has no loopCondition",
            ),
            (
                def(vec![
                    wt("l", "DO_WHILE").tap(|t| t.loop_condition = Some("true".into()))
                ]),
                "DO_WHILE task 'l' has no loopOver tasks",
            ),
            (
                def(vec![wt("d", "DYNAMIC")]),
                "DYNAMIC task 'd' has no dynamicTaskNameParam",
            ),
            (
                def(vec![with_params(
                    "i",
                    "INLINE",
                    json!({"evaluatorType": "javascript"}),
                )]),
                "INLINE task 'i' has no expression",
            ),
            (
                def(vec![with_params(
                    "i",
                    "INLINE",
                    json!({"expression": "1", "evaluatorType": "python"}),
                )]),
                "INLINE task 'i' has evaluatorType 'python'",
            ),
            (
                def(vec![wt("l", "LAMBDA")]),
                "LAMBDA task 'l' has no scriptExpression",
            ),
            (
                def(vec![with_params(
                    "q",
                    "JSON_JQ_TRANSFORM",
                    json!({"queryExpression": ".a | {"}),
                )]),
                "JSON_JQ_TRANSFORM task 'q' jq query does not parse",
            ),
            (
                def(vec![with_params(
                    "s",
                    "START_WORKFLOW",
                    json!({"startWorkflow": {"input": {}}}),
                )]),
                "START_WORKFLOW task 's' names no workflow",
            ),
            (
                def(vec![with_params("x", "EXCLUSIVE_JOIN", json!({})).tap(
                    |t| t.default_exclusive_join_task = vec!["nope".into()],
                )]),
                "EXCLUSIVE_JOIN task 'x' joins on 'nope'",
            ),
        ];
        for (d, want) in table {
            match validate_workflow_def(&d) {
                Err(Error::Invalid(m)) => {
                    assert!(m.contains(want), "{m:?} should contain {want:?}")
                }
                other => panic!("expected Invalid containing {want:?}, got {other:?}"),
            }
        }
        let many: Vec<WorkflowTask> = (0..=DEF_TASKS_MAX)
            .map(|i| wt(&format!("t{i}"), "SIMPLE"))
            .collect();
        assert!(
            matches!(validate_workflow_def(&def(many)), Err(Error::Invalid(m)) if m.contains("at most"))
        );
    }

    #[test]
    fn accepts_conformance_fixtures() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/conductor/test-harness/"
        );
        for f in [
            "simple_workflow_1_integration_test.json",
            "fork_join_integration_test.json",
            "nested_fork_join_integration_test.json",
            "fork_join_permissive_integration_test.json",
            "simple_switch_task_integration_test.json",
            "set_variable_workflow_integration_test.json",
        ] {
            let text = std::fs::read_to_string(format!("{dir}{f}")).expect("fixture readable");
            let d: WorkflowDef = serde_json::from_str(&text).expect("fixture parses");
            validate_workflow_def(&d).unwrap_or_else(|e| panic!("{f}: {e}"));
        }
    }
}
