//! The engine's entry points: `start` creates a workflow instance, `decide` applies one input to it.
//! Worker inputs (lease, result) and timers are handled here; user operations live in `ops`; what
//! happens after a task ends lives in `advance`.

use super::advance::{self, advance, begin};
use super::derive::{self, is_worker};
use super::state::Ctx;
use super::{ops, schedule, *};
use proto::limits::TASK_LOGS_MAX;
use proto::model::{
    task_type, TaskResultStatus, TaskStatus, TimeoutPolicy, Workflow, WorkflowStatus,
    WorkflowTimeoutPolicy,
};

/// Creates a workflow instance and schedules its first task(s).
pub fn start(start: StartInput, now: NowMs, rng: Rng) -> Result<Decision, Error> {
    start_with(start, now, rng, &NoCatalog)
}

/// [`start`] with the registered task definitions for its dynamic tasks.
pub fn start_with(
    start: StartInput,
    now: NowMs,
    rng: Rng,
    catalog: &dyn Catalog,
) -> Result<Decision, Error> {
    if start.def.dsl.is_none() {
        super::validate_workflow_def(&start.def)?;
    }
    let variables = start.def.variables.clone();
    // The definition's inputTemplate fills what the start's input leaves out.
    let mut input = start.def.input_template.clone();
    input.extend(start.input);
    let side = super::schema::Side::Input;
    if let Some(reason) =
        super::schema::violation(catalog, &start.def, side, "workflow input", &input)
    {
        return Err(Error::Invalid(reason));
    }
    let wf = Workflow {
        workflow_id: start.workflow_id,
        workflow_name: start.def.name.clone(),
        workflow_version: start.def.version,
        status: WorkflowStatus::Running,
        create_time: now,
        update_time: now,
        start_time: now,
        end_time: 0,
        parent_workflow_id: start.parent_workflow_id,
        parent_workflow_task_id: start.parent_workflow_task_id,
        tasks: Vec::new(),
        input,
        output: Json::new(),
        correlation_id: start.correlation_id,
        re_run_from_workflow_id: start.re_run_from_workflow_id,
        reason_for_incompletion: None,
        event: start.event,
        task_to_domain: start.task_to_domain,
        failed_reference_task_names: Vec::new(),
        failed_task_names: Vec::new(),
        workflow_definition: start.def.into(),
        priority: start.priority,
        variables,
        last_retried_time: 0,
        failed_task_id: None,
        dsl: None,
    };
    let record = WorkflowRecord {
        version: 0,
        workflow: wf,
        task_logs: BTreeMap::new(),
        applied: Vec::new(),
        status_notice: None,
        lifecycle: None,
    };
    let mut ctx = Ctx::owning(record, now, rng).with_catalog(catalog);
    ctx.changed = true;
    begin(&mut ctx);
    let correlated = std::mem::take(&mut ctx.correlated);
    let mut decision = ctx.finish(0);
    crate::dsl::lifecycle::note(None, &mut decision, now, catalog, &correlated);
    Ok(decision)
}

/// Decides `inputs` in order, each on the record the one before left, exactly as if each had been
/// committed before the next: the workflow actor's batch, one write for the inputs that queued
/// while its previous write was in flight. `rng_for(version)` is the randomness a lone decision on
/// a record of that version draws. Answers the record after the last input that changed
/// something (`None` when none did) and each input's effects or refusal, in order.
pub fn decide_all(
    record: &WorkflowRecord,
    inputs: Vec<Input>,
    now: NowMs,
    rng_for: &mut dyn FnMut(u64) -> Box<dyn rand::RngCore>,
) -> (Option<WorkflowRecord>, Vec<Result<Vec<Effect>, Error>>) {
    decide_all_with(record, inputs, now, rng_for, &NoCatalog)
}

/// [`decide_all`] with the registered task definitions for the dynamic tasks it creates.
pub fn decide_all_with(
    record: &WorkflowRecord,
    inputs: Vec<Input>,
    now: NowMs,
    rng_for: &mut dyn FnMut(u64) -> Box<dyn rand::RngCore>,
    catalog: &dyn Catalog,
) -> (Option<WorkflowRecord>, Vec<Result<Vec<Effect>, Error>>) {
    let mut last: Option<WorkflowRecord> = None;
    let mut answers = Vec::with_capacity(inputs.len());
    for input in inputs {
        let decided = {
            let current = last.as_ref().unwrap_or(record);
            let mut rng = rng_for(current.version);
            decide_in(current, input, now, &mut *rng, catalog)
        };
        answers.push(decided.map(|decision| {
            if let Some(next) = decision.record {
                last = Some(next);
            }
            decision.effects
        }));
    }
    (last, answers)
}

/// Applies one input to a running (or finished) workflow.
pub fn decide(
    record: &WorkflowRecord,
    input: Input,
    now: NowMs,
    rng: Rng,
) -> Result<Decision, Error> {
    decide_in(record, input, now, rng, &NoCatalog)
}

/// [`decide`] with the registered task definitions and schemas at hand.
pub fn decide_with(
    record: &WorkflowRecord,
    input: Input,
    now: NowMs,
    rng: Rng,
    catalog: &dyn Catalog,
) -> Result<Decision, Error> {
    decide_in(record, input, now, rng, catalog)
}

fn decide_in(
    record: &WorkflowRecord,
    input: Input,
    now: NowMs,
    rng: Rng,
    catalog: &dyn Catalog,
) -> Result<Decision, Error> {
    if record.workflow.workflow_definition.dsl.is_some() {
        if let Some(refusal) = crate::dsl::run::refuses(&input) {
            return Err(Error::Conflict(refusal));
        }
    }
    let mut ctx = Ctx::new(record, now, rng).with_catalog(catalog);
    match input {
        Input::TaskResult(result) => task_result(&mut ctx, result)?,
        Input::LeasedResult { result, lease } => {
            check_lease(&ctx, &result, &lease)?;
            task_result(&mut ctx, result)?;
        }
        Input::Lease { task_id, worker_id } => lease(&mut ctx, &task_id, worker_id)?,
        Input::Timer(key) => timer(&mut ctx, &key),
        Input::Pause => ops::pause(&mut ctx)?,
        Input::Resume => ops::resume(&mut ctx)?,
        Input::Terminate { reason } => ops::terminate(&mut ctx, reason)?,
        Input::Retry => ops::retry(&mut ctx, false)?,
        Input::RetryResumingSubworkflows => ops::retry(&mut ctx, true)?,
        Input::Restart { def } => ops::restart(&mut ctx, def)?,
        Input::Rerun(req) => ops::rerun(&mut ctx, req)?,
        Input::SkipTask { reference, request } => ops::skip(&mut ctx, &reference, request)?,
        Input::Decide => advance(&mut ctx),
        Input::LeaseAll {
            task_ids,
            worker_id,
            permit_until,
        } => lease_all(&mut ctx, &task_ids, worker_id, permit_until)?,
        Input::TaskResultThenLease(result) => result_then_lease(&mut ctx, result)?,
        Input::UpdateVariables {
            variables,
            append_array,
            key,
        } => ops::update_variables(&mut ctx, variables, append_array, key)?,
        Input::EventPublished { task_id, error } => event_published(&mut ctx, &task_id, error)?,
        Input::ChildEnded {
            task_id,
            child,
            status,
            output,
            reason,
        } => {
            let i = find_task(&ctx, task_id.as_str())?;
            super::work::child_ended(&mut ctx, i, &child, status, output, reason);
        }
        Input::Performed {
            task_id,
            iteration,
            outcome,
        } => {
            let i = find_task(&ctx, task_id.as_str())?;
            super::work::performed(&mut ctx, i, iteration, outcome);
        }
        Input::StatusPublished { end_time } => super::listener::published(&mut ctx, end_time),
        Input::LifecyclePublished { upto } => {
            let outbox = ctx.lifecycle.as_mut();
            ctx.changed |= outbox.is_some_and(|l| l.published(upto));
        }
        Input::Listened { message_id, event } => {
            crate::dsl::run::listened(&mut ctx, &message_id, &event)?;
        }
        Input::Claim { task_id, iteration } => {
            let i = find_task(&ctx, task_id.as_str())?;
            super::work::claim(&mut ctx, i, iteration)?;
        }
    }
    let correlated = std::mem::take(&mut ctx.correlated);
    let mut decision = ctx.finish(record.version);
    crate::dsl::lifecycle::note(Some(record), &mut decision, now, catalog, &correlated);
    Ok(decision)
}

/// Fails a running workflow whose next record would be larger than a workflow may grow: the input
/// that led there is dropped, and the workflow ends FAILED with `reason` from its committed
/// record, its open tasks CANCELED and no output computed (the output could be what is too
/// large), so the record that ends it is barely larger than the committed one (its lifecycle
/// events, when `catalog` records them, are the small ones of tasks cancelled and the workflow
/// faulted). A finished workflow is refused (`Conflict`): nothing is changed.
pub fn fail_oversized(
    record: &WorkflowRecord,
    reason: String,
    now: NowMs,
    rng: Rng,
    catalog: &dyn Catalog,
) -> Result<Decision, Error> {
    if record.workflow.status.is_terminal() {
        return Err(Error::Conflict(reason));
    }
    let mut ctx = Ctx::new(record, now, rng);
    ctx.end_with_output(
        WorkflowStatus::Failed,
        Some(reason),
        None,
        true,
        Some(Json::new()),
    );
    let mut decision = ctx.finish(record.version);
    crate::dsl::lifecycle::note(Some(record), &mut decision, now, catalog, &BTreeMap::new());
    Ok(decision)
}

/// An EVENT task's message went out (or could not): complete or fail the task like a result.
fn event_published(
    ctx: &mut Ctx<'_>,
    task_id: &TaskId,
    error: Option<String>,
) -> Result<(), Error> {
    let i = find_task(ctx, task_id.as_str())?;
    let task = &ctx.wf.tasks[i];
    if task.workflow_task.task_type != task_type::EVENT || task.status != TaskStatus::Scheduled {
        return Ok(());
    }
    let (status, output) = match error {
        Some(reason) => {
            let result = TaskResult {
                workflow_instance_id: ctx.wf.workflow_id.to_string(),
                task_id: task_id.to_string(),
                status: TaskResultStatus::Failed,
                reason_for_incompletion: Some(reason),
                ..Default::default()
            };
            return task_result(ctx, result);
        }
        None => {
            let sent = super::derive::event_of(&ctx.wf, task);
            let mut output = sent.as_ref().map(|e| e.payload.clone()).unwrap_or_default();
            if let Some(e) = sent {
                output.insert("event_produced".into(), e.sink.into());
            }
            let status = if task.workflow_task.async_complete {
                TaskResultStatus::InProgress
            } else {
                TaskResultStatus::Completed
            };
            (status, output)
        }
    };
    let result = TaskResult {
        workflow_instance_id: ctx.wf.workflow_id.to_string(),
        task_id: task_id.to_string(),
        status,
        output_data: output,
        ..Default::default()
    };
    task_result(ctx, result)
}

fn find_task(ctx: &Ctx<'_>, id: &str) -> Result<usize, Error> {
    let not_found = || {
        Error::NotFound(format!(
            "Task {id} not found in workflow {}",
            ctx.wf.workflow_id
        ))
    };
    let id = TaskId::parse(id).map_err(|_| not_found())?;
    ctx.index_of(&id).ok_or_else(not_found)
}

/// A worker's update. Late or duplicate results for a terminal task change nothing.
fn task_result(ctx: &mut Ctx<'_>, result: TaskResult) -> Result<(), Error> {
    if !result.workflow_instance_id.is_empty()
        && result.workflow_instance_id != ctx.wf.workflow_id.as_str()
    {
        return Err(Error::NotFound(format!(
            "Task {} does not belong to workflow {}",
            result.task_id, result.workflow_instance_id
        )));
    }
    let i = find_task(ctx, &result.task_id)?;
    if ctx.wf.tasks[i].status.is_terminal()
        && !crate::mutation::active(crate::mutation::Mutation::AcceptWithoutFence)
    {
        return Ok(());
    }
    let now = ctx.now;
    if !result.logs.is_empty() {
        let id = ctx.wf.tasks[i].task_id.as_str().to_owned();
        let logs = ctx.logs.entry(id.clone()).or_default();
        for mut l in result.logs {
            if l.task_id.is_empty() {
                l.task_id = id.clone();
            }
            logs.push(l);
        }
        if logs.len() > TASK_LOGS_MAX {
            let excess = logs.len() - TASK_LOGS_MAX;
            logs.drain(..excess);
        }
    }
    let (status, reason) = match output_violation(ctx, i, result.status, &result.output_data) {
        Some(violation) => (TaskResultStatus::Failed, Some(violation)),
        None => (result.status, result.reason_for_incompletion),
    };
    let t = &mut ctx.wf.tasks[i];
    t.output_data = result.output_data;
    t.update_time = now;
    if result.worker_id.is_some() {
        t.worker_id = result.worker_id;
    }
    if reason.is_some() {
        t.reason_for_incompletion = reason;
    }
    if result.sub_workflow_id.is_some() {
        t.sub_workflow_id = result.sub_workflow_id;
    }
    if t.start_time == 0 {
        t.start_time = now;
    }
    ctx.changed = true;
    match status {
        TaskResultStatus::InProgress => {
            t.status = TaskStatus::InProgress;
            t.callback_after_seconds = result.callback_after_seconds;
        }
        status => {
            t.status = status.into();
            t.end_time = now;
            t.callback_after_seconds = 0;
            advance(ctx);
        }
    }
    Ok(())
}

/// Why a COMPLETED result's output fails its task: the output does not match the schema its
/// task definition enforces (Orkes fails the task; its retries apply).
fn output_violation(
    ctx: &Ctx<'_>,
    i: usize,
    status: TaskResultStatus,
    output: &Json,
) -> Option<String> {
    if status != TaskResultStatus::Completed {
        return None;
    }
    let t = &ctx.wf.tasks[i];
    let def = t.workflow_task.task_definition.as_ref()?;
    let what = format!("output of task '{}'", t.reference_task_name);
    let side = super::schema::Side::Output;
    super::schema::violation(ctx.catalog, def, side, &what, output)
}

/// A fenced result's lease must still hold: same task, the type the lease names, IN_PROGRESS, and
/// not leased again since (its poll count unchanged). A resend of the result that already ended the
/// task under this lease (its acknowledgement was lost with a node) is let through, and
/// [`task_result`] absorbs it: the worker gets its acknowledgement, nothing changes.
fn check_lease(
    ctx: &Ctx<'_>,
    result: &TaskResult,
    lease: &proto::worker::Lease,
) -> Result<(), Error> {
    if result.task_id != lease.task_id {
        return Err(Error::Invalid(format!(
            "the result is for task {} but quotes the lease of task {}",
            result.task_id, lease.task_id
        )));
    }
    let t = &ctx.wf.tasks[find_task(ctx, &result.task_id)?];
    if t.task_type != lease.task_type {
        return Err(Error::Invalid(format!(
            "task {} is of type {}, not {}",
            lease.task_id, t.task_type, lease.task_type
        )));
    }
    let same_lease = t.poll_count == lease.poll_count;
    if same_lease && t.status.is_terminal() && t.status == TaskStatus::from(result.status) {
        return Ok(());
    }
    if t.status != TaskStatus::InProgress || !same_lease {
        let now = if t.status == TaskStatus::InProgress {
            "leased again".to_owned()
        } else {
            t.status.as_str().to_owned()
        };
        return Err(Error::Conflict(format!(
            "the lease of task {} has ended: the task is {now}",
            lease.task_id
        )));
    }
    Ok(())
}

/// A result, then the lease of the workflow's first ready task of the reported task's type and
/// domain (if any) to the reporting worker. A late result for a terminal task leases nothing.
fn result_then_lease(ctx: &mut Ctx<'_>, result: TaskResult) -> Result<(), Error> {
    let i = find_task(ctx, &result.task_id)?;
    let reported = &ctx.wf.tasks[i];
    let was_open = !reported.status.is_terminal();
    let (task_type, domain) = (reported.task_def_name.clone(), reported.domain.clone());
    let worker_id = result.worker_id.clone();
    task_result(ctx, result)?;
    if !was_open || ctx.wf.status != WorkflowStatus::Running {
        return Ok(());
    }
    // A type with a concurrency or rate limit is leased only under its keeper's permits.
    let limited = ctx.catalog.task_def(&task_type).and_then(|d| d.limits());
    if limited.is_some() {
        return Ok(());
    }
    let now = ctx.now;
    let next = ctx
        .wf
        .tasks
        .iter()
        .filter(|t| {
            t.status == TaskStatus::Scheduled
                && is_worker(t)
                && t.task_def_name == task_type
                && t.domain == domain
                && t.scheduled_time <= now
        })
        .map(|t| t.task_id.clone())
        .next();
    if let Some(next) = next {
        lease(ctx, &next, worker_id)?;
    }
    Ok(())
}

/// Leases every task of `task_ids` that can be; refused with the first refusal when none can.
/// (`lease` checks everything before it changes anything, so a refused one leaves no trace.)
fn lease_all(
    ctx: &mut Ctx<'_>,
    task_ids: &[TaskId],
    worker_id: Option<String>,
    permit_until: Option<NowMs>,
) -> Result<(), Error> {
    if let Some(until) = permit_until.filter(|until| ctx.now > *until) {
        return Err(Error::Conflict(format!(
            "the permits of this poll held until {until} and have lapsed; poll again"
        )));
    }
    let mut first_refusal = None;
    let mut leased = false;
    for id in task_ids {
        match lease(ctx, id, worker_id.clone()) {
            Ok(()) => leased = true,
            Err(e) => {
                first_refusal.get_or_insert(e);
            }
        }
    }
    match first_refusal {
        Some(e) if !leased => Err(e),
        _ => Ok(()),
    }
}

/// A worker polled this task: SCHEDULED (or re-queued IN_PROGRESS) -> IN_PROGRESS.
fn lease(ctx: &mut Ctx<'_>, task_id: &TaskId, worker_id: Option<String>) -> Result<(), Error> {
    let i = find_task(ctx, task_id.as_str())?;
    if ctx.wf.status != WorkflowStatus::Running {
        return Err(Error::Conflict(format!(
            "Workflow {} is {}; its tasks cannot be polled",
            ctx.wf.workflow_id,
            ctx.wf.status.as_str()
        )));
    }
    let t = &ctx.wf.tasks[i];
    let visible = derive::visible_at(t).filter(|_| is_worker(t));
    match visible {
        Some(at) if at <= ctx.now => {}
        Some(at) => {
            return Err(Error::Conflict(format!(
                "Task {task_id} is not ready before {at}"
            )));
        }
        None => {
            return Err(Error::Conflict(format!(
                "Task {task_id} is {} and cannot be polled",
                t.status.as_str()
            )));
        }
    }
    let now = ctx.now;
    let t = &mut ctx.wf.tasks[i];
    t.status = TaskStatus::InProgress;
    t.worker_id = worker_id;
    t.poll_count = t.poll_count.saturating_add(1);
    if t.start_time == 0 {
        t.start_time = now;
    }
    t.update_time = now;
    t.callback_after_seconds = 0;
    let delivered = Box::new(t.clone());
    ctx.changed = true;
    ctx.effects.push(Effect::Deliver(delivered));
    Ok(())
}

/// A derived timer fired: re-check it against the state and `now`; stale or early timers do nothing.
fn timer(ctx: &mut Ctx<'_>, key: &TimerKey) {
    if key.kind == TimerKind::StatusPublish {
        return super::listener::attempt_again(ctx);
    }
    let Some(due) = derive::due(&ctx.wf, key) else {
        return;
    };
    if due > ctx.now {
        return;
    }
    if key.kind == TimerKind::WorkflowTimeout {
        workflow_timed_out(ctx);
        return;
    }
    let Some(i) = key.task_id.as_ref().and_then(|id| ctx.index_of(id)) else {
        return;
    };
    match key.kind {
        TimerKind::EventPublish => attempt_again(ctx, i),
        TimerKind::Perform if super::work::claimed(&ctx.wf.tasks[i]) => {
            super::work::claim_lost(ctx, i);
        }
        TimerKind::Perform => {
            attempt_again(ctx, i);
            let check = super::work::check_child(&ctx.wf, &ctx.wf.tasks[i]);
            ctx.effects.extend(check);
        }
        TimerKind::Wait => wait_elapsed(ctx, i),
        kind => task_timed_out(ctx, kind, i),
    }
}

/// The workflow's own timeout: ends it as TIMED_OUT under TIME_OUT_WF (ALERT_ONLY does nothing).
fn workflow_timed_out(ctx: &mut Ctx<'_>) {
    if ctx.wf.workflow_definition.dsl.is_some() {
        return crate::dsl::run::timed_out(ctx);
    }
    let def = &ctx.wf.workflow_definition;
    if def.timeout_policy == WorkflowTimeoutPolicy::TimeOutWf {
        let reason = format!(
            "Workflow timed out after {} seconds. Timeout configured as {} seconds. Timeout policy configured to TIME_OUT_WF",
            (ctx.now - ctx.wf.start_time) / 1000,
            def.timeout_seconds
        );
        ctx.end(WorkflowStatus::TimedOut, Some(reason), None, true);
    }
}

/// An EVENT task's publication or a task's work is due again.
fn attempt_again(ctx: &mut Ctx<'_>, i: usize) {
    // Recording the attempt is the write whose commit publishes the message again.
    let now = ctx.now;
    let t = &mut ctx.wf.tasks[i];
    t.poll_count = t.poll_count.saturating_add(1);
    t.update_time = now;
    ctx.changed = true;
}

/// A WAIT task reached its due time: it completes and the workflow moves on.
fn wait_elapsed(ctx: &mut Ctx<'_>, i: usize) {
    let now = ctx.now;
    let t = &mut ctx.wf.tasks[i];
    t.status = TaskStatus::Completed;
    t.end_time = now;
    t.update_time = now;
    ctx.changed = true;
    advance(ctx);
}

/// A task's poll, response, per-attempt or total timeout fired: the task times out and, under
/// TIME_OUT_WF, so does the workflow; otherwise the workflow advances (retrying if it may).
fn task_timed_out(ctx: &mut Ctx<'_>, kind: TimerKind, i: usize) {
    let t = &ctx.wf.tasks[i];
    let def = schedule::task_def(&t.workflow_task);
    let (reason, policy) = match kind {
        TimerKind::PollTimeout => ("Task poll timed out".to_owned(), def.timeout_policy),
        TimerKind::ResponseTimeout => {
            (format!("responseTimeout: {} exceeded.", t.response_timeout_seconds), TimeoutPolicy::Retry)
        }
        TimerKind::TaskTimeout => (
            format!(
                "Task timed out after {} seconds. Timeout configured as {} seconds. Timeout policy configured to {}",
                (ctx.now - t.start_time) / 1000,
                def.timeout_seconds,
                policy_name(def.timeout_policy)
            ),
            def.timeout_policy,
        ),
        TimerKind::TotalTimeout => (
            format!("Task total timeout of {} seconds across attempts exceeded", def.total_timeout_seconds),
            TimeoutPolicy::TimeOutWf,
        ),
        TimerKind::WorkflowTimeout
        | TimerKind::Wait
        | TimerKind::EventPublish
        | TimerKind::Perform
        | TimerKind::StatusPublish => return,
    };
    if policy == TimeoutPolicy::AlertOnly {
        return;
    }
    let now = ctx.now;
    let t = &mut ctx.wf.tasks[i];
    t.status = TaskStatus::TimedOut;
    t.reason_for_incompletion = Some(reason);
    t.end_time = now;
    t.update_time = now;
    ctx.changed = true;
    if policy == TimeoutPolicy::TimeOutWf {
        let (r, n) = (t.reference_task_name.clone(), t.task_def_name.clone());
        t.executed = true;
        ctx.note_failure(&r, &n);
        let reason = advance::failure_reason(ctx, i, WorkflowStatus::TimedOut);
        let id = ctx.wf.tasks[i].task_id.clone();
        ctx.end(WorkflowStatus::TimedOut, Some(reason), Some(&id), true);
    } else {
        advance(ctx);
    }
}

fn policy_name(p: TimeoutPolicy) -> &'static str {
    match p {
        TimeoutPolicy::Retry => "RETRY",
        TimeoutPolicy::TimeOutWf => "TIME_OUT_WF",
        TimeoutPolicy::AlertOnly => "ALERT_ONLY",
    }
}
