//! The working state of one decision: the workflow being changed, the effects collected so far, the
//! time and the randomness. Also the things every lifecycle step shares: new ids, ending the workflow
//! (cancelling what is left, the failure workflow, `Finished`) and turning the context into a
//! [`Decision`].

use super::derived::derived_id;
use super::{expr, Decision, Effect, Input, NowMs};
use proto::model::{Json, TaskExecLog, TaskStatus, Workflow, WorkflowStatus};
use proto::record::WorkflowRecord;
use proto::{TaskId, WorkflowId};
use std::collections::BTreeMap;

/// One decision in progress.
pub(crate) struct Ctx<'r> {
    pub wf: Workflow,
    pub logs: BTreeMap<String, Vec<TaskExecLog>>,
    /// See [`WorkflowRecord::applied`].
    pub applied: Vec<String>,
    /// See [`WorkflowRecord::status_notice`]; the workflow's end starts it afresh.
    pub notice: Option<proto::record::StatusNotice>,
    /// See [`WorkflowRecord::lifecycle`].
    pub lifecycle: Option<proto::record::LifecycleOutbox>,
    pub effects: Vec<Effect>,
    pub now: NowMs,
    pub rng: &'r mut dyn rand::RngCore,
    /// Set by every mutation; an unchanged context yields no record.
    pub changed: bool,
    /// The registered task definitions dynamic tasks look up.
    pub catalog: &'r dyn super::Catalog,
    /// The correlation keys each `listen` this decision completed resolved, by its task, for
    /// the lifecycle events (not stored: its frame is gone from the record).
    pub correlated: BTreeMap<TaskId, serde_json::Value>,
}

impl<'r> Ctx<'r> {
    /// A decision on a copy of `record` (the caller keeps the original until the new one commits).
    pub fn new(record: &WorkflowRecord, now: NowMs, rng: &'r mut dyn rand::RngCore) -> Self {
        Self::owning(record.clone(), now, rng)
    }

    /// [`Ctx::new`], with the registered task definitions at hand.
    pub fn with_catalog(mut self, catalog: &'r dyn super::Catalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// A decision on `record` itself, for a record nobody else holds (a start's first).
    pub fn owning(record: WorkflowRecord, now: NowMs, rng: &'r mut dyn rand::RngCore) -> Self {
        Self {
            wf: record.workflow,
            logs: record.task_logs,
            applied: record.applied,
            notice: record.status_notice,
            lifecycle: record.lifecycle,
            effects: Vec::new(),
            now,
            rng,
            changed: false,
            catalog: &super::NoCatalog,
            correlated: BTreeMap::new(),
        }
    }

    /// A new task id on the workflow's partition.
    pub fn new_task_id(&mut self) -> TaskId {
        TaskId::of_workflow(&self.wf.workflow_id, self.rng.next_u64())
    }

    pub fn index_of(&self, id: &TaskId) -> Option<usize> {
        self.wf.tasks.iter().position(|t| &t.task_id == id)
    }

    /// Records that `reference` (task def `name`) failed, keeping both lists sorted and unique.
    pub fn note_failure(&mut self, reference: &str, name: &str) {
        for (list, v) in [
            (&mut self.wf.failed_reference_task_names, reference),
            (&mut self.wf.failed_task_names, name),
        ] {
            if let Err(pos) = list.binary_search_by(|x| x.as_str().cmp(v)) {
                list.insert(pos, v.to_owned());
            }
        }
        self.changed = true;
    }

    /// The workflow's output per its definition: `outputParameters` resolved, or the last task's
    /// output when there are none (as Conductor does).
    pub fn computed_output(&self) -> Json {
        let params = &self.wf.workflow_definition.output_parameters;
        if params.is_empty() {
            self.wf
                .tasks
                .last()
                .map(|t| t.output_data.clone())
                .unwrap_or_default()
        } else {
            expr::resolve_map(params, &expr::Scope::new(&self.wf))
        }
    }

    /// Moves the workflow to a terminal `status`. Non-terminal tasks (a JOIN waiting on the failed
    /// task too) are CANCELED. `decider` is true when the engine, not a user, ended it: only then
    /// does a failure workflow start, as in Conductor, named in the output under
    /// `conductor.failure_workflow`.
    pub fn end(
        &mut self,
        status: WorkflowStatus,
        reason: Option<String>,
        failed: Option<&TaskId>,
        decider: bool,
    ) {
        self.end_with_output(status, reason, failed, decider, None);
    }

    pub fn end_with_output(
        &mut self,
        status: WorkflowStatus,
        reason: Option<String>,
        failed: Option<&TaskId>,
        decider: bool,
        output: Option<Json>,
    ) {
        let now = self.now;
        let stop = Input::Terminate {
            reason: Some(format!(
                "parent workflow {} ended {}",
                self.wf.workflow_id,
                status.as_str()
            )),
        };
        let children = super::child::to_children(&self.wf, &stop);
        self.effects.extend(children);
        for t in self.wf.tasks.iter_mut().filter(|t| !t.status.is_terminal()) {
            t.status = TaskStatus::Canceled;
            t.end_time = now;
            t.update_time = now;
            t.executed = true;
        }
        let output = output.unwrap_or_else(|| self.computed_output());
        let (status, reason) = match self.output_violation(status, &output) {
            Some(violation) => (WorkflowStatus::Failed, Some(violation)),
            None => (status, reason),
        };
        self.wf.status = status;
        self.wf.end_time = now;
        self.notice = None;
        self.wf.output = output;
        if status != WorkflowStatus::Completed {
            self.wf.reason_for_incompletion = reason.clone();
            self.wf.failed_task_id = failed.map(|id| id.as_str().to_owned());
        }
        self.changed = true;
        if decider && status != WorkflowStatus::Completed {
            if let Some(name) = self.failure_workflow_name() {
                let input = self.failure_input(reason, failed);
                let workflow_id = failure_workflow_id(&self.wf);
                // Conductor names the failure workflow in the failed workflow's output.
                self.wf.output.insert(
                    "conductor.failure_workflow".into(),
                    workflow_id.as_str().into(),
                );
                self.effects.push(Effect::StartWorkflow {
                    workflow_id,
                    name,
                    version: None,
                    input,
                    correlation_id: self.wf.correlation_id.clone(),
                });
            }
        }
        self.effects.extend(super::child::parent_notice(&self.wf));
        self.effects.push(Effect::Finished);
    }

    /// Why a workflow about to complete with `output` fails instead: the output does not match
    /// the schema its definition enforces.
    fn output_violation(&self, status: WorkflowStatus, output: &Json) -> Option<String> {
        if status != WorkflowStatus::Completed {
            return None;
        }
        let def = &*self.wf.workflow_definition;
        let side = super::schema::Side::Output;
        super::schema::violation(self.catalog, def, side, "workflow output", output)
    }

    /// `failureWorkflow`, resolving Conductor's `$workflow.input.name` form.
    fn failure_workflow_name(&self) -> Option<String> {
        let name = self
            .wf
            .workflow_definition
            .failure_workflow
            .as_deref()?
            .trim();
        if name.is_empty() {
            return None;
        }
        if name.starts_with('$') {
            let key = name.split('.').nth(2)?;
            return self
                .wf
                .input
                .get(key)
                .and_then(|v| v.as_str())
                .map(str::to_owned);
        }
        Some(name.to_owned())
    }

    fn failure_input(&self, reason: Option<String>, failed: Option<&TaskId>) -> Json {
        let mut input = Json::new();
        input.insert("workflowId".into(), self.wf.workflow_id.as_str().into());
        input.insert(
            "reason".into(),
            reason.map(Into::into).unwrap_or(serde_json::Value::Null),
        );
        input.insert("failureStatus".into(), self.wf.status.as_str().into());
        if let Some(id) = failed {
            input.insert("failureTaskId".into(), id.as_str().into());
        }
        input.insert(
            "failedWorkflow".into(),
            serde_json::to_value(&self.wf).unwrap_or_default(),
        );
        input
    }

    /// The decision: the next record (version + 1, updateTime = now) when anything changed.
    pub fn finish(mut self, version: u64) -> Decision {
        if !self.changed {
            return Decision {
                record: None,
                effects: self.effects,
            };
        }
        self.wf.update_time = self.now;
        // Only a terminal workflow publishes its end: a retried or restarted one owes nothing
        // until it ends again.
        let status_notice = self.notice.filter(|_| self.wf.status.is_terminal());
        Decision {
            record: Some(WorkflowRecord {
                version: version + 1,
                workflow: self.wf,
                task_logs: self.logs,
                applied: self.applied,
                status_notice,
                lifecycle: self.lifecycle,
            }),
            effects: self.effects,
        }
    }
}

/// The failure workflow's id: same partition as the failed workflow, bits from a hash of its id and
/// of the run (startTime, lastRetriedTime), so repeating the effect starts it once.
pub(crate) fn failure_workflow_id(wf: &Workflow) -> WorkflowId {
    let key = format!(
        "failure:{}:{}:{}",
        wf.workflow_id, wf.start_time, wf.last_retried_time
    );
    derived_id(&wf.workflow_id, &key)
}
