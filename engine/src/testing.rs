//! A driver for the engine's tests and for tests of what runs it: `H` holds the committed record,
//! a manual clock and a seeded rng, feeds inputs to [`start`]/[`decide`], and checks on every
//! step that the record survives the stored encoding (whole and as a patch). Built for this
//! crate's tests and, with the `testing` feature, for other crates' tests.

use crate::*;
use proto::model::{
    task_type, Task, TaskDef, TaskResultStatus, TaskStatus, WorkflowStatus, WorkflowTask,
};
use proto::PartitionId;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

pub const T0: NowMs = 1_700_000_000_000;

pub fn wf_id() -> WorkflowId {
    WorkflowId::new(PartitionId(3), 0xabcdef)
}

/// The task definitions Conductor's Spock specs register (tests/data/README.md).
pub fn harness_task_def(name: &str) -> TaskDef {
    let mut d = TaskDef::named(name);
    if name.starts_with("integration_task_") {
        d.retry_count = if name.contains("_RT_") { 0 } else { 1 };
        d.timeout_seconds = 120;
        d.response_timeout_seconds = 120;
        d.retry_delay_seconds = 60;
    }
    if name == "task_optional" {
        d.timeout_seconds = 5;
        d.timeout_policy = proto::model::TimeoutPolicy::Retry;
        d.retry_count = 1;
        d.retry_delay_seconds = 0;
        d.response_timeout_seconds = 5;
    }
    d
}

/// Fills `taskDefinition` of every worker task as the runtime does at start.
pub fn inline_defs(def: &mut WorkflowDef, f: &dyn Fn(&str) -> TaskDef) {
    fn walk(list: &mut [WorkflowTask], f: &dyn Fn(&str) -> TaskDef) {
        for t in list {
            if t.task_type == task_type::SIMPLE && t.task_definition.is_none() {
                t.task_definition = Some(f(&t.name));
            }
            for b in &mut t.fork_tasks {
                walk(b, f);
            }
            for c in t.decision_cases.values_mut() {
                walk(c, f);
            }
            walk(&mut t.default_case, f);
        }
    }
    walk(&mut def.tasks, f);
}

pub fn fixture(name: &str) -> WorkflowDef {
    let path = format!(
        "{}/../tests/data/conductor/test-harness/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut def: WorkflowDef = serde_json::from_str(&text).expect("fixture parses");
    inline_defs(&mut def, &harness_task_def);
    def
}

pub fn simple(r: &str) -> WorkflowTask {
    WorkflowTask {
        name: format!("task_{r}"),
        task_reference_name: r.into(),
        task_definition: Some(TaskDef {
            retry_count: 0,
            ..TaskDef::named(&format!("task_{r}"))
        }),
        ..Default::default()
    }
}

pub fn def_of(tasks: Vec<WorkflowTask>) -> WorkflowDef {
    WorkflowDef {
        name: "wf".into(),
        tasks,
        ..Default::default()
    }
}

pub fn obj(v: Value) -> Json {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    }
}

/// `record` as a replica reads it back: every record the engine tests commit goes through the
/// stored encoding (which leaves out what the definition holds) and must come back unchanged.
pub fn stored(record: WorkflowRecord) -> WorkflowRecord {
    let bytes = proto::record::encode(&record);
    let back: WorkflowRecord = proto::record::decode(&bytes).expect("a stored record decodes");
    assert_eq!(back, record, "the stored encoding loses nothing");
    back
}

/// `next` as a replica reads it back after `prev`: when a patch can say what changed, the patch
/// (through its encoding) applied to `prev` must give `next`; then `next` goes through [`stored`].
pub fn patched(prev: &WorkflowRecord, next: WorkflowRecord) -> WorkflowRecord {
    if let Some(patch) = proto::record::patch::diff(prev, &next) {
        let bytes = proto::record::encode(&patch);
        let decoded: proto::record::patch::RecordPatch =
            proto::record::decode(&bytes).expect("a patch decodes");
        let mut back = prev.clone();
        decoded.apply_to(&mut back);
        assert_eq!(back, next, "the patch loses nothing");
    }
    stored(next)
}

/// A workflow under test.
pub struct H {
    pub rec: WorkflowRecord,
    pub now: NowMs,
    pub rng: ChaCha8Rng,
    /// Effects of the last accepted input.
    pub effects: Vec<Effect>,
    /// The registered definitions and schemas decisions look up (none unless started with some).
    pub catalog: std::sync::Arc<dyn Catalog + Send + Sync>,
}

impl H {
    pub fn start(def: WorkflowDef, input: Value) -> H {
        Self::try_start(def, input).expect("starts")
    }

    /// Starts a workflow, or answers why the engine refuses to.
    pub fn try_start(def: WorkflowDef, input: Value) -> Result<H, Error> {
        Self::try_start_with(def, input, std::sync::Arc::new(crate::NoCatalog))
    }

    /// [`H::try_start`] with registered definitions and schemas for every decision.
    pub fn try_start_with(
        def: WorkflowDef,
        input: Value,
        catalog: std::sync::Arc<dyn Catalog + Send + Sync>,
    ) -> Result<H, Error> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let s = StartInput {
            correlation_id: Some("corr".into()),
            ..StartInput::new(wf_id(), def, obj(input))
        };
        let d = crate::start_with(s, T0, &mut rng, &*catalog)?;
        let rec = stored(d.record.expect("start writes a record"));
        assert_eq!(rec.version, 1);
        Ok(H {
            rec,
            now: T0,
            rng,
            effects: d.effects,
            catalog,
        })
    }

    pub fn wf(&self) -> &proto::model::Workflow {
        &self.rec.workflow
    }

    pub fn status(&self) -> WorkflowStatus {
        self.rec.workflow.status
    }

    /// Applies an input; on success checks the version rule and keeps the new record.
    pub fn apply(&mut self, input: Input) -> Result<bool, Error> {
        let before = self.rec.clone();
        let d = crate::decide_with(&self.rec, input, self.now, &mut self.rng, &*self.catalog)?;
        self.effects = d.effects;
        match d.record {
            Some(r) => {
                assert_eq!(
                    r.version,
                    before.version + 1,
                    "every change bumps the version by one"
                );
                assert_eq!(r.workflow.update_time, self.now);
                self.rec = patched(&before, r);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    pub fn ok(&mut self, input: Input) -> bool {
        self.apply(input).expect("input accepted")
    }

    pub fn advance_ms(&mut self, ms: i64) {
        self.now += ms;
    }

    /// The latest attempt of a reference.
    pub fn task(&self, r: &str) -> &Task {
        self.rec
            .workflow
            .task_by_ref(r)
            .unwrap_or_else(|| panic!("no task {r}"))
    }

    pub fn attempts(&self, r: &str) -> Vec<&Task> {
        self.rec
            .workflow
            .tasks
            .iter()
            .filter(|t| t.reference_task_name == r)
            .collect()
    }

    pub fn has(&self, r: &str) -> bool {
        self.rec.workflow.task_by_ref(r).is_some()
    }

    pub fn st(&self, r: &str) -> TaskStatus {
        self.task(r).status
    }

    pub fn poll(&mut self, r: &str) {
        let id = self.task(r).task_id.clone();
        self.ok(Input::Lease {
            task_id: id,
            worker_id: Some("w1".into()),
        });
    }

    pub fn result(&mut self, r: &str, status: TaskResultStatus, output: Value) -> bool {
        let t = self.task(r);
        let res = TaskResult {
            workflow_instance_id: t.workflow_instance_id.as_str().into(),
            task_id: t.task_id.as_str().into(),
            status,
            output_data: obj(output),
            reason_for_incompletion: (status != TaskResultStatus::Completed)
                .then(|| format!("{r} said no")),
            ..Default::default()
        };
        self.ok(Input::TaskResult(res))
    }

    pub fn complete(&mut self, r: &str, output: Value) {
        self.result(r, TaskResultStatus::Completed, output);
    }

    pub fn fail(&mut self, r: &str) {
        self.result(r, TaskResultStatus::Failed, json!({}));
    }

    /// Reference names and statuses of every task, in order.
    pub fn shape(&self) -> Vec<(String, TaskStatus)> {
        self.rec
            .workflow
            .tasks
            .iter()
            .map(|t| (t.reference_task_name.clone(), t.status))
            .collect()
    }

    /// The work task `r` waits for, if any (see [`crate::pending_work`]).
    pub fn work(&self, r: &str) -> Option<crate::Work> {
        let id = &self.task(r).task_id;
        crate::pending_work(self.wf())
            .into_iter()
            .find(|p| &p.task_id == id)
            .map(|p| p.work)
    }

    /// Reports task `r`'s work performed with `outcome`.
    pub fn perform(&mut self, r: &str, outcome: Result<Value, String>) -> bool {
        let t = self.task(r);
        let (task_id, iteration) = (t.task_id.clone(), t.iteration);
        self.ok(Input::Performed {
            task_id,
            iteration,
            outcome,
        })
    }

    pub fn finished(&self) -> bool {
        self.effects.contains(&Effect::Finished)
    }
}

pub fn shape(items: &[(&str, TaskStatus)]) -> Vec<(String, TaskStatus)> {
    items.iter().map(|(r, s)| (r.to_string(), *s)).collect()
}
