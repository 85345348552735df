//! Creating tasks: one attempt of a workflow task, with its input resolved, and the system tasks that
//! Baton runs at once when they are reached (FORK_JOIN, JOIN, SWITCH/DECISION, SET_VARIABLE,
//! TERMINATE, WAIT (see `wait`)). Worker tasks start SCHEDULED; what follows a task is the advance loop's business.

mod do_while;
mod dynamic;

pub(crate) use do_while::{body_done, condition_scope, loop_decided, start_loops};

use super::expr::{self, Scope};
use super::nav::{self, Next};
use super::state::Ctx;
use crate::NowMs;
use proto::model::{task_type, Json, Task, TaskDef, TaskStatus, WorkflowStatus, WorkflowTask};
use proto::version::TASK_RATE_LIMITS;
use proto::TaskId;
use serde_json::Value;

/// Conductor's reason when a FORK_JOIN is not followed by a JOIN.
pub(crate) const FORK_WITHOUT_JOIN: &str =
    "Fork task definition is not followed by a join task.  Check the blueprint";

/// The task definition in force for a workflow task (Conductor defaults when none is inlined).
pub(crate) fn task_def(wt: &WorkflowTask) -> TaskDef {
    wt.task_definition
        .clone()
        .unwrap_or_else(|| TaskDef::named(&wt.name))
}

/// How many retries a workflow task allows (`WorkflowTask.retryCount` overrides the definition's).
pub(crate) fn retries_allowed(wt: &WorkflowTask) -> u32 {
    wt.retry_count.unwrap_or_else(|| task_def(wt).retry_count)
}

/// A new attempt of `wt`, not yet added to the workflow. `input` None resolves `inputParameters`.
pub(crate) fn new_task(
    ctx: &mut Ctx<'_>,
    wt: &WorkflowTask,
    retry_count: u32,
    input: Option<Json>,
) -> Task {
    let task_id = ctx.new_task_id();
    let worker = nav::is_worker_type(&wt.task_type);
    let def = task_def(wt);
    let input_data = input.unwrap_or_else(|| {
        let scope = Scope {
            wf: &ctx.wf,
            task_id: Some(task_id.as_str()),
        };
        // The task definition's `inputTemplate` fills the keys the task's own inputParameters
        // leave out, and the whole is resolved (Conductor's `getTaskInputV2`).
        if def.input_template.is_empty() {
            return expr::resolve_map(&wt.input_parameters, &scope);
        }
        let mut params = def.input_template.clone();
        params.extend(wt.input_parameters.clone());
        expr::resolve_map(&params, &scope)
    });
    let (task_type, def_name) = if worker {
        (wt.name.clone(), wt.name.clone())
    } else if wt.task_type == task_type::FORK_JOIN {
        ("FORK".to_owned(), "FORK".to_owned())
    } else {
        (wt.task_type.clone(), wt.task_type.clone())
    };
    let domain = if worker {
        ctx.wf
            .task_to_domain
            .get(&wt.name)
            .or_else(|| ctx.wf.task_to_domain.get("*"))
            .cloned()
    } else {
        None
    };
    let rate = if worker && TASK_RATE_LIMITS.active(ctx.catalog.cluster_version()) {
        def.limits().and_then(|l| l.rate)
    } else {
        None
    };
    let delay_s = if worker { wt.start_delay } else { 0 };
    let scheduled = ctx.now.saturating_add(secs_ms(delay_s));
    Task {
        task_type,
        status: TaskStatus::Scheduled,
        input_data,
        reference_task_name: wt.task_reference_name.clone(),
        retry_count,
        seq: 0,
        correlation_id: ctx.wf.correlation_id.clone(),
        poll_count: 0,
        task_def_name: def_name,
        scheduled_time: scheduled,
        start_time: 0,
        end_time: 0,
        update_time: ctx.now,
        start_delay_in_seconds: delay_s,
        retried_task_id: None,
        retried: false,
        executed: false,
        callback_from_worker: true,
        response_timeout_seconds: if worker {
            def.response_timeout_seconds
        } else {
            0
        },
        workflow_instance_id: ctx.wf.workflow_id.clone(),
        workflow_type: ctx.wf.workflow_name.clone(),
        task_id,
        reason_for_incompletion: None,
        callback_after_seconds: 0,
        worker_id: None,
        output_data: Json::new(),
        workflow_task: wt.clone(),
        domain,
        workflow_priority: ctx.wf.priority,
        iteration: 0,
        sub_workflow_id: None,
        subworkflow_changed: false,
        first_scheduled_time: scheduled,
        wait_timeout: 0,
        rate_limit_per_frequency: rate.map(|r| r.count),
        rate_limit_frequency_in_seconds: rate.map(|r| r.window_s()),
    }
}

/// A retry copies its attempt's input; where that input held the attempt's own id (Conductor's
/// `${CPEWF_TASK_ID}`), the retry holds its own instead, as in Conductor.
pub(crate) fn own_id_in_input(retry: &mut Task, previous: &TaskId) {
    let own = Value::from(retry.task_id.as_str());
    for v in retry.input_data.values_mut() {
        if v.as_str() == Some(previous.as_str()) {
            *v = own.clone();
        }
    }
}

pub(crate) fn secs_ms(s: u64) -> i64 {
    i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// Appends a task, numbering it; returns its index.
pub(crate) fn push(ctx: &mut Ctx<'_>, mut task: Task) -> usize {
    task.seq = u32::try_from(ctx.wf.tasks.len() + 1).unwrap_or(u32::MAX);
    ctx.wf.tasks.push(task);
    ctx.changed = true;
    ctx.wf.tasks.len() - 1
}

pub(crate) fn complete_now(now: NowMs, task: &mut Task, output: Json) {
    task.status = TaskStatus::Completed;
    task.start_time = now;
    task.end_time = now;
    task.output_data = output;
}

/// The string a SWITCH/DECISION compares with its case names.
pub(crate) fn case_key(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Schedules `wt` (and, for a FORK, its branches and JOIN). Does nothing if the workflow ended or the
/// reference already has a task (a pre-skipped task is released so the loop moves past it).
pub(crate) fn schedule(ctx: &mut Ctx<'_>, wt: &WorkflowTask) {
    schedule_with(ctx, wt, None);
}

/// [`schedule`], with `extra` added to the task's resolved input (a dynamic fork's branch input,
/// a dynamic task's own input).
pub(crate) fn schedule_with(ctx: &mut Ctx<'_>, wt: &WorkflowTask, extra: Option<Json>) {
    if ctx.wf.status.is_terminal() {
        return;
    }
    let iteration = iteration_of(ctx, wt);
    let reference = nav::in_iteration(&wt.task_reference_name, iteration);
    if let Some(existing) = ctx
        .wf
        .tasks
        .iter_mut()
        .rev()
        .find(|t| t.reference_task_name == reference)
    {
        if existing.status == TaskStatus::Skipped && existing.executed {
            existing.executed = false;
            ctx.changed = true;
        }
        return;
    }
    let looped;
    let wt = if iteration > 0 {
        looped = in_loop(wt, iteration);
        &looped
    } else {
        wt
    };
    let mut task = new_task(ctx, wt, 0, None);
    task.reference_task_name = reference;
    task.iteration = iteration;
    task.input_data.extend(extra.unwrap_or_default());
    if let Some(reason) = input_violation(ctx, wt, &task) {
        fail_at_once(ctx, task, reason);
        return;
    }
    match wt.task_type.as_str() {
        task_type::DO_WHILE => do_while::schedule_loop(ctx, task),
        task_type::SUB_WORKFLOW => schedule_sub_workflow(ctx, wt, task),
        task_type::FORK_JOIN => schedule_fork(ctx, wt, task),
        task_type::FORK_JOIN_DYNAMIC => dynamic::schedule_fork(ctx, wt, task),
        task_type::DYNAMIC => dynamic::schedule_dynamic(ctx, wt, task),
        task_type::JOIN | task_type::EXCLUSIVE_JOIN => schedule_join(ctx, wt, task),
        task_type::HUMAN => schedule_human(ctx, task),
        task_type::INLINE => schedule_inline(ctx, task),
        task_type::SWITCH | task_type::DECISION if nav::is_scripted_switch(wt) => {
            push(ctx, task);
        }
        task_type::WAIT => schedule_wait(ctx, task),
        task_type::SWITCH | task_type::DECISION => schedule_switch(ctx, wt, task),
        task_type::SET_VARIABLE => set_variable_task(ctx, task),
        task_type::TERMINATE => terminate_task(ctx, task),
        _ => {
            push(ctx, task);
        }
    }
}

/// Why a task fails as it is scheduled: its input does not match the schema its task definition
/// enforces.
fn input_violation(ctx: &Ctx<'_>, wt: &WorkflowTask, task: &Task) -> Option<String> {
    let def = wt.task_definition.as_ref()?;
    let what = format!("input of task '{}'", task.reference_task_name);
    let side = crate::schema::Side::Input;
    crate::schema::violation(ctx.catalog, def, side, &what, &task.input_data)
}

/// Adds `task` FAILED_WITH_TERMINAL_ERROR with `reason`: the advance loop then fails the
/// workflow, unless the task is optional.
pub(crate) fn fail_at_once(ctx: &mut Ctx<'_>, mut task: Task, reason: String) {
    task.status = TaskStatus::FailedWithTerminalError;
    task.start_time = ctx.now;
    task.end_time = ctx.now;
    task.reason_for_incompletion = Some(reason);
    push(ctx, task);
}

/// The iteration of the loop `wt` runs in (0 outside loops).
fn iteration_of(ctx: &Ctx<'_>, wt: &WorkflowTask) -> u32 {
    let def = &ctx.wf.workflow_definition;
    nav::loop_of(&def.tasks, &wt.task_reference_name)
        .and_then(|dw| ctx.wf.task_by_ref(&dw.task_reference_name))
        .map_or(0, |dw| dw.iteration)
}

/// `wt` as iteration `iteration` of its loop sees it: the references a JOIN waits on carry the
/// iteration's suffix.
fn in_loop(wt: &WorkflowTask, iteration: u32) -> WorkflowTask {
    let mut wt = wt.clone();
    if iteration > 0 {
        for r in wt
            .join_on
            .iter_mut()
            .chain(&mut wt.default_exclusive_join_task)
        {
            *r = nav::in_iteration(r, iteration);
        }
    }
    wt
}

/// FORK_JOIN: completes at once and schedules the first task of each branch and the JOIN that
/// follows it; a FORK without a JOIN after it fails the workflow.
fn schedule_fork(ctx: &mut Ctx<'_>, wt: &WorkflowTask, mut task: Task) {
    let def = ctx.wf.workflow_definition.clone();
    let join = match nav::next_after(&def.tasks, &wt.task_reference_name) {
        Some(Next::Task(j)) if j.task_type == task_type::JOIN => j.clone(),
        _ => {
            complete_now(ctx.now, &mut task, Json::new());
            task.executed = true;
            let idx = push(ctx, task);
            let id = ctx.wf.tasks[idx].task_id.clone();
            ctx.end(
                WorkflowStatus::Failed,
                Some(FORK_WITHOUT_JOIN.to_owned()),
                Some(&id),
                true,
            );
            return;
        }
    };
    complete_now(ctx.now, &mut task, Json::new());
    task.executed = true;
    push(ctx, task);
    for branch in &wt.fork_tasks {
        if let Some(first) = branch.first() {
            schedule(ctx, first);
        }
    }
    schedule(ctx, &join);
}

/// JOIN: in progress from now, waiting on the references in `joinOn`.
fn schedule_join(ctx: &mut Ctx<'_>, wt: &WorkflowTask, mut task: Task) {
    task.status = TaskStatus::InProgress;
    task.start_time = ctx.now;
    task.input_data
        .insert("joinOn".into(), wt.join_on.clone().into());
    push(ctx, task);
}

/// SUB_WORKFLOW: waits for its child's start (see `child`), with `subWorkflowParam` resolved
/// into its input as Conductor records it (`subWorkflowName`, `subWorkflowVersion`,
/// `subWorkflowDefinition`, `subWorkflowTaskToDomain`).
fn schedule_sub_workflow(ctx: &mut Ctx<'_>, wt: &WorkflowTask, mut task: Task) {
    if let Some(p) = &wt.sub_workflow_param {
        let scope = Scope {
            wf: &ctx.wf,
            task_id: Some(task.task_id.as_str()),
        };
        let resolved = |v: &Value| expr::resolve(v, &scope);
        let input = &mut task.input_data;
        input.insert("subWorkflowName".into(), resolved(&p.name.clone().into()));
        if let Some(v) = &p.version {
            input.insert("subWorkflowVersion".into(), resolved(v));
        }
        if let Some(d) = &p.workflow_definition {
            input.insert("subWorkflowDefinition".into(), resolved(d));
        }
        if !p.task_to_domain.is_empty() {
            let domains = serde_json::to_value(&p.task_to_domain).unwrap_or_default();
            input.insert("subWorkflowTaskToDomain".into(), domains);
        }
    }
    push(ctx, task);
}

/// HUMAN: in progress from now until someone reports its outcome (`POST /api/tasks`).
fn schedule_human(ctx: &mut Ctx<'_>, mut task: Task) {
    task.status = TaskStatus::InProgress;
    task.start_time = ctx.now;
    push(ctx, task);
}

/// INLINE with the `value-param` evaluator completes at once with `result` the input value its
/// `expression` names; with a JavaScript evaluator it waits for the runtime to evaluate it
/// (see `work`).
fn schedule_inline(ctx: &mut Ctx<'_>, mut task: Task) {
    let evaluator = task.input_data.get("evaluatorType").and_then(Value::as_str);
    if evaluator == Some("value-param") {
        let key = task.input_data.get("expression").and_then(Value::as_str);
        let value = key
            .and_then(|k| task.input_data.get(k))
            .cloned()
            .unwrap_or(Value::Null);
        let mut out = Json::new();
        out.insert("result".into(), value);
        complete_now(ctx.now, &mut task, out);
    }
    push(ctx, task);
}

/// WAIT: completes at once if already due, otherwise waits until its due time (or forever);
/// an unreadable duration or deadline fails it terminally.
fn schedule_wait(ctx: &mut Ctx<'_>, mut task: Task) {
    task.start_time = ctx.now;
    match super::wait::due_ms(&task.input_data, ctx.now) {
        Ok(Some(due)) if due <= ctx.now => complete_now(ctx.now, &mut task, Json::new()),
        Ok(due) => {
            task.status = TaskStatus::InProgress;
            task.wait_timeout = due.unwrap_or(0);
        }
        Err(reason) => {
            task.status = TaskStatus::FailedWithTerminalError;
            task.end_time = ctx.now;
            task.reason_for_incompletion = Some(reason);
        }
    }
    push(ctx, task);
}

/// SWITCH/DECISION: completes at once with the chosen case and schedules that case's first task.
fn schedule_switch(ctx: &mut Ctx<'_>, wt: &WorkflowTask, mut task: Task) {
    let param = if wt.task_type == task_type::SWITCH {
        wt.expression.clone().unwrap_or_default()
    } else {
        wt.case_value_param.clone().unwrap_or_default()
    };
    let key = case_key(task.input_data.get(&param).unwrap_or(&Value::Null));
    let chosen = wt.decision_cases.get(&key).unwrap_or(&wt.default_case);
    let mut out = Json::new();
    out.insert(
        "evaluationResult".into(),
        Value::Array(vec![Value::String(key)]),
    );
    complete_now(ctx.now, &mut task, out);
    let first = chosen.first().cloned();
    task.executed = first.is_some();
    push(ctx, task);
    if let Some(first) = first {
        schedule(ctx, &first);
    }
}

/// SET_VARIABLE: copies its input into the workflow's variables and completes.
fn set_variable_task(ctx: &mut Ctx<'_>, mut task: Task) {
    for (k, v) in &task.input_data {
        ctx.wf.variables.insert(k.clone(), v.clone());
    }
    complete_now(ctx.now, &mut task, Json::new());
    push(ctx, task);
}

/// TERMINATE: ends the workflow with `terminationStatus`, `workflowOutput` and `terminationReason`.
fn terminate_task(ctx: &mut Ctx<'_>, mut task: Task) {
    let status = match task
        .input_data
        .get("terminationStatus")
        .and_then(Value::as_str)
    {
        Some("FAILED") => WorkflowStatus::Failed,
        Some("TERMINATED") => WorkflowStatus::Terminated,
        _ => WorkflowStatus::Completed,
    };
    let output = match task.input_data.get("workflowOutput") {
        Some(Value::Object(m)) => m.clone(),
        _ => Json::new(),
    };
    let reason = task
        .input_data
        .get("terminationReason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut task_out = Json::new();
    task_out.insert("output".into(), Value::Object(output.clone()));
    complete_now(ctx.now, &mut task, task_out);
    task.executed = true;
    let idx = push(ctx, task);
    let id: TaskId = ctx.wf.tasks[idx].task_id.clone();
    let failed = (status != WorkflowStatus::Completed).then_some(&id);
    ctx.end_with_output(status, reason.clone(), failed, true, Some(output));
    // Conductor reports the reason whatever the status the TERMINATE ends the workflow with.
    ctx.wf.reason_for_incompletion = reason;
}
