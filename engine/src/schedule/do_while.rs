//! DO_WHILE: runs its `loopOver` tasks, then asks its `loopCondition` (JavaScript, evaluated by
//! the runtime like any script: see `work`) whether to run them again.
//!
//! Each iteration's tasks carry Conductor's `__N` suffix on their references and `iteration` N.
//! The loop is IN_PROGRESS throughout; when every task of its current iteration is final, its
//! condition is pending work, with `$` bound to the loop's input, the loop's own output under
//! its reference (`$.loop['iteration']`) and each of the iteration's tasks' output under its
//! reference without the suffix. The loop's output holds each iteration's outputs under the
//! iteration's number, and `iteration`. `keepLastN` (in its input) drops the tasks and outputs
//! of older iterations as new ones start, so an unbounded loop stays bounded; at most
//! [`LOOP_ITERATIONS_MAX`] iterations run.

use super::{complete_now, push, schedule};
use crate::expr;
use crate::state::Ctx;
use proto::limits::LOOP_ITERATIONS_MAX;
use proto::model::{task_type, Json, Task, TaskStatus, Workflow, WorkflowTask};
use serde_json::Value;
use std::collections::BTreeSet;

/// The loop in progress at iteration 1. Its first task is scheduled by [`start_loops`], after
/// the tasks scheduled with the loop (a fork's other branches), as Conductor lists them.
pub(super) fn schedule_loop(ctx: &mut Ctx<'_>, mut task: Task) {
    task.status = TaskStatus::InProgress;
    task.start_time = ctx.now;
    task.iteration = 1;
    task.output_data.insert("iteration".into(), 1.into());
    push(ctx, task);
}

/// Schedules the first task of every loop in progress whose iteration has none yet. Returns
/// true if it scheduled any.
pub(crate) fn start_loops(ctx: &mut Ctx<'_>) -> bool {
    let waiting: Vec<WorkflowTask> = ctx
        .wf
        .tasks
        .iter()
        .filter(|t| t.task_type == task_type::DO_WHILE && t.status == TaskStatus::InProgress)
        .filter(|dw| iteration_tasks(&ctx.wf, dw).next().is_none())
        .filter_map(|dw| dw.workflow_task.loop_over.first().cloned())
        .collect();
    for first in &waiting {
        schedule(ctx, first);
    }
    !waiting.is_empty()
}

/// The references of the loop's body at any depth (forks and cases inside it).
fn body_refs(wt: &WorkflowTask) -> BTreeSet<&str> {
    let mut refs = BTreeSet::new();
    let mut stack: Vec<&WorkflowTask> = wt.loop_over.iter().collect();
    while let Some(t) = stack.pop() {
        refs.insert(t.task_reference_name.as_str());
        stack.extend(t.fork_tasks.iter().flatten());
        stack.extend(t.decision_cases.values().flatten());
        stack.extend(&t.default_case);
        stack.extend(&t.loop_over);
    }
    refs
}

/// The tasks of the loop `dw`'s current iteration.
fn iteration_tasks<'a>(wf: &'a Workflow, dw: &'a Task) -> impl Iterator<Item = &'a Task> {
    let refs = body_refs(&dw.workflow_task);
    wf.tasks.iter().filter(move |t| {
        t.iteration == dw.iteration && refs.contains(t.workflow_task.task_reference_name.as_str())
    })
}

/// Whether every task of the loop's current iteration is final (a failed one retried is not).
pub(crate) fn body_done(wf: &Workflow, dw: &Task) -> bool {
    let mut any = false;
    for t in iteration_tasks(wf, dw) {
        any = true;
        if !t.status.is_terminal() || !t.executed {
            return false;
        }
    }
    any
}

/// What the loop's condition sees as `$`.
pub(crate) fn condition_scope(wf: &Workflow, dw: &Task) -> Value {
    // The loop's parameters are resolved again for each condition, as Conductor does, so a
    // variable the body set is seen.
    let params = &dw.workflow_task.input_parameters;
    let mut scope = dw.input_data.clone();
    scope.extend(expr::resolve_map(params, &expr::Scope::new(wf)));
    scope.insert(
        dw.reference_task_name.clone(),
        Value::Object(dw.output_data.clone()),
    );
    for (r, out) in iteration_outputs(wf, dw) {
        scope.insert(r, Value::Object(out));
    }
    Value::Object(scope)
}

/// The outputs of the current iteration's tasks, by reference without the suffix (the latest
/// attempt of each).
fn iteration_outputs(wf: &Workflow, dw: &Task) -> Vec<(String, Json)> {
    let mut out: Vec<(String, Json)> = Vec::new();
    for t in iteration_tasks(wf, dw) {
        let r = t.workflow_task.task_reference_name.clone();
        out.retain(|(seen, _)| *seen != r);
        out.push((r, t.output_data.clone()));
    }
    out
}

/// JavaScript's truthiness of a condition's value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// The loop's condition was evaluated (or could not be): records the iteration's outputs, then
/// starts the next iteration, completes the loop, or fails it with the reason.
pub(crate) fn loop_decided(ctx: &mut Ctx<'_>, i: usize, outcome: Result<Value, String>) {
    let dw = ctx.wf.tasks[i].clone();
    let outputs: Json = iteration_outputs(&ctx.wf, &dw)
        .into_iter()
        .map(|(r, o)| (r, Value::Object(o)))
        .collect();
    let now = ctx.now;
    let t = &mut ctx.wf.tasks[i];
    t.output_data
        .insert(dw.iteration.to_string(), Value::Object(outputs));
    t.update_time = now;
    ctx.changed = true;
    let again = match outcome {
        Ok(v) => truthy(&v),
        Err(reason) => return fail(ctx, i, reason),
    };
    if !again {
        let output = ctx.wf.tasks[i].output_data.clone();
        complete_now(now, &mut ctx.wf.tasks[i], output);
        ctx.wf.tasks[i].start_time = dw.start_time;
        return;
    }
    if dw.iteration >= LOOP_ITERATIONS_MAX {
        let reason = format!(
            "DO_WHILE '{}' reached the limit of {LOOP_ITERATIONS_MAX} iterations",
            dw.reference_task_name
        );
        return fail(ctx, i, reason);
    }
    next_iteration(ctx, i);
}

fn fail(ctx: &mut Ctx<'_>, i: usize, reason: String) {
    let t = &mut ctx.wf.tasks[i];
    t.status = TaskStatus::Failed;
    t.end_time = ctx.now;
    t.reason_for_incompletion = Some(reason);
}

/// Starts iteration N + 1: drops what `keepLastN` no longer keeps, then schedules the body's
/// first task.
fn next_iteration(ctx: &mut Ctx<'_>, i: usize) {
    let t = &mut ctx.wf.tasks[i];
    t.iteration += 1;
    let iteration = t.iteration;
    t.output_data.insert("iteration".into(), iteration.into());
    let keep = t.input_data.get("keepLastN").and_then(Value::as_u64);
    let wt = t.workflow_task.clone();
    if let Some(keep) = keep.filter(|k| *k > 0) {
        let keep = u32::try_from(keep).unwrap_or(u32::MAX);
        forget_before(ctx, i, iteration.saturating_sub(keep.saturating_sub(1)));
    }
    if let Some(first) = wt.loop_over.first() {
        schedule(ctx, first);
    }
}

/// Drops the tasks (and their logs) and the outputs of the loop's iterations before `first`.
fn forget_before(ctx: &mut Ctx<'_>, i: usize, first: u32) {
    let dw = ctx.wf.tasks[i].clone();
    let refs = body_refs(&dw.workflow_task);
    let old = |t: &Task| {
        t.iteration > 0
            && t.iteration < first
            && refs.contains(t.workflow_task.task_reference_name.as_str())
    };
    let dropped: Vec<String> = ctx
        .wf
        .tasks
        .iter()
        .filter(|t| old(t))
        .map(|t| t.task_id.as_str().to_owned())
        .collect();
    ctx.wf.tasks.retain(|t| !old(t));
    for id in &dropped {
        ctx.logs.remove(id);
    }
    let dw_at = ctx.wf.tasks.iter().position(|t| t.task_id == dw.task_id);
    if let Some(at) = dw_at {
        let output = &mut ctx.wf.tasks[at].output_data;
        output.retain(|k, _| k.parse::<u32>().map_or(true, |n| n >= first));
    }
}
