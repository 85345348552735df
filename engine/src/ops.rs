//! User operations on a workflow instance: pause, resume, terminate, retry, restart, rerun and skip
//! a task. Each checks the workflow's state first and refuses (Conflict) with Conductor-like wording,
//! changing nothing, when the operation does not apply.

use super::advance::{advance, begin};
use super::nav;
use super::schedule::{self, new_task};
use super::state::Ctx;
use super::*;
use proto::model::{task_type, TaskStatus, WorkflowStatus};

pub(crate) fn pause(ctx: &mut Ctx<'_>) -> Result<(), Error> {
    match ctx.wf.status {
        WorkflowStatus::Paused => Ok(()),
        WorkflowStatus::Running => {
            ctx.wf.status = WorkflowStatus::Paused;
            ctx.changed = true;
            let children = super::child::to_children(&ctx.wf, &Input::Pause);
            ctx.effects.extend(children);
            Ok(())
        }
        s => Err(Error::Conflict(format!(
            "The workflow {} has ended ({}), cannot pause",
            ctx.wf.workflow_id,
            s.as_str()
        ))),
    }
}

pub(crate) fn resume(ctx: &mut Ctx<'_>) -> Result<(), Error> {
    if ctx.wf.status != WorkflowStatus::Paused {
        return Err(Error::Conflict(format!(
            "The workflow {} is not PAUSED so cannot resume. Current status is {}",
            ctx.wf.workflow_id,
            ctx.wf.status.as_str()
        )));
    }
    ctx.wf.status = WorkflowStatus::Running;
    ctx.changed = true;
    let children = super::child::to_children(&ctx.wf, &Input::Resume);
    ctx.effects.extend(children);
    advance(ctx);
    Ok(())
}

pub(crate) fn terminate(ctx: &mut Ctx<'_>, reason: Option<String>) -> Result<(), Error> {
    match ctx.wf.status {
        WorkflowStatus::Completed => Err(Error::Conflict(
            "Cannot terminate a COMPLETED workflow.".into(),
        )),
        s if s.is_terminal() => Err(Error::Conflict(format!(
            "Workflow {} is already {}",
            ctx.wf.workflow_id,
            s.as_str()
        ))),
        _ => {
            ctx.end(WorkflowStatus::Terminated, reason, None, false);
            Ok(())
        }
    }
}

/// Merges outside variables into a running workflow's; `key` makes a repeat a no-op.
pub(crate) fn update_variables(
    ctx: &mut Ctx<'_>,
    variables: Json,
    append_array: bool,
    key: String,
) -> Result<(), Error> {
    if ctx.wf.status.is_terminal() {
        return Err(Error::Conflict(format!(
            "Workflow {} is {}; its variables cannot change",
            ctx.wf.workflow_id,
            ctx.wf.status.as_str()
        )));
    }
    if ctx.applied.contains(&key) {
        return Ok(());
    }
    for (k, v) in variables {
        match (append_array, ctx.wf.variables.get_mut(&k)) {
            (true, Some(serde_json::Value::Array(items))) => match v {
                serde_json::Value::Array(more) => items.extend(more),
                one => items.push(one),
            },
            _ => {
                ctx.wf.variables.insert(k, v);
            }
        }
    }
    ctx.applied.push(key);
    if ctx.applied.len() > proto::record::APPLIED_KEYS_MAX {
        ctx.applied.remove(0);
    }
    ctx.changed = true;
    Ok(())
}

fn require_ended(ctx: &Ctx<'_>) -> Result<(), Error> {
    if ctx.wf.status.is_terminal() {
        Ok(())
    } else {
        Err(Error::Conflict(format!(
            "Workflow is still running.  status={}",
            ctx.wf.status.as_str()
        )))
    }
}

/// Back to RUNNING after an end: clears the end's bookkeeping.
fn reopen(ctx: &mut Ctx<'_>) {
    ctx.wf.status = WorkflowStatus::Running;
    ctx.wf.end_time = 0;
    ctx.wf.reason_for_incompletion = None;
    ctx.wf.failed_task_id = None;
    ctx.wf.output = Json::new();
    ctx.changed = true;
}

/// Retries the failed, timed-out or canceled latest attempts of a FAILED/TIMED_OUT/TERMINATED
/// workflow. With `resume` (`resumeSubworkflowTasks`), such a SUB_WORKFLOW task whose child
/// started goes back IN_PROGRESS waiting for that child, which is retried in its turn
/// ([`resume_child`]), instead of a new attempt with a new child.
pub(crate) fn retry(ctx: &mut Ctx<'_>, resume: bool) -> Result<(), Error> {
    require_ended(ctx)?;
    if ctx.wf.status == WorkflowStatus::Completed {
        return Err(Error::Conflict(format!(
            "Workflow {} is COMPLETED; only FAILED, TIMED_OUT or TERMINATED workflows can be retried",
            ctx.wf.workflow_id
        )));
    }
    let failed: Vec<usize> = (0..ctx.wf.tasks.len())
        .filter(|&i| {
            let t = &ctx.wf.tasks[i];
            !t.retried
                && matches!(
                    t.status,
                    TaskStatus::Failed
                        | TaskStatus::FailedWithTerminalError
                        | TaskStatus::TimedOut
                        | TaskStatus::Canceled
                )
        })
        .collect();
    if failed.is_empty() {
        return Err(Error::Conflict(
            "There are no failed tasks! Use restart if you want to attempt entire workflow execution again.".into(),
        ));
    }
    reopen(ctx);
    ctx.wf.last_retried_time = ctx.now;
    for i in failed {
        if resume && resume_child(ctx, i) {
            continue;
        }
        let ty = &ctx.wf.tasks[i].workflow_task.task_type;
        // A SUB_WORKFLOW's retry is a new attempt with a new child.
        if nav::is_worker_type(ty) || ty == task_type::SUB_WORKFLOW {
            retry_attempt(ctx, i);
        } else {
            reopen_task(ctx, i);
        }
    }
    advance(ctx);
    Ok(())
}

/// A new attempt of failed task `i`.
fn retry_attempt(ctx: &mut Ctx<'_>, i: usize) {
    let old = ctx.wf.tasks[i].clone();
    let mut t = new_task(
        ctx,
        &old.workflow_task,
        old.retry_count.saturating_add(1),
        Some(old.input_data),
    );
    schedule::own_id_in_input(&mut t, &old.task_id);
    t.retried_task_id = Some(old.task_id);
    t.reference_task_name = old.reference_task_name;
    t.iteration = old.iteration;
    t.first_scheduled_time = ctx.now;
    ctx.wf.tasks[i].retried = true;
    ctx.wf.tasks[i].executed = true;
    schedule::push(ctx, t);
}

/// JOIN, WAIT, HUMAN: re-opened in place; a task whose work failed waits for it again.
fn reopen_task(ctx: &mut Ctx<'_>, i: usize) {
    let now = ctx.now;
    let work = super::work::is_work_type(&ctx.wf.tasks[i].workflow_task);
    let t = &mut ctx.wf.tasks[i];
    t.status = if work {
        TaskStatus::Scheduled
    } else {
        TaskStatus::InProgress
    };
    t.poll_count = 0;
    t.end_time = 0;
    t.update_time = now;
    t.executed = false;
    t.reason_for_incompletion = None;
}

/// Starts over from the first task, optionally with a new definition.
pub(crate) fn restart(ctx: &mut Ctx<'_>, def: Option<WorkflowDef>) -> Result<(), Error> {
    require_ended(ctx)?;
    let current = &ctx.wf.workflow_definition;
    if ctx.wf.status == WorkflowStatus::Completed && !current.restartable {
        return Err(Error::Conflict(format!(
            "WorkflowId: {} is an instance of WorkflowDef: {} and version: {} and is non restartable",
            ctx.wf.workflow_id, current.name, current.version
        )));
    }
    if let Some(def) = def {
        super::validate_workflow_def(&def)?;
        ctx.wf.workflow_name = def.name.clone();
        ctx.wf.workflow_version = def.version;
        ctx.wf.workflow_definition = def.into();
    }
    start_over(ctx);
    Ok(())
}

fn start_over(ctx: &mut Ctx<'_>) {
    reopen(ctx);
    ctx.wf.tasks.clear();
    ctx.logs.clear();
    ctx.wf.failed_reference_task_names.clear();
    ctx.wf.failed_task_names.clear();
    ctx.wf.variables = ctx.wf.workflow_definition.variables.clone();
    ctx.wf.start_time = ctx.now;
    ctx.wf.last_retried_time = 0;
    begin(ctx);
}

/// Reruns from a task (dropping the tasks after it) or from the start with new input.
pub(crate) fn rerun(ctx: &mut Ctx<'_>, req: RerunWorkflowRequest) -> Result<(), Error> {
    if let Some(from) = &req.re_run_from_workflow_id {
        if from != ctx.wf.workflow_id.as_str() {
            return Err(Error::Invalid(format!(
                "reRunFromWorkflowId {from} does not name workflow {}",
                ctx.wf.workflow_id
            )));
        }
    }
    require_ended(ctx)?;
    if let Some(c) = req.correlation_id {
        ctx.wf.correlation_id = Some(c);
    }
    let Some(task_id) = req.re_run_from_task_id else {
        if let Some(input) = req.workflow_input {
            ctx.wf.input = input;
        }
        start_over(ctx);
        return Ok(());
    };
    let i = TaskId::parse(&task_id)
        .ok()
        .and_then(|id| ctx.index_of(&id))
        .ok_or_else(|| {
            Error::NotFound(format!(
                "Task {task_id} not found in workflow {}",
                ctx.wf.workflow_id
            ))
        })?;
    if let Some(input) = req.workflow_input {
        ctx.wf.input = input;
    }
    let old = ctx.wf.tasks[i].clone();
    let dropped = drop_tasks_from(ctx, i);
    reopen(ctx);
    reopen_kept_tasks(ctx, &dropped);
    if nav::is_worker_type(&old.workflow_task.task_type) {
        let input = req.task_input.unwrap_or(old.input_data);
        let t = new_task(ctx, &old.workflow_task, old.retry_count, Some(input));
        schedule::push(ctx, t);
    } else {
        // A system task is re-created by scheduling its definition again.
        schedule::schedule(ctx, &old.workflow_task);
    }
    advance(ctx);
    Ok(())
}

/// Removes the task at `i` and every task after it, with their logs; returns their references.
fn drop_tasks_from(ctx: &mut Ctx<'_>, i: usize) -> Vec<String> {
    let dropped: Vec<String> = ctx.wf.tasks[i..]
        .iter()
        .map(|t| t.reference_task_name.clone())
        .collect();
    ctx.wf.tasks.truncate(i);
    for id in ctx.logs.keys().cloned().collect::<Vec<_>>() {
        if ctx.wf.tasks.iter().all(|t| t.task_id.as_str() != id) {
            ctx.logs.remove(&id);
        }
    }
    dropped
}

/// Re-derives the successors of the tasks kept by a rerun: JOINs waiting on a `dropped` task open
/// again and canceled tasks are pending again.
fn reopen_kept_tasks(ctx: &mut Ctx<'_>, dropped: &[String]) {
    let now = ctx.now;
    for t in ctx.wf.tasks.iter_mut() {
        if t.task_type == task_type::JOIN
            && t.workflow_task.join_on.iter().any(|r| dropped.contains(r))
        {
            t.status = TaskStatus::InProgress;
            t.end_time = 0;
            t.update_time = now;
            t.output_data = Json::new();
            t.reason_for_incompletion = None;
        }
        if t.status.is_terminal() && t.status.is_successful() && t.task_type != "FORK" {
            t.executed = false;
        }
        if t.status == TaskStatus::Canceled {
            let worker = nav::is_worker_type(&t.workflow_task.task_type);
            t.status = if worker {
                TaskStatus::Scheduled
            } else {
                TaskStatus::InProgress
            };
            t.scheduled_time = now;
            t.update_time = now;
            t.end_time = 0;
            t.executed = false;
        }
    }
}

/// Skips the task with `reference`: a pending one becomes SKIPPED now; one not reached yet is
/// recorded SKIPPED and passed over when the workflow gets there.
pub(crate) fn skip(ctx: &mut Ctx<'_>, reference: &str, req: SkipTaskRequest) -> Result<(), Error> {
    if ctx.wf.status != WorkflowStatus::Running {
        return Err(Error::Conflict(format!(
            "The workflow {} is not running so the task referenced by {} cannot be skipped",
            ctx.wf.workflow_id, reference
        )));
    }
    let now = ctx.now;
    let existing = ctx
        .wf
        .tasks
        .iter()
        .rposition(|t| t.reference_task_name == reference);
    let i = match existing {
        Some(i) if ctx.wf.tasks[i].status.is_terminal() => {
            return Err(Error::Conflict(format!(
                "The task referenced by {reference} is already {}; it cannot be skipped",
                ctx.wf.tasks[i].status.as_str()
            )));
        }
        Some(i) => i,
        None => {
            let wt = nav::find(&ctx.wf.workflow_definition.tasks, reference)
                .cloned()
                .ok_or_else(|| {
                    Error::NotFound(format!(
                    "The task referenced by {reference} does not exist in workflow definition {}",
                    ctx.wf.workflow_name
                ))
                })?;
            let mut t = new_task(ctx, &wt, 0, Some(Json::new()));
            // Passed over (released by `schedule`) when the workflow reaches it.
            t.executed = true;
            schedule::push(ctx, t)
        }
    };
    let t = &mut ctx.wf.tasks[i];
    t.status = TaskStatus::Skipped;
    t.end_time = now;
    t.update_time = now;
    if let Some(input) = req.task_input {
        t.input_data = input;
    }
    t.output_data = req.task_output.unwrap_or_default();
    ctx.changed = true;
    advance(ctx);
    Ok(())
}

/// A retry with `resumeSubworkflowTasks` on task `i`: a SUB_WORKFLOW task whose child started
/// goes back IN_PROGRESS, waiting for that child once it is retried. `false` when the task is
/// not one (it is then retried as without the flag).
fn resume_child(ctx: &mut Ctx<'_>, i: usize) -> bool {
    let t = &ctx.wf.tasks[i];
    let child = t.sub_workflow_id.as_deref().map(WorkflowId::parse);
    if t.workflow_task.task_type != task_type::SUB_WORKFLOW || !matches!(child, Some(Ok(_))) {
        return false;
    }
    let now = ctx.now;
    let t = &mut ctx.wf.tasks[i];
    t.status = TaskStatus::InProgress;
    t.subworkflow_changed = true;
    t.poll_count = 0;
    t.end_time = 0;
    t.update_time = now;
    t.executed = false;
    t.reason_for_incompletion = None;
    ctx.changed = true;
    true
}
