//! One task: starting it (its input through `input.from`, its Conductor task opened), moving it
//! on (by kind), and finishing it (`output.as`, then `export.as` into `$context`).

use super::expr::Scope;
use super::{errors, seq, Outcome, Runner};
use crate::schedule;
use proto::model::dsl::{Body, Branch, Frame};
use proto::model::{task_type, Json, Task, TaskStatus, WorkflowTask};
use proto::TaskId;
use serde_json::Value;
use std::collections::BTreeMap;

/// The task kinds of the DSL, as a task definition's key names them; `do` last, since a `for`
/// (and a `listen`'s `foreach`) holds a `do` of its own.
const KINDS: [&str; 12] = [
    "for", "try", "fork", "switch", "listen", "call", "emit", "raise", "run", "set", "wait", "do",
];

/// The kind of the task `def`.
pub(crate) fn kind_of(def: &Value) -> &'static str {
    KINDS
        .iter()
        .find(|k| def.get(**k).is_some())
        .copied()
        .unwrap_or("do")
}

/// A JSON object for a Conductor task's input or output: the value itself when it is one.
pub(super) fn as_map(value: &Value) -> Json {
    match value {
        Value::Object(map) => map.clone(),
        Value::Null => Json::new(),
        other => Json::from_iter([("value".to_owned(), other.clone())]),
    }
}

impl Runner<'_, '_> {
    /// The scope of an expression of a task whose `$input` is `input`.
    pub(super) fn scope<'s>(
        &'s self,
        vars: &'s BTreeMap<String, Value>,
        input: &'s Value,
        output: Option<&'s Value>,
    ) -> Scope<'s> {
        let mut scope = Scope::new(vars)
            .with_ref("context", &self.context)
            .with_ref("input", input)
            .with_lazy("workflow", move || super::workflow_arg(self.ctx, &self.doc))
            .with_lazy("task", move || self.task_arg(input))
            .with_lazy("secrets", move || self.secrets_arg())
            .with(
                "runtime",
                serde_json::json!({"name": "baton", "version": env!("CARGO_PKG_VERSION")}),
            )
            .loose(super::is_loose(&self.doc));
        if let Some(output) = output {
            scope = scope.with_ref("output", output);
        }
        scope
    }

    /// `$secrets`: the secrets the document declares (`use.secrets`), by name, from the
    /// operator's store; one the store lacks is null.
    fn secrets_arg(&self) -> Value {
        let names = self.doc.pointer("/use/secrets").and_then(Value::as_array);
        let secrets = names.into_iter().flatten().filter_map(Value::as_str);
        let known = secrets.map(|name| {
            let value = self.ctx.catalog.secret(name).unwrap_or_default();
            (name.to_owned(), value)
        });
        Value::Object(known.collect())
    }

    /// `$task`: the task whose expressions run, with its `$input` and when it started.
    fn task_arg(&self, input: &Value) -> Value {
        let Some((at, name, id)) = &self.task else {
            return Value::Null;
        };
        let started = id
            .as_ref()
            .and_then(|id| self.task(id))
            .map(|t| t.start_time);
        serde_json::json!({
            "name": name,
            "reference": at,
            "definition": self.doc.pointer(at),
            "input": input,
            "startedAt": started.map(super::time_arg),
        })
    }

    /// Sets the task `$task` stands for; answers the one it stood for before.
    pub(super) fn enter(
        &mut self,
        at: &str,
        name: &str,
        id: Option<&TaskId>,
    ) -> Option<(String, String, Option<TaskId>)> {
        self.task
            .replace((at.to_owned(), name.to_owned(), id.cloned()))
    }

    /// Starts the task `name` at `at` on the data `raw`.
    pub(super) fn start(
        &mut self,
        at: &str,
        name: &str,
        def: &Value,
        raw: Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Frame, Value> {
        let outer = self.enter(at, name, None);
        let started = self.start_task(at, name, def, raw, vars);
        self.task = outer;
        started
    }

    /// [`Runner::start`] while `$task` stands for the task.
    fn start_task(
        &mut self,
        at: &str,
        name: &str,
        def: &Value,
        raw: Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Frame, Value> {
        self.check_schema(
            &format!("{at}/input/schema"),
            def.pointer("/input/schema"),
            &raw,
        )?;
        let input = match def.get("input").and_then(|i| i.get("from")) {
            Some(from) => self
                .scope(vars, &raw, None)
                .expression(from, &raw)
                .map_err(|e| errors::expression_error(&format!("{at}/input/from"), &e))?,
            None => raw,
        };
        let mut frame = self.start_kind(at, name, def, input, vars)?;
        frame.deadline = self.deadline(at, def)?;
        Ok(frame)
    }

    /// Starts the task of kind [`kind_of`] `def` on its `input`.
    fn start_kind(
        &mut self,
        at: &str,
        name: &str,
        def: &Value,
        input: Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Frame, Value> {
        let kind = kind_of(def);
        if kind == "call" {
            return self.start_call(at, name, def, input, vars);
        }
        if kind == "wait" {
            return self.start_wait(at, name, def, input);
        }
        if kind == "run" {
            return self.start_run(at, name, def, input, vars);
        }
        if kind == "emit" {
            return self.start_emit(at, name, def, input, vars);
        }
        if kind == "listen" {
            return Ok(self.start_listen(at, name, def, input));
        }
        let task_id = self.open_task(at, name, &format!("dsl/{kind}"), "", &input);
        let body = match kind {
            "do" => Body::Do {
                seq: seq::new(&format!("{at}/do"), input.clone(), vars.clone()),
            },
            "for" => self.start_for(at, def, &input, vars)?,
            "fork" => self.start_fork(at, &input, vars)?,
            "try" => Body::Try {
                attempt: 1,
                seq: seq::new(&format!("{at}/try"), input.clone(), vars.clone()),
                catching: false,
                delay: None,
                error: None,
                started_ms: self.ctx.now,
            },
            _ => Body::External,
        };
        Ok(Frame {
            at: at.to_owned(),
            name: name.to_owned(),
            task_id,
            input,
            body,
            deadline: None,
        })
    }

    /// Opens the Conductor task that shows a run of the task at `at`: `task_type` is a
    /// worker's function (`def_name` set), `HTTP`, `EVENT`, `SUB_WORKFLOW`, `WAIT` or a `dsl/` kind;
    /// its `iteration` counts the runs of `at` before it. Answers its id.
    pub(super) fn open_task(
        &mut self,
        at: &str,
        name: &str,
        task_type: &str,
        function: &str,
        input: &Value,
    ) -> TaskId {
        let worker = !function.is_empty();
        let wt = WorkflowTask {
            name: if worker { function } else { name }.to_owned(),
            task_reference_name: at.to_owned(),
            task_type: task_type.to_owned(),
            task_definition: worker
                .then(|| self.ctx.catalog.task_def(function))
                .flatten(),
            ..WorkflowTask::default()
        };
        let mut task = schedule::new_task(self.ctx, &wt, 0, Some(as_map(input)));
        // Each run of the task at `at` (a `for`'s iterations, a `try`'s retries) is its own
        // iteration: (reference, iteration) names one run, as for Conductor's loops.
        let runs = self
            .ctx
            .wf
            .tasks
            .iter()
            .filter(|t| t.reference_task_name == at);
        task.iteration = u32::try_from(runs.count()).unwrap_or(u32::MAX);
        // A task the runtime performs work for (an HTTP call, a child's start) waits SCHEDULED.
        let work = [
            task_type::HTTP,
            task_type::SUB_WORKFLOW,
            task_type::EVENT,
            crate::process::PROCESS_TASK_TYPE,
        ]
        .contains(&task_type);
        if !worker && !work {
            task.status = TaskStatus::InProgress;
            task.start_time = self.ctx.now;
        }
        let id = task.task_id.clone();
        schedule::push(self.ctx, task);
        id
    }

    /// The Conductor task `id` (it is in the workflow: the tree names only its own).
    pub(super) fn task(&self, id: &TaskId) -> Option<&Task> {
        self.ctx.wf.task(id)
    }

    /// Moves a running task on.
    pub(super) fn frame(&mut self, frame: &mut Frame, vars: &BTreeMap<String, Value>) -> Outcome {
        if let Some(timed_out) = self.timed_out(frame) {
            return timed_out;
        }
        let outer = self.enter(&frame.at, &frame.name, Some(&frame.task_id));
        let outcome = self.move_on(frame, vars);
        self.task = outer;
        outcome
    }

    /// [`Runner::frame`] while `$task` stands for the task.
    fn move_on(&mut self, frame: &mut Frame, vars: &BTreeMap<String, Value>) -> Outcome {
        let at = frame.at.clone();
        let outcome = match &mut frame.body {
            Body::External => self.external(frame, vars),
            Body::Do { seq } => self.seq(seq),
            Body::For { .. } => self.for_loop(frame, vars),
            Body::Fork { .. } => self.fork(frame, vars),
            Body::Try { .. } => self.try_task(frame, vars),
            Body::Listen(_) => self.listen(frame, vars),
            Body::A2a(_) => self.a2a(frame),
        }
        .located(&at);
        if !matches!(outcome, Outcome::Pending) {
            if let Some(deadline) = frame.deadline.take() {
                self.end_task(&deadline, TaskStatus::Canceled, &Value::Null, None);
            }
        }
        outcome
    }

    /// A task of no parts: one computed now (`set`, `switch`, `raise`), or one whose
    /// Conductor task waits on the world.
    fn external(&mut self, frame: &mut Frame, vars: &BTreeMap<String, Value>) -> Outcome {
        let Some(task) = self.task(&frame.task_id) else {
            let detail = "the task's record is missing".to_owned();
            return Outcome::Fault(errors::runtime_error(&frame.at, &detail));
        };
        let task_type = task.task_type.clone();
        let def = self.doc.pointer(&frame.at).cloned().unwrap_or_default();
        match task_type.as_str() {
            "dsl/set" => {
                let set = def.get("set").unwrap_or(&Value::Null);
                let scope = self.scope(vars, &frame.input, None);
                match scope.expression(set, &frame.input) {
                    Ok(output) => Outcome::done(output),
                    Err(e) => {
                        Outcome::Fault(errors::expression_error(&format!("{}/set", frame.at), &e))
                    }
                }
            }
            "dsl/switch" => self.switch(frame, &def, vars),
            "dsl/raise" => self.raise(frame, &def, vars),
            _ => self.call_outcome(frame),
        }
    }

    /// A task ended with `output`: `output.as`, then `export.as` into `$context`; its Conductor
    /// task completes with the transformed output, which it answers.
    pub(super) fn finish(
        &mut self,
        frame: &Frame,
        output: Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Value, Value> {
        let outer = self.enter(&frame.at, &frame.name, Some(&frame.task_id));
        let finished = self.transform_output(frame, output, vars);
        self.task = outer;
        finished
    }

    /// [`Runner::finish`] while `$task` stands for the task.
    fn transform_output(
        &mut self,
        frame: &Frame,
        output: Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Value, Value> {
        let def = self.doc.pointer(&frame.at).cloned().unwrap_or_default();
        let transformed = match def.pointer("/output/as") {
            Some(filter) => self
                .scope(vars, &frame.input, Some(&output))
                .with_lazy("authorization", || self.authorization_arg(frame))
                .expression(filter, &output)
                .map_err(|e| errors::expression_error(&format!("{}/output/as", frame.at), &e))?,
            None => output,
        };
        let at = &frame.at;
        self.check_schema(
            &format!("{at}/output/schema"),
            def.pointer("/output/schema"),
            &transformed,
        )?;
        if let Some(filter) = def.pointer("/export/as") {
            let context = self
                .scope(vars, &frame.input, Some(&transformed))
                .with_lazy("authorization", || self.authorization_arg(frame))
                .expression(filter, &transformed)
                .map_err(|e| errors::expression_error(&format!("{at}/export/as"), &e))?;
            self.check_schema(
                &format!("{at}/export/schema"),
                def.pointer("/export/schema"),
                &context,
            )?;
            self.context = context;
        }
        self.end_task(&frame.task_id, TaskStatus::Completed, &transformed, None);
        Ok(transformed)
    }

    /// Closes the task of a frame that faulted or ended the workflow.
    pub(super) fn close(&mut self, frame: Option<&Frame>, outcome: &Outcome) {
        let Some(frame) = frame else { return };
        match outcome {
            Outcome::Fault(error) => {
                let reason = super::reason_of(error);
                self.end_task(&frame.task_id, TaskStatus::Failed, error, Some(reason));
            }
            Outcome::End(data) => self.end_task(&frame.task_id, TaskStatus::Completed, data, None),
            Outcome::Pending | Outcome::Done { .. } => {}
        }
    }

    /// Cancels a running task and every task running inside it.
    pub(super) fn cancel(&mut self, frame: &Frame) {
        self.cancel_inside(frame);
        self.end_task(&frame.task_id, TaskStatus::Canceled, &Value::Null, None);
    }

    /// Cancels every task running inside a task, and its timers.
    pub(super) fn cancel_inside(&mut self, frame: &Frame) {
        if let Some(deadline) = &frame.deadline {
            self.end_task(deadline, TaskStatus::Canceled, &Value::Null, None);
        }
        match &frame.body {
            Body::Do { seq } | Body::Try { seq, .. } | Body::For { seq: Some(seq), .. } => {
                if let Some(inner) = &seq.current {
                    self.cancel(inner);
                }
            }
            Body::Fork { branches } => {
                for branch in branches {
                    if let Branch::Running { frame } = branch {
                        self.cancel(frame);
                    }
                }
            }
            Body::Listen(listening) => {
                let running = listening.iteration.as_ref();
                if let Some(inner) = running.and_then(|seq| seq.current.as_ref()) {
                    self.cancel(inner);
                }
            }
            Body::For { seq: None, .. } | Body::External => {}
            Body::A2a(call) => self.end_task(&call.step, TaskStatus::Canceled, &Value::Null, None),
        }
        if let Body::Try {
            delay: Some(delay), ..
        } = &frame.body
        {
            self.end_task(delay, TaskStatus::Canceled, &Value::Null, None);
        }
    }

    /// Ends the Conductor task `id` (unless it ended already).
    pub(super) fn end_task(
        &mut self,
        id: &TaskId,
        status: TaskStatus,
        output: &Value,
        reason: Option<String>,
    ) {
        let now = self.ctx.now;
        let Some(i) = self.ctx.index_of(id) else {
            return;
        };
        let task = &mut self.ctx.wf.tasks[i];
        task.executed = true;
        if task.status.is_terminal() {
            return;
        }
        task.status = status;
        task.output_data = as_map(output);
        task.reason_for_incompletion = reason;
        if task.start_time == 0 {
            task.start_time = now;
        }
        task.end_time = now;
        task.update_time = now;
        self.ctx.changed = true;
    }

    /// `fork`: every branch starts now, on the fork's input.
    fn start_fork(
        &mut self,
        at: &str,
        input: &Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Body, Value> {
        let mut branches = Vec::new();
        for (name, def, branch_at) in seq::entries(&self.doc, &format!("{at}/fork/branches")) {
            let frame = self.start(&branch_at, &name, &def, input.clone(), vars)?;
            branches.push(Branch::Running {
                frame: Box::new(frame),
            });
        }
        Ok(Body::Fork { branches })
    }
}

impl Outcome {
    /// An error raised inside a task names that task when it names no place of its own.
    fn located(self, at: &str) -> Self {
        match self {
            Outcome::Fault(mut error) => {
                if let Some(map) = error.as_object_mut() {
                    map.entry("instance").or_insert_with(|| at.into());
                }
                Outcome::Fault(error)
            }
            other => other,
        }
    }
}
