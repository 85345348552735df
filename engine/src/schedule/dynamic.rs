//! Tasks whose shape the workflow's data decides when they are reached: DYNAMIC (one task whose
//! name is an input value) and FORK_JOIN_DYNAMIC (branches listed in an input value, joined by
//! the JOIN that follows, whose `joinOn` is filled with the branches' references).
//!
//! A dynamic task's definition is the one inlined in it, else the one registered under its name
//! (the runtime's [`Catalog`](crate::Catalog)), else the one a task of the same name in the
//! workflow's definition carries, else Conductor's defaults.

use super::{complete_now, push, schedule, schedule_with};
use crate::nav::{self, Next, SYSTEM_TYPES};
use crate::state::Ctx;
use proto::model::{task_type, Json, Task, TaskDef, TaskStatus, WorkflowStatus, WorkflowTask};
use serde_json::Value;
use std::collections::BTreeSet;

/// Conductor's reason when a FORK_JOIN_DYNAMIC is not followed by a JOIN.
const DYNAMIC_FORK_WITHOUT_JOIN: &str =
    "Dynamic join definition is not followed by a join task.  Check the workflow definition.";

/// Task types a dynamic fork may fork: those that need no place in the definition to know what
/// follows them.
fn forkable(ty: &str) -> bool {
    let container = [
        task_type::FORK_JOIN,
        task_type::FORK_JOIN_DYNAMIC,
        task_type::JOIN,
        task_type::EXCLUSIVE_JOIN,
        task_type::SWITCH,
        task_type::DECISION,
        task_type::DO_WHILE,
    ];
    nav::is_known_type(ty) && !container.contains(&ty)
}

/// Fails `task` terminally with `reason` (the advance loop then fails the workflow, unless the
/// task is optional).
fn fail(ctx: &mut Ctx<'_>, mut task: Task, reason: String) {
    task.status = TaskStatus::FailedWithTerminalError;
    task.start_time = ctx.now;
    task.end_time = ctx.now;
    task.reason_for_incompletion = Some(reason);
    push(ctx, task);
}

/// The definition a dynamic task of `name` runs under (see the module's doc).
fn def_named(ctx: &Ctx<'_>, wt: &WorkflowTask, name: &str) -> Option<TaskDef> {
    let own = wt.task_definition.as_ref().filter(|d| d.name == name);
    let registered = || ctx.catalog.task_def(name);
    own.cloned().or_else(registered).or_else(|| {
        ctx.wf
            .workflow_definition
            .all_tasks()
            .into_iter()
            .filter(|t| t.name == name)
            .find_map(|t| t.task_definition.clone())
    })
}

/// `wt` as a task of `name`: a worker task unless `name` is a system task type.
fn as_named(ctx: &Ctx<'_>, wt: &WorkflowTask, name: &str) -> WorkflowTask {
    let mut r = wt.clone();
    r.task_definition = def_named(ctx, wt, name);
    r.name = name.to_owned();
    r.task_type = if SYSTEM_TYPES.contains(&name) && name != task_type::DYNAMIC {
        name.to_owned()
    } else {
        task_type::SIMPLE.to_owned()
    };
    r
}

/// DYNAMIC: schedules the task its `dynamicTaskNameParam` input names, under the DYNAMIC task's
/// reference; without a name there, the task fails.
pub(crate) fn schedule_dynamic(ctx: &mut Ctx<'_>, wt: &WorkflowTask, task: Task) {
    let param = wt.dynamic_task_name_param.as_deref().unwrap_or_default();
    let name = match task.input_data.get(param) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
        _ => {
            let input = Value::Object(task.input_data.clone());
            let reason = format!("Cannot map a dynamic task based on the parameter and input. Parameter= {param}, input= {input}");
            return fail(ctx, task, reason);
        }
    };
    let named = as_named(ctx, wt, &name);
    schedule_with(ctx, &named, Some(task.input_data));
}

/// One branch of a dynamic fork: its task and the input it gets on top of its own parameters.
type Branch = (WorkflowTask, Json);

/// FORK_JOIN_DYNAMIC: completes at once (as a FORK listing `forkedTasks`), schedules every
/// branch and the JOIN after it with `joinOn` set to the branches. Branches that cannot be read
/// from the input fail the task with the reason; a fork without a JOIN after it fails the
/// workflow.
pub(crate) fn schedule_fork(ctx: &mut Ctx<'_>, wt: &WorkflowTask, mut fork: Task) {
    let def = ctx.wf.workflow_definition.clone();
    let Some(Next::Task(join)) = nav::next_after(&def.tasks, &wt.task_reference_name) else {
        return fork_without_join(ctx, fork);
    };
    if join.task_type != task_type::JOIN {
        return fork_without_join(ctx, fork);
    }
    let branches = match branches(wt, &fork.input_data).and_then(|b| check_refs(ctx, b)) {
        Ok(b) => b,
        Err(reason) => return fail(ctx, fork, reason),
    };
    let refs: Vec<String> = branches
        .iter()
        .map(|(t, _)| t.task_reference_name.clone())
        .collect();
    let defs: Vec<&WorkflowTask> = branches.iter().map(|(t, _)| t).collect();
    fork.task_type = "FORK".into();
    fork.task_def_name = "FORK".into();
    fork.input_data
        .insert("forkedTasks".into(), refs.clone().into());
    fork.input_data.insert(
        "forkedTaskDefs".into(),
        serde_json::to_value(defs).unwrap_or_default(),
    );
    complete_now(ctx.now, &mut fork, Json::new());
    fork.executed = true;
    push(ctx, fork);
    for (mut branch, input) in branches {
        if branch.task_definition.is_none() {
            branch.task_definition = def_named(ctx, &branch, &branch.name.clone());
        }
        schedule_with(ctx, &branch, Some(input));
    }
    let mut join = join.clone();
    join.join_on = refs;
    schedule(ctx, &join);
}

fn fork_without_join(ctx: &mut Ctx<'_>, mut fork: Task) {
    complete_now(ctx.now, &mut fork, Json::new());
    fork.executed = true;
    let idx = push(ctx, fork);
    let id = ctx.wf.tasks[idx].task_id.clone();
    let reason = Some(DYNAMIC_FORK_WITHOUT_JOIN.to_owned());
    ctx.end(WorkflowStatus::Failed, reason, Some(&id), true);
}

/// The branches a dynamic fork's input lists, in any of Conductor's three forms.
fn branches(wt: &WorkflowTask, input: &Json) -> Result<Vec<Branch>, String> {
    if let Some(Value::Array(items)) = input.get("forkTaskInputs") {
        return simple_form(wt, input, items);
    }
    if let Some(param) = &wt.dynamic_fork_tasks_param {
        return tasks_form(wt, input, param);
    }
    if let Some(param) = &wt.dynamic_fork_join_tasks_param {
        return legacy_form(input, param);
    }
    Err(format!(
        "FORK_JOIN_DYNAMIC task '{}' has neither forkTaskInputs nor dynamicForkTasksParam in its input",
        wt.task_reference_name
    ))
}

/// `forkTaskName` (or `forkTaskType`) and a list `forkTaskInputs`: one task per input, named
/// `_{name}_{i}`, with `__index` = i.
fn simple_form(wt: &WorkflowTask, input: &Json, items: &[Value]) -> Result<Vec<Branch>, String> {
    let text = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_owned);
    if text("forkTaskWorkflow").is_some() {
        return Err("forkTaskWorkflow (a sub-workflow per branch) is not supported yet".into());
    }
    let ty = text("forkTaskType").unwrap_or_else(|| task_type::SIMPLE.into());
    let name = text("forkTaskName")
        .or_else(|| (ty != task_type::SIMPLE).then(|| ty.clone()))
        .unwrap_or_else(|| wt.task_reference_name.clone());
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut params = match item {
            Value::Object(m) => m.clone(),
            other => Json::from_iter([("input".to_owned(), other.clone())]),
        };
        params.insert("__index".into(), i.into());
        let task = WorkflowTask {
            name: name.clone(),
            task_reference_name: format!("_{name}_{i}"),
            task_type: ty.clone(),
            optional: wt.optional,
            ..Default::default()
        };
        out.push((task, params));
    }
    Ok(out)
}

/// `dynamicForkTasksParam` names a list of workflow tasks, `dynamicForkTasksInputParamName` a
/// map from their references to their inputs.
fn tasks_form(wt: &WorkflowTask, input: &Json, param: &str) -> Result<Vec<Branch>, String> {
    let listed = input.get(param).cloned().unwrap_or(Value::Null);
    let tasks: Vec<WorkflowTask> = match &listed {
        Value::Array(_) => serde_json::from_value(listed.clone()).ok(),
        _ => None,
    }
    .ok_or_else(|| {
        format!("Input '{param}' is invalid. Cannot deserialize a list of Workflow Tasks from '{listed}'")
    })?;
    let inputs_param = wt
        .dynamic_fork_tasks_input_param_name
        .as_deref()
        .unwrap_or_default();
    let inputs = match input.get(inputs_param) {
        Some(Value::Object(m)) => m,
        other => {
            let found = other.cloned().unwrap_or(Value::Null);
            return Err(format!("Input to the dynamically forked tasks is not a map -> expecting a map of K,V  but found {found}"));
        }
    };
    Ok(tasks
        .into_iter()
        .map(|t| {
            let own = inputs
                .get(&t.task_reference_name)
                .and_then(Value::as_object);
            let own = own.cloned().unwrap_or_default();
            (t, own)
        })
        .collect())
}

/// Conductor's oldest form: `{"dynamicTasks": [{taskName, taskReferenceName, type, input}]}`.
fn legacy_form(input: &Json, param: &str) -> Result<Vec<Branch>, String> {
    let listed = input.get(param).and_then(|v| v.get("dynamicTasks"));
    let Some(Value::Array(items)) = listed else {
        return Err(format!("Dynamic tasks could not be created. The value of {param} from task's input has no dynamic tasks to be scheduled"));
    };
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let reference = text(item, "taskReferenceName").or_else(|| text(item, "referenceName"));
        let task = WorkflowTask {
            name: text(item, "taskName").unwrap_or_default(),
            task_reference_name: reference.unwrap_or_default(),
            task_type: text(item, "type").unwrap_or_else(|| task_type::SIMPLE.into()),
            ..Default::default()
        };
        let own = item.get("input").and_then(Value::as_object).cloned();
        out.push((task, own.unwrap_or_default()));
    }
    Ok(out)
}

/// Every branch has a name, a type a fork may fork, and a reference that no other branch, task
/// of the workflow or task of its definition uses.
fn check_refs(ctx: &Ctx<'_>, branches: Vec<Branch>) -> Result<Vec<Branch>, String> {
    let def = &ctx.wf.workflow_definition;
    let mut taken: BTreeSet<&str> = def
        .all_tasks()
        .into_iter()
        .map(|t| t.task_reference_name.as_str())
        .collect();
    taken.extend(ctx.wf.tasks.iter().map(|t| t.reference_task_name.as_str()));
    let mut seen = BTreeSet::new();
    for (t, _) in &branches {
        let r = t.task_reference_name.as_str();
        if r.trim().is_empty() || t.name.trim().is_empty() {
            return Err("One of the tasks had a null/missing taskReferenceName or name".into());
        }
        if !forkable(&t.task_type) {
            return Err(format!(
                "dynamic fork task '{r}' has type '{}', which a dynamic fork cannot fork",
                t.task_type
            ));
        }
        if taken.contains(r) || !seen.insert(r.to_owned()) {
            return Err(format!("No dynamic tasks could be created: attempted to create a duplicate task reference name: {r}"));
        }
    }
    Ok(branches)
}
