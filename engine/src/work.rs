//! Work a task asks of the runtime: things the decider must not do itself because they take
//! time, may not end, or reach outside the workflow — start another workflow (START_WORKFLOW),
//! run a script (INLINE and LAMBDA in JavaScript, SWITCH with a `javascript` or `graaljs`
//! evaluator, a DO_WHILE's `loopCondition` once per iteration), a jq query
//! (JSON_JQ_TRANSFORM), an HTTP call (HTTP) or a process (a DSL `run` of a shell command or a
//! script, [`crate::process`]).
//!
//! Such a task is SCHEDULED and its work *pending* until [`Input::Performed`] reports the
//! outcome. Like an EVENT task's message, pending work is derived from the state, never stored
//! ([`pending_work`]): the leader performs it after every commit that leaves it pending and
//! again at recovery, and a `Perform` timer repeats it when its report does not come (the
//! runtime lost it, or the leader changed in between), backing off from attempt to attempt.
//! Performing work twice is harmless: scripts and queries are pure, and a started workflow's id
//! is derived from the task, so a repeat finds it started.
//!
//! An HTTP call is not pure. An HTTP task whose input sets [`AT_MOST_ONCE`] is called at most
//! once: the leader first commits its claim ([`Input::Claim`], SCHEDULED -> IN_PROGRESS), and
//! only then makes the call; work is derived only for the SCHEDULED task, so no leader makes it
//! again. A claimed task whose report never comes (the leader died in between) is failed by its
//! `Perform` timer ([`CLAIM_LOST`]) instead of being called again.

use super::derived::spread_id;
use super::nav;
use super::schedule::{self, complete_now};
use super::state::Ctx;
use super::*;
use proto::model::{task_type, Task, TaskStatus, Workflow, WorkflowStatus};
use serde_json::Value;

/// What the runtime is asked to do for one task.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Work {
    /// Start a workflow under `workflow_id`; report `{"workflowId": …}` or why it could not be.
    Start(StartRequest),
    /// Evaluate `script` (JavaScript) with `$` bound to `root`; report its value.
    Script { script: String, root: Value },
    /// Run the jq `query` on `input`; report the list of its outputs.
    Jq { query: String, input: Value },
    /// Make an HTTP call; report `{"response": {statusCode, headers, body, reasonPhrase}}` for
    /// any answer, or why there was none (refused, timed out, a host not allowed).
    Http(HttpRequest),
    /// Read the child workflow a SUB_WORKFLOW task waits for and, if it ended, tell the
    /// parent (`Input::ChildEnded`); asked by the task's timer, not after every commit.
    CheckChild(WorkflowId),
    /// Retry the child workflow of a SUB_WORKFLOW task that a retry with
    /// `resumeSubworkflowTasks` put back IN_PROGRESS (`Input::RetryResumingSubworkflows` to
    /// the child); report `{"subWorkflowId": …}`, or why it cannot be retried.
    RetryChild(WorkflowId),
    /// Run a process; report `{code, stdout, stderr}` (with `timedOut` when it was killed at
    /// its limit), or why it could not be started.
    Process(crate::process::ProcessRequest),
}

/// An HTTP task's call: Conductor's `http_request` input, or the same fields directly in the
/// task's input.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HttpRequest {
    pub uri: String,
    /// Upper case; GET when not given.
    pub method: String,
    pub headers: BTreeMap<String, String>,
    pub body: Option<Value>,
    pub accept: String,
    pub content_type: String,
    pub connect_timeout_ms: u64,
    pub read_timeout_ms: u64,
    /// Claim the task ([`Input::Claim`]) and make the call only once that committed.
    #[serde(default)]
    pub at_most_once: bool,
    /// Authenticate with an OAuth2 access token the runtime obtains first (the task input's
    /// `oauth2`).
    #[serde(default)]
    pub oauth2: Option<Box<OAuth2Grant>>,
    /// With `oauth2`: the task's output shows the access token sent (`authorization`:
    /// `{scheme, parameter}`), for a document that reads `$authorization` after the call (the
    /// task input's [`proto::model::HTTP_SHOW_TOKEN`]).
    #[serde(default)]
    pub show_token: bool,
}

/// How the runtime obtains the OAuth2 access token a call sends as `Authorization: Bearer`:
/// a token request to `token_uri` (RFC 6749 §4.3 `password`, §4.4 `client_credentials`).
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2Grant {
    pub token_uri: String,
    /// `client_credentials` or `password`.
    pub grant: String,
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<String>,
    /// How the client authenticates: `client_secret_post` (in the form), `client_secret_basic`
    /// (an `Authorization: Basic` header) or `none`.
    pub client_authentication: String,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub audiences: Vec<String>,
}

/// The key of an HTTP task's input that asks for an at-most-once call (`true`).
pub use proto::model::HTTP_AT_MOST_ONCE as AT_MOST_ONCE;
/// Why a claimed at-most-once HTTP task fails when its report never came.
pub const CLAIM_LOST: &str =
    "the leader changed after claiming the call: the call may have been made; not repeated";
/// How long past its timeouts a claimed call's report may take before the task fails.
pub const CLAIM_MARGIN_MS: NowMs = 5_000;

/// An HTTP call's connection timeout when the task gives none (`connectionTimeOut`).
pub const HTTP_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// An HTTP call's read timeout when the task gives none (`readTimeOut`).
pub const HTTP_READ_TIMEOUT_MS: u64 = 30_000;
/// The longest timeout an HTTP task may ask for.
pub const HTTP_TIMEOUT_MS_MAX: u64 = 300_000;

/// A workflow a task starts.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StartRequest {
    /// Derived from the starting task's id, so performing the start twice starts one workflow.
    pub workflow_id: WorkflowId,
    pub name: String,
    /// The latest version when `None`.
    pub version: Option<u32>,
    pub input: Json,
    pub correlation_id: Option<String>,
    pub task_to_domain: BTreeMap<String, String>,
    /// The workflow and task that start it as their child (a SUB_WORKFLOW).
    pub parent: Option<(WorkflowId, TaskId)>,
    /// The definition to run, given inline instead of by name.
    pub definition: Option<Box<proto::model::WorkflowDef>>,
}

/// One task's pending work.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PendingWork {
    pub task_id: TaskId,
    /// The task's iteration: a DO_WHILE's condition is asked once per iteration, and a report
    /// for an earlier one changes nothing.
    pub iteration: u32,
    /// Not before this time (a retry's backoff).
    pub not_before: NowMs,
    pub work: Work,
}

/// Whether a task of this definition type waits for work the runtime performs.
pub(crate) fn is_work_type(wt: &proto::model::WorkflowTask) -> bool {
    match wt.task_type.as_str() {
        task_type::START_WORKFLOW | task_type::LAMBDA | task_type::JSON_JQ_TRANSFORM => true,
        task_type::HTTP | task_type::DO_WHILE | task_type::SUB_WORKFLOW => true,
        task_type::INLINE | crate::process::PROCESS_TASK_TYPE => true,
        task_type::SWITCH | task_type::DECISION => nav::is_scripted_switch(wt),
        _ => false,
    }
}

/// The work a SCHEDULED task of a RUNNING workflow waits for (`None`: it waits for none).
pub(crate) fn work_of(wf: &Workflow, t: &Task) -> Option<Work> {
    if wf.status != WorkflowStatus::Running {
        return None;
    }
    let wt = &t.workflow_task;
    if wt.task_type == task_type::DO_WHILE {
        let waits = t.status == TaskStatus::InProgress && schedule::body_done(wf, t);
        return waits.then(|| Work::Script {
            script: wt.loop_condition.clone().unwrap_or_default(),
            root: schedule::condition_scope(wf, t),
        });
    }
    if t.subworkflow_changed {
        return super::child::retry_work(t);
    }
    if t.status != TaskStatus::Scheduled && !forgets_its_child(t) {
        return None;
    }
    let input = &t.input_data;
    let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    match wt.task_type.as_str() {
        task_type::START_WORKFLOW => Some(Work::Start(start_request(wf, t))),
        task_type::INLINE => Some(Work::Script {
            script: text("expression")?,
            root: Value::Object(input.clone()),
        }),
        // Conductor runs a LAMBDA's `scriptExpression` as the body of a function.
        task_type::LAMBDA => Some(Work::Script {
            script: format!("(function () {{ {} }})()", text("scriptExpression")?),
            root: Value::Object(input.clone()),
        }),
        task_type::JSON_JQ_TRANSFORM => Some(Work::Jq {
            query: text("queryExpression")?,
            input: Value::Object(input.clone()),
        }),
        task_type::HTTP => Some(Work::Http(HttpRequest {
            at_most_once: at_most_once(t),
            ..http_request(input)
        })),
        task_type::SUB_WORKFLOW => Some(Work::Start(super::child::start_request(wf, t))),
        crate::process::PROCESS_TASK_TYPE => Some(match crate::process::asked(wf, t)? {
            crate::process::Asked::Process(request) => Work::Process(request),
            crate::process::Asked::Script { script, root } => Work::Script { script, root },
        }),
        task_type::SWITCH | task_type::DECISION if nav::is_scripted_switch(wt) => {
            let script = match wt.task_type.as_str() {
                task_type::SWITCH => wt.expression.clone()?,
                _ => wt.case_expression.clone()?,
            };
            Some(Work::Script {
                script,
                root: Value::Object(input.clone()),
            })
        }
        _ => None,
    }
}

/// The simulator's deliberate bug: a SUB_WORKFLOW in progress asks for its child again.
fn forgets_its_child(t: &Task) -> bool {
    use crate::mutation::{active, Mutation};
    t.workflow_task.task_type == task_type::SUB_WORKFLOW
        && t.status == TaskStatus::InProgress
        && active(Mutation::SubWorkflowTwice)
}

/// START_WORKFLOW's `startWorkflow` input: `name`, `version`, `input`, `correlationId`,
/// `taskToDomain`.
fn start_request(wf: &Workflow, t: &Task) -> StartRequest {
    let empty = Json::new();
    let spec = t
        .input_data
        .get("startWorkflow")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let text = |key: &str| spec.get(key).and_then(Value::as_str).map(str::to_owned);
    let version = spec.get("version").and_then(|v| match v {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    });
    let task_to_domain = spec
        .get("taskToDomain")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    StartRequest {
        workflow_id: spread_id(&format!("start:{}:{}", wf.workflow_id, t.task_id)),
        name: text("name").unwrap_or_default(),
        version,
        input: spec
            .get("input")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        correlation_id: text("correlationId"),
        task_to_domain,
        parent: None,
        definition: None,
    }
}

/// The call an HTTP task's input describes; what is missing takes Conductor's defaults, and
/// the timeouts Baton's (the runtime refuses a call without a `uri`).
fn http_request(input: &Json) -> HttpRequest {
    let spec = input
        .get("http_request")
        .and_then(Value::as_object)
        .unwrap_or(input);
    let text = |k: &str| spec.get(k).and_then(Value::as_str).map(str::to_owned);
    let ms = |k: &str, default: u64| {
        let given = spec.get(k).and_then(Value::as_u64).filter(|ms| *ms > 0);
        given.unwrap_or(default).min(HTTP_TIMEOUT_MS_MAX)
    };
    let headers = spec.get("headers").and_then(Value::as_object);
    let headers = headers.into_iter().flatten().map(|(k, v)| {
        let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        (k.clone(), v)
    });
    HttpRequest {
        uri: text("uri").unwrap_or_default(),
        method: text("method").map_or_else(|| "GET".into(), |m| m.to_ascii_uppercase()),
        headers: headers.collect(),
        body: spec.get("body").filter(|b| !b.is_null()).cloned(),
        accept: text("accept").unwrap_or_else(|| "application/json".into()),
        content_type: text("contentType").unwrap_or_else(|| "application/json".into()),
        connect_timeout_ms: ms("connectionTimeOut", HTTP_CONNECT_TIMEOUT_MS),
        read_timeout_ms: ms("readTimeOut", HTTP_READ_TIMEOUT_MS),
        at_most_once: false,
        oauth2: spec
            .get("oauth2")
            .and_then(|o| serde_json::from_value(o.clone()).ok()),
        show_token: spec.get(proto::model::HTTP_SHOW_TOKEN) == Some(&Value::Bool(true)),
    }
}

/// Whether `t` is an HTTP task whose call is made at most once.
pub(crate) fn at_most_once(t: &Task) -> bool {
    t.workflow_task.task_type == task_type::HTTP
        && t.input_data.get(AT_MOST_ONCE) == Some(&Value::Bool(true))
}

/// Whether `t` is an at-most-once HTTP task whose call was claimed and not yet reported.
pub(crate) fn claimed(t: &Task) -> bool {
    at_most_once(t) && t.status == TaskStatus::InProgress
}

/// The leader claims an at-most-once HTTP task's call before making it (see the module's
/// header): refused unless the task waits SCHEDULED for it in this `iteration`.
pub(crate) fn claim(ctx: &mut Ctx<'_>, i: usize, iteration: u32) -> Result<(), Error> {
    let t = &ctx.wf.tasks[i];
    let waits = work_of(&ctx.wf, t).is_some() && at_most_once(t) && t.iteration == iteration;
    if !waits {
        let detail = format!("task {} does not wait for a call to claim", t.task_id);
        return Err(Error::Conflict(detail));
    }
    let now = ctx.now;
    let t = &mut ctx.wf.tasks[i];
    t.status = TaskStatus::InProgress;
    t.start_time = now;
    t.update_time = now;
    ctx.changed = true;
    Ok(())
}

/// A claimed call's report did not come in time: the task fails, not called again.
pub(crate) fn claim_lost(ctx: &mut Ctx<'_>, i: usize) {
    let now = ctx.now;
    let t = &mut ctx.wf.tasks[i];
    t.status = TaskStatus::Failed;
    t.end_time = now;
    t.update_time = now;
    t.reason_for_incompletion = Some(CLAIM_LOST.to_owned());
    ctx.changed = true;
    super::advance::advance(ctx);
}

/// Every pending work of `workflow` (none unless it is RUNNING).
pub fn pending_work(workflow: &Workflow) -> Vec<PendingWork> {
    workflow
        .tasks
        .iter()
        .filter(|t| is_work_type(&t.workflow_task))
        .filter_map(|t| {
            work_of(workflow, t).map(|work| PendingWork {
                task_id: t.task_id.clone(),
                iteration: t.iteration,
                not_before: t.scheduled_time,
                work,
            })
        })
        .collect()
}

/// How long a task's work may go unreported before it is performed again.
pub(crate) const REDO_FIRST_MS: NowMs = 5_000;
/// The longest wait between two attempts of one task's work (the backoff doubles up to it).
pub(crate) const REDO_MAX_MS: NowMs = 60_000;

/// When a task's pending work is performed again: its last attempt (the task's `updateTime`;
/// `pollCount` counts the attempts after the first) plus a backoff.
pub(crate) fn redo_due(wf: &Workflow, t: &Task) -> Option<NowMs> {
    if wf.status == WorkflowStatus::Running {
        if let Some(due) = super::child::check_due(t) {
            return Some(due);
        }
    }
    if claimed(t) && wf.status == WorkflowStatus::Running {
        let call = http_request(&t.input_data);
        let limit = call.connect_timeout_ms + call.read_timeout_ms;
        let limit = NowMs::try_from(limit).unwrap_or(NowMs::MAX);
        return Some(t.update_time.saturating_add(limit + CLAIM_MARGIN_MS));
    }
    work_of(wf, t)?;
    let doubled = REDO_FIRST_MS.saturating_mul(1 << t.poll_count.min(16));
    let last = t.update_time.max(t.scheduled_time);
    Some(last.saturating_add(doubled.min(REDO_MAX_MS)))
}

/// The runtime performed a task's work: the task completes with what it produced, or fails
/// with the reason. A report for a task that no longer waits for work changes nothing.
pub(crate) fn performed(
    ctx: &mut Ctx<'_>,
    i: usize,
    iteration: u32,
    outcome: Result<Value, String>,
) {
    let t = &ctx.wf.tasks[i];
    // A claimed call's report is taken while the workflow is paused too: the call was made.
    let waits = work_of(&ctx.wf, t).is_some() || (claimed(t) && !ctx.wf.status.is_terminal());
    if !waits || t.iteration != iteration {
        return;
    }
    if t.workflow_task.task_type == task_type::DO_WHILE {
        schedule::loop_decided(ctx, i, outcome);
        super::advance::advance(ctx);
        return;
    }
    if t.subworkflow_changed {
        return child_retried(ctx, i, outcome);
    }
    if t.workflow_task.task_type == crate::process::PROCESS_TASK_TYPE {
        crate::process::performed(&mut ctx.wf.tasks[i], ctx.now, outcome);
        ctx.changed = true;
        return super::advance::advance(ctx);
    }
    if t.workflow_task.task_type == task_type::SUB_WORKFLOW {
        if let Ok(value) = &outcome {
            return child_started(ctx, i, value);
        }
    }
    let now = ctx.now;
    let wt = t.workflow_task.clone();
    let output = outcome
        .map_err(|reason| (reason, Json::new()))
        .and_then(|value| output_of(&wt, value));
    let t = &mut ctx.wf.tasks[i];
    t.start_time = now;
    t.update_time = now;
    match output {
        Ok(output) if wt.async_complete && wt.task_type == task_type::HTTP => {
            t.status = TaskStatus::InProgress;
            t.output_data = output;
        }
        Ok(output) => complete_now(now, t, output),
        Err((reason, output)) => {
            t.status = TaskStatus::Failed;
            t.end_time = now;
            t.reason_for_incompletion = Some(reason);
            t.output_data = output;
        }
    }
    ctx.changed = true;
    super::advance::advance(ctx);
}

/// The task's output for what its work produced, or why the task fails (with its output): an
/// HTTP answer outside 2xx fails the attempt.
fn output_of(wt: &proto::model::WorkflowTask, value: Value) -> Result<Json, (String, Json)> {
    let mut out = Json::new();
    match wt.task_type.as_str() {
        task_type::START_WORKFLOW | task_type::HTTP => {
            if let Value::Object(m) = value {
                out = m;
            }
            if let Some(failure) = http_failure(&out).filter(|_| wt.task_type == task_type::HTTP) {
                return Err((failure, out));
            }
        }
        task_type::JSON_JQ_TRANSFORM => {
            let list = match value {
                Value::Array(list) => list,
                other => vec![other],
            };
            out.insert(
                "result".into(),
                list.first().cloned().unwrap_or(Value::Null),
            );
            out.insert("resultList".into(), Value::Array(list));
        }
        task_type::SWITCH | task_type::DECISION => {
            let key = schedule::case_key(&value);
            out.insert("evaluationResult".into(), Value::Array(vec![key.into()]));
        }
        _ => {
            out.insert("result".into(), value);
        }
    }
    Ok(out)
}

/// Why an HTTP task's answer fails it: a status outside 2xx.
fn http_failure(output: &Json) -> Option<String> {
    let response = output.get("response")?;
    let code = response.get("statusCode").and_then(Value::as_u64)?;
    if (200..300).contains(&code) {
        return None;
    }
    let phrase = response.get("reasonPhrase").and_then(Value::as_str);
    Some(
        format!("HTTP {code} {}", phrase.unwrap_or_default())
            .trim_end()
            .to_owned(),
    )
}

/// A SUB_WORKFLOW's child started: the task waits IN_PROGRESS for its end.
fn child_started(ctx: &mut Ctx<'_>, i: usize, started: &Value) {
    let id = started.get("workflowId").and_then(Value::as_str);
    note_started(&mut ctx.wf.tasks[i], id, ctx.now);
    ctx.changed = true;
}

/// What a SUB_WORKFLOW task records of its child's start, at `now`: IN_PROGRESS with the
/// child's id (`subWorkflowId`, in the output too), its check timer counting from here.
fn note_started(t: &mut Task, child: Option<&str>, now: NowMs) {
    t.status = TaskStatus::InProgress;
    t.start_time = now;
    t.update_time = now;
    t.poll_count = 0;
    t.sub_workflow_id = child.map(str::to_owned);
    if let Some(id) = child {
        t.output_data.insert("subWorkflowId".into(), id.into());
    }
}

/// A SUB_WORKFLOW task's child ended: the task takes its outcome and the workflow moves on.
pub(crate) fn child_ended(
    ctx: &mut Ctx<'_>,
    i: usize,
    child: &WorkflowId,
    status: WorkflowStatus,
    output: Json,
    reason: Option<String>,
) {
    let t = &ctx.wf.tasks[i];
    let waits = super::child::expected_child(&ctx.wf, t);
    // While the child's retry is pending, an end is the one being retried.
    let retrying = t.subworkflow_changed;
    if waits.as_ref() != Some(child)
        || !status.is_terminal()
        || ctx.wf.status.is_terminal()
        || retrying
    {
        return;
    }
    let (status, output) = super::child::outcome_of(status, child, output);
    let now = ctx.now;
    let t = &mut ctx.wf.tasks[i];
    if t.sub_workflow_id.is_none() {
        // The child ended before its start was reported (the task is still SCHEDULED): the
        // task records the start as that report would have, keeping a start time it has.
        let start_time = t.start_time;
        note_started(t, Some(child.as_str()), now);
        if start_time != 0 {
            t.start_time = start_time;
        }
    }
    t.status = status;
    t.output_data = output;
    t.end_time = now;
    t.update_time = now;
    if !status.is_successful() {
        t.reason_for_incompletion = reason;
    }
    ctx.changed = true;
    super::advance::advance(ctx);
}

/// The check a waiting SUB_WORKFLOW task's timer asks for.
pub(crate) fn check_child(wf: &Workflow, t: &Task) -> Option<Effect> {
    // While the child's retry is pending, the timer repeats the retry instead.
    let child = super::child::watched_child(t).filter(|_| !t.subworkflow_changed)?;
    Some(Effect::Perform {
        workflow_id: wf.workflow_id.clone(),
        work: PendingWork {
            task_id: t.task_id.clone(),
            iteration: t.iteration,
            not_before: 0,
            work: Work::CheckChild(child),
        },
    })
}

/// The child of a resumed task was retried (`Ok`): the task waits for its next end; or it
/// could not be (`Err`, e.g. it was removed): the task fails with the reason.
fn child_retried(ctx: &mut Ctx<'_>, i: usize, outcome: Result<Value, String>) {
    let now = ctx.now;
    let t = &mut ctx.wf.tasks[i];
    t.subworkflow_changed = false;
    t.poll_count = 0;
    t.update_time = now;
    ctx.changed = true;
    if let Err(reason) = outcome {
        t.status = TaskStatus::Failed;
        t.end_time = now;
        t.reason_for_incompletion = Some(reason);
        super::advance::advance(ctx);
    }
}
