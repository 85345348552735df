//! Navigation in a workflow definition: where a task reference sits (which list, which index, inside
//! which container) and what runs after it. Fork branches end at their JOIN (scheduled with the FORK);
//! a SWITCH case ends by continuing after the SWITCH; a DO_WHILE's body ends its iteration (the
//! loop decides whether another one follows); the top-level list ends the workflow.

use proto::model::{task_type, WorkflowTask};

/// The kind of list a task sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    Root,
    Branch,
    Case,
    Loop,
}

/// What follows a task.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Next<'a> {
    /// Schedule this task.
    Task(&'a WorkflowTask),
    /// The end of a fork branch: the branch's JOIN (already scheduled) takes over.
    BranchEnd,
    /// The end of a DO_WHILE's body: the loop takes over.
    LoopEnd,
    /// The end of the workflow's task list.
    End,
}

type Frame<'a> = (&'a [WorkflowTask], usize, Container);

fn locate<'a>(
    list: &'a [WorkflowTask],
    kind: Container,
    reference: &str,
    stack: &mut Vec<Frame<'a>>,
) -> bool {
    for (i, t) in list.iter().enumerate() {
        stack.push((list, i, kind));
        if t.task_reference_name == reference {
            return true;
        }
        for branch in &t.fork_tasks {
            if locate(branch, Container::Branch, reference, stack) {
                return true;
            }
        }
        for case in t.decision_cases.values() {
            if locate(case, Container::Case, reference, stack) {
                return true;
            }
        }
        if locate(&t.default_case, Container::Case, reference, stack) {
            return true;
        }
        if locate(&t.loop_over, Container::Loop, reference, stack) {
            return true;
        }
        stack.pop();
    }
    false
}

/// What follows `reference` in `tasks` (`None` when the reference is not in the definition).
pub(crate) fn next_after<'a>(tasks: &'a [WorkflowTask], reference: &str) -> Option<Next<'a>> {
    let mut stack = Vec::new();
    if !locate(tasks, Container::Root, reference, &mut stack) {
        return None;
    }
    while let Some((list, i, kind)) = stack.pop() {
        if let Some(t) = list.get(i + 1) {
            return Some(Next::Task(t));
        }
        match kind {
            Container::Root => return Some(Next::End),
            Container::Branch => return Some(Next::BranchEnd),
            Container::Loop => return Some(Next::LoopEnd),
            Container::Case => continue,
        }
    }
    Some(Next::End)
}

/// The workflow task with `reference`, anywhere in the definition.
pub(crate) fn find<'a>(tasks: &'a [WorkflowTask], reference: &str) -> Option<&'a WorkflowTask> {
    let mut stack = Vec::new();
    if locate(tasks, Container::Root, reference, &mut stack) {
        stack.last().map(|(list, i, _)| &list[*i])
    } else {
        None
    }
}

/// The DO_WHILE whose body holds `reference` (at any depth), if any.
pub(crate) fn loop_of<'a>(tasks: &'a [WorkflowTask], reference: &str) -> Option<&'a WorkflowTask> {
    let mut stack = Vec::new();
    if !locate(tasks, Container::Root, reference, &mut stack) {
        return None;
    }
    let inner = stack
        .iter()
        .rposition(|(_, _, kind)| *kind == Container::Loop)?;
    let (list, i, _) = stack.get(inner.checked_sub(1)?)?;
    list.get(*i)
}

/// The reference a task of `reference` gets in iteration `iteration` of its loop (Conductor's
/// `__N` suffix; none outside loops).
pub(crate) fn in_iteration(reference: &str, iteration: u32) -> String {
    if iteration == 0 {
        reference.to_owned()
    } else {
        format!("{reference}__{iteration}")
    }
}

/// Task types Baton executes itself (never offered to workers). A DYNAMIC task becomes the task
/// its input names when it is scheduled.
pub(crate) const SYSTEM_TYPES: &[&str] = &[
    task_type::FORK_JOIN,
    task_type::JOIN,
    task_type::SWITCH,
    task_type::DECISION,
    task_type::TERMINATE,
    task_type::SET_VARIABLE,
    task_type::WAIT,
    task_type::EVENT,
    task_type::FORK_JOIN_DYNAMIC,
    task_type::EXCLUSIVE_JOIN,
    task_type::DYNAMIC,
    task_type::HUMAN,
    task_type::START_WORKFLOW,
    task_type::INLINE,
    task_type::LAMBDA,
    task_type::JSON_JQ_TRANSFORM,
    task_type::HTTP,
    task_type::DO_WHILE,
    task_type::SUB_WORKFLOW,
];

/// Whether the engine accepts this task type in a definition: SIMPLE (worker) tasks and the system
/// tasks it executes itself.
pub(crate) fn is_known_type(ty: &str) -> bool {
    ty == task_type::SIMPLE || SYSTEM_TYPES.contains(&ty)
}

/// `javascript` and `graaljs` (Conductor's two names for its JavaScript evaluator).
pub(crate) fn is_script_evaluator(evaluator: Option<&str>) -> bool {
    matches!(evaluator, Some("javascript" | "graaljs"))
}

/// A SWITCH with a script, or a DECISION with a `caseExpression` (JavaScript) instead of a
/// `caseValueParam`: its case is chosen by a script the runtime evaluates.
pub(crate) fn is_scripted_switch(wt: &WorkflowTask) -> bool {
    match wt.task_type.as_str() {
        task_type::SWITCH => is_script_evaluator(wt.evaluator_type.as_deref()),
        task_type::DECISION => {
            let no_param = wt
                .case_value_param
                .as_deref()
                .is_none_or(|p| p.trim().is_empty());
            no_param && wt.case_expression.is_some()
        }
        _ => false,
    }
}

/// True for tasks that workers poll for.
pub(crate) fn is_worker_type(workflow_task_type: &str) -> bool {
    !SYSTEM_TYPES.contains(&workflow_task_type)
        && workflow_task_type != "FORK"
        && !workflow_task_type.starts_with(proto::model::dsl::TASK_TYPE_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wt(r: &str) -> WorkflowTask {
        WorkflowTask {
            name: r.into(),
            task_reference_name: r.into(),
            ..Default::default()
        }
    }

    #[test]
    fn next_through_containers() {
        let mut sw = wt("sw");
        sw.task_type = task_type::SWITCH.into();
        sw.decision_cases
            .insert("c".into(), vec![wt("c1"), wt("c2")]);
        sw.default_case = vec![wt("d1")];
        let mut fork = wt("f");
        fork.task_type = task_type::FORK_JOIN.into();
        fork.fork_tasks = vec![vec![wt("b1"), sw], vec![wt("b2")]];
        let tasks = vec![wt("a"), fork, wt("j"), wt("z")];
        let name = |n: Option<Next<'_>>| match n {
            Some(Next::Task(t)) => t.task_reference_name.clone(),
            Some(Next::BranchEnd) => "<branch end>".into(),
            Some(Next::LoopEnd) => "<loop end>".into(),
            Some(Next::End) => "<end>".into(),
            None => "<none>".into(),
        };
        let table = [
            ("a", "f"),
            ("f", "j"),
            ("b1", "sw"),
            ("c1", "c2"),
            ("c2", "<branch end>"),
            ("d1", "<branch end>"),
            ("sw", "<branch end>"),
            ("b2", "<branch end>"),
            ("j", "z"),
            ("z", "<end>"),
            ("missing", "<none>"),
        ];
        for (r, want) in table {
            assert_eq!(name(next_after(&tasks, r)), want, "after {r}");
        }
        assert_eq!(find(&tasks, "c2").map(|t| t.name.as_str()), Some("c2"));
    }
}
