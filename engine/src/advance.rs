//! The advance loop (Conductor's DeciderService.decide): act on every task that became terminal and
//! was not yet acted on — schedule what follows a success, retry a failure or end the workflow —,
//! evaluate open JOINs, and finish the workflow when nothing is left. It runs only while the workflow
//! is RUNNING, so a PAUSED workflow records results but schedules nothing until resumed.

use super::nav::{self, Next};
use super::schedule::{self, new_task, push, retries_allowed, secs_ms, task_def};
use super::state::Ctx;
use proto::limits::WORKFLOW_TASKS_MAX;
use proto::model::{task_type, Json, RetryLogic, TaskDef, TaskStatus, WorkflowStatus};
use rand::Rng as _;

/// Schedules the first task of the definition and runs the loop (used by start, restart, rerun).
pub(crate) fn begin(ctx: &mut Ctx<'_>) {
    if ctx.wf.workflow_definition.dsl.is_some() {
        return crate::dsl::run::begin(ctx);
    }
    if let Some(first) = ctx.wf.workflow_definition.tasks.first().cloned() {
        schedule::schedule(ctx, &first);
    }
    advance(ctx);
}

/// Runs the loop until nothing more happens.
pub(crate) fn advance(ctx: &mut Ctx<'_>) {
    if ctx.wf.status != WorkflowStatus::Running {
        return;
    }
    if ctx.wf.workflow_definition.dsl.is_some() {
        return crate::dsl::run::advance(ctx);
    }
    let def = ctx.wf.workflow_definition.clone();
    let def = &def.tasks;
    // Every round acts on at least one task or stops; the bound only guards against a bug.
    for _ in 0..=WORKFLOW_TASKS_MAX {
        let mut progressed = false;
        let mut i = 0;
        while i < ctx.wf.tasks.len() {
            if ctx.wf.status != WorkflowStatus::Running {
                return;
            }
            let t = &ctx.wf.tasks[i];
            if t.status.is_terminal() && !t.executed && !t.retried {
                progressed = true;
                if t.status.is_successful() {
                    ctx.wf.tasks[i].executed = true;
                    ctx.changed = true;
                    schedule_next(ctx, def, i);
                } else {
                    on_failure(ctx, def, i);
                }
            }
            i += 1;
        }
        if ctx.wf.status != WorkflowStatus::Running {
            return;
        }
        if ctx.wf.tasks.len() > WORKFLOW_TASKS_MAX {
            let reason = format!("the workflow created more than {WORKFLOW_TASKS_MAX} tasks");
            ctx.end(WorkflowStatus::Failed, Some(reason), None, true);
            return;
        }
        progressed |= schedule::start_loops(ctx);
        progressed |= evaluate_joins(ctx);
        if !progressed {
            break;
        }
    }
    check_completion(ctx);
}

/// Schedules what follows task `i`. Scheduling is idempotent per reference, so this may also be
/// used to re-derive successors after a rerun dropped tasks: a FORK re-offers its branches and JOIN,
/// a SWITCH its chosen case.
pub(crate) fn schedule_next(ctx: &mut Ctx<'_>, def: &[proto::model::WorkflowTask], i: usize) {
    let t = &ctx.wf.tasks[i];
    let wt = t.workflow_task.clone();
    // The definition's reference: a task in a loop carries its iteration's suffix.
    let reference = wt.task_reference_name.clone();
    match wt.task_type.as_str() {
        task_type::FORK_JOIN => {
            for branch in &wt.fork_tasks {
                if let Some(first) = branch.first() {
                    schedule::schedule(ctx, first);
                }
            }
        }
        task_type::FORK_JOIN_DYNAMIC => {
            let forked = t.input_data.get("forkedTaskDefs").cloned();
            let branches: Vec<proto::model::WorkflowTask> = forked
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default();
            for branch in &branches {
                schedule::schedule(ctx, branch);
            }
        }
        task_type::SWITCH | task_type::DECISION => {
            let case = t
                .output_data
                .get("evaluationResult")
                .and_then(|v| v.get(0))
                .and_then(|v| v.as_str());
            let chosen = case
                .and_then(|c| wt.decision_cases.get(c))
                .unwrap_or(&wt.default_case);
            if let Some(first) = chosen.first() {
                schedule::schedule(ctx, first);
                return;
            }
        }
        _ => {}
    }
    if let Some(Next::Task(next)) = nav::next_after(def, &reference) {
        schedule::schedule(ctx, next);
    }
}

/// The workflow status a task's final failure leads to (Conductor's DeciderService.retry).
fn failure_status(task_status: TaskStatus) -> WorkflowStatus {
    match task_status {
        TaskStatus::Canceled => WorkflowStatus::Terminated,
        TaskStatus::TimedOut => WorkflowStatus::TimedOut,
        _ => WorkflowStatus::Failed,
    }
}

pub(crate) fn failure_reason(ctx: &Ctx<'_>, i: usize, status: WorkflowStatus) -> String {
    let t = &ctx.wf.tasks[i];
    format!(
        "Task {} failed with status: {} and reason: '{}'",
        t.task_id,
        status.as_str(),
        t.reason_for_incompletion.as_deref().unwrap_or("null")
    )
}

/// A task ended unsuccessfully: retry it, let it pass (optional, permissive) or end the workflow.
fn on_failure(ctx: &mut Ctx<'_>, def: &[proto::model::WorkflowTask], i: usize) {
    let t = &ctx.wf.tasks[i];
    let wt = t.workflow_task.clone();
    let status = t.status;
    if status != TaskStatus::Canceled {
        let (r, n) = (t.reference_task_name.clone(), t.task_def_name.clone());
        ctx.note_failure(&r, &n);
    }
    let allowed = if nav::is_worker_type(&wt.task_type) {
        retries_allowed(&wt)
    } else {
        system_retries(&wt)
    };
    if status.is_retriable() && ctx.wf.tasks[i].retry_count < allowed {
        retry(ctx, i);
        return;
    }
    ctx.changed = true;
    if wt.optional {
        // Successful-terminal now: the next round schedules what follows.
        ctx.wf.tasks[i].status = TaskStatus::CompletedWithErrors;
        return;
    }
    ctx.wf.tasks[i].executed = true;
    if wt.permissive {
        schedule_next(ctx, def, i);
        return;
    }
    let wf_status = failure_status(status);
    let reason = failure_reason(ctx, i, wf_status);
    let id = ctx.wf.tasks[i].task_id.clone();
    ctx.end(wf_status, Some(reason), Some(&id), true);
}

/// How many retries a system task allows: an HTTP or SUB_WORKFLOW task's, per its `retryCount`
/// or its registered task definition's (none without one, as in Conductor); others none.
fn system_retries(wt: &proto::model::WorkflowTask) -> u32 {
    if wt.task_type != task_type::HTTP && wt.task_type != task_type::SUB_WORKFLOW {
        return 0;
    }
    let registered = wt.task_definition.as_ref().map(|d| d.retry_count);
    wt.retry_count.or(registered).unwrap_or(0)
}

/// The delay before retry number `retry_count + 1`, in seconds, before jitter.
pub(crate) fn retry_delay_s(def: &TaskDef, retry_count: u32) -> u64 {
    let d = def.retry_delay_seconds;
    let delay = match def.retry_logic {
        RetryLogic::Fixed => d,
        RetryLogic::LinearBackoff => d
            .saturating_mul(u64::from(def.backoff_scale_factor))
            .saturating_mul(u64::from(retry_count) + 1),
        RetryLogic::ExponentialBackoff => d.saturating_mul(2u64.saturating_pow(retry_count)),
    };
    if def.max_retry_delay_seconds > 0 {
        delay.min(def.max_retry_delay_seconds)
    } else {
        delay
    }
}

/// Schedules the next attempt of task `i` after its backoff (plus jitter from the seeded rng).
pub(crate) fn retry(ctx: &mut Ctx<'_>, i: usize) {
    let old = ctx.wf.tasks[i].clone();
    let def = task_def(&old.workflow_task);
    let delay_s = retry_delay_s(&def, old.retry_count);
    let jitter_ms = if def.backoff_jitter_ms > 0 {
        ctx.rng.gen_range(0..=def.backoff_jitter_ms)
    } else {
        0
    };
    let mut t = new_task(
        ctx,
        &old.workflow_task,
        old.retry_count.saturating_add(1),
        Some(old.input_data.clone()),
    );
    t.scheduled_time = ctx
        .now
        .saturating_add(secs_ms(delay_s))
        .saturating_add(i64::try_from(jitter_ms).unwrap_or(i64::MAX));
    t.start_delay_in_seconds = delay_s;
    schedule::own_id_in_input(&mut t, &old.task_id);
    t.retried_task_id = Some(old.task_id.clone());
    t.reference_task_name = old.reference_task_name.clone();
    t.iteration = old.iteration;
    t.first_scheduled_time = old.first_scheduled_time;
    t.domain = old.domain.clone();
    ctx.wf.tasks[i].retried = true;
    ctx.wf.tasks[i].executed = true;
    push(ctx, t);
}

/// Completes or fails every open JOIN whose `joinOn` tasks are all final. Returns true if any moved.
fn evaluate_joins(ctx: &mut Ctx<'_>) -> bool {
    let mut moved = false;
    for i in 0..ctx.wf.tasks.len() {
        let j = &ctx.wf.tasks[i];
        if j.task_type == task_type::EXCLUSIVE_JOIN && j.status == TaskStatus::InProgress {
            moved |= evaluate_exclusive_join(ctx, i);
            continue;
        }
        if j.task_type != task_type::JOIN || j.status != TaskStatus::InProgress {
            continue;
        }
        let mut output = Json::new();
        let mut reasons = Vec::new();
        let mut done = true;
        // The simulator's deliberate bug: any one ended joinOn task completes the join.
        let first_branch = crate::mutation::active(crate::mutation::Mutation::JoinOnFirstBranch);
        for r in &j.workflow_task.join_on {
            match ctx.wf.task_by_ref(r) {
                Some(t) if t.status.is_terminal() && t.executed && !t.retried => {
                    if !t.status.is_successful() {
                        reasons.push(format!(
                            "{} {}: {}",
                            r,
                            t.status.as_str(),
                            t.reason_for_incompletion.as_deref().unwrap_or("")
                        ));
                    }
                    output.insert(r.clone(), serde_json::Value::Object(t.output_data.clone()));
                }
                _ if first_branch => {}
                _ => {
                    done = false;
                    break;
                }
            }
        }
        if !done || (first_branch && output.is_empty()) {
            continue;
        }
        let with_errors = j.workflow_task.join_on.iter().any(|r| {
            ctx.wf
                .task_by_ref(r)
                .is_some_and(|t| t.status == TaskStatus::CompletedWithErrors)
        });
        let now = ctx.now;
        let j = &mut ctx.wf.tasks[i];
        j.output_data = output;
        j.end_time = now;
        j.update_time = now;
        if reasons.is_empty() && with_errors {
            // An optional branch failed for good: the join, like it, completes with errors.
            j.status = TaskStatus::CompletedWithErrors;
        } else if reasons.is_empty() {
            j.status = TaskStatus::Completed;
        } else {
            j.status = TaskStatus::Failed;
            j.reason_for_incompletion = Some(reasons.join("; "));
        }
        ctx.changed = true;
        moved = true;
    }
    moved
}

/// EXCLUSIVE_JOIN (after a SWITCH/DECISION, one of whose cases ran): takes the outcome and
/// output of the first of `joinOn` that ran (or, when none did, of `defaultExclusiveJoinTask`),
/// once that task is final. Returns true if it moved.
fn evaluate_exclusive_join(ctx: &mut Ctx<'_>, i: usize) -> bool {
    let wt = &ctx.wf.tasks[i].workflow_task;
    let ran = |refs: &[String]| {
        refs.iter()
            .filter_map(|r| ctx.wf.task_by_ref(r))
            .find(|t| t.status != TaskStatus::Skipped)
    };
    let Some(t) = ran(&wt.join_on).or_else(|| ran(&wt.default_exclusive_join_task)) else {
        return false;
    };
    if !(t.status.is_terminal() && t.executed && !t.retried) {
        return false;
    }
    let (status, output) = (t.status, t.output_data.clone());
    let reason = (!status.is_successful()).then(|| {
        format!(
            "{} {}: {}",
            t.reference_task_name,
            status.as_str(),
            t.reason_for_incompletion.as_deref().unwrap_or("")
        )
    });
    let now = ctx.now;
    let j = &mut ctx.wf.tasks[i];
    j.output_data = output;
    j.end_time = now;
    j.update_time = now;
    j.status = if reason.is_some() {
        TaskStatus::Failed
    } else {
        TaskStatus::Completed
    };
    j.reason_for_incompletion = reason;
    ctx.changed = true;
    true
}

/// Ends the workflow when every task is final: FAILED if a permissive task failed, else COMPLETED.
fn check_completion(ctx: &mut Ctx<'_>) {
    if ctx.wf.status != WorkflowStatus::Running || ctx.wf.tasks.is_empty() {
        return;
    }
    if ctx
        .wf
        .tasks
        .iter()
        .any(|t| !t.status.is_terminal() || (!t.executed && !t.retried))
    {
        return;
    }
    let permissive = ctx
        .wf
        .tasks
        .iter()
        .position(|t| !t.status.is_successful() && !t.retried && t.workflow_task.permissive);
    match permissive {
        Some(i) => {
            let reason = failure_reason(ctx, i, WorkflowStatus::Failed);
            let id = ctx.wf.tasks[i].task_id.clone();
            ctx.end(WorkflowStatus::Failed, Some(reason), Some(&id), true);
        }
        None => ctx.end(WorkflowStatus::Completed, None, None, true),
    }
}
