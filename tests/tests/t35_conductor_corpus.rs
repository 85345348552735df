//! Conductor's own corpus, replayed: every one of the 110 fixture files under
//! `tests/data/conductor/` (80 from Conductor's test-harness, 30 from its e2e suite) is registered,
//! started with an input that makes sense for it and driven as Conductor's specs drive it: a worker
//! polls each task type and completes or fails it with the answers in the plan, and WAIT and HUMAN
//! tasks without a due time are completed from outside. The plan
//! (`tests/data/conductor/replay_plan.json`) holds, per fixture: the runs (workflow, input, worker
//! answers, definitions from other fixture files it needs), the expected terminal status and task
//! sequence (reference names in order, with statuses), and the behaviours Conductor's tests assert.
//! A file that is data for another fixture is replayed inside that fixture's run. The public hosts
//! the e2e fixtures' HTTP tasks call (Orkes' API tester, the e2e suite's httpbin) are served by a
//! stub on loopback: their URLs are rewritten when the definitions are registered.
//!
//! A plan entry is `{why, runs}`, `{skip}` (the reason) or `{data_for}` (the fixture whose runs use
//! the file). A run names its `workflow` (and `version`), its `input` or `input_file`, `register`
//! (other fixture files whose definitions it needs), `defs`, `task_defs` and `task_def_files`,
//! the `worker`'s answers per reference (`complete`, `complete_with_file`, `fail`,
//! `fail_terminal`, `ignore`, `no_poll`, optionally `after` a reference appears), and what to
//! expect: `status`, `tasks` (or `tasks_any_order`, `task_count`), `start_tasks`, `children`,
//! `checks`, `retry_chain`, `attempts`, `own_task_id`; `deadline_s` shortens the wait of a run
//! known not to end.
//!
//! The test prints `N of 110 fixtures replayed` and, for every file not replayed, its reason; it
//! fails if a replayed fixture deviates from the plan or if fewer than 100 are replayed. Fixtures on
//! which Baton is known to differ from Conductor are listed in [`KNOWN_DEVIATIONS`] (with what each
//! system does) and are not counted.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

use harness::{Api, Server};
use serde_json::{json, Value};

/// How long one run may take to reach a terminal status (the slowest fixtures wait for a 10 s
/// response timeout).
const RUN_DEADLINE: Duration = Duration::from_secs(60);
/// The acceptance: at least this many of the 110 files are replayed.
const MIN_REPLAYED: usize = 100;
const FILES_TOTAL: usize = 110;
const DATA_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/conductor");
const PLAN_FILE: &str = "replay_plan.json";

/// Fixtures on which Baton differs from Conductor: (fixture file, what Baton does, what Conductor
/// does). They are run, reported and left out of the count; each is a finding for the engine. A
/// listed fixture that replays fails the test, so the list shrinks as the engine is fixed.
const KNOWN_DEVIATIONS: &[(&str, &str, &str)] = &[
    (
        "test-harness/terminate_task_parent_workflow.json",
        "lists the second branch's WAIT basicJavaA before the first branch's SUB_WORKFLOW \
         test_terminate_subworkflow: the two LAMBDAs run as asynchronous work and each branch's next \
         task is scheduled when its LAMBDA's result comes back (statuses all as in Conductor)",
        "runs LAMBDAs synchronously in the decision and lists the SUB_WORKFLOW (tasks[4]) before the \
         WAIT (tasks[5]), in branch order (LambdaAndTerminateTaskSpec)",
    ),
    (
        "test-harness/do_while_timeline_ui_demo.json",
        "refuses the definition: JSON_JQ_TRANSFORM 'prepare_fork_ref' query \
         [{id: 1, value: 'task1'}, ...] does not parse (single-quoted strings)",
        "stores definitions without parsing jq queries; jq has no single-quoted strings, so the task \
         fails when it runs, after the first loop's two iterations: the workflow FAILS",
    ),
];

/// What the replay of one fixture file came to.
enum Verdict {
    Replayed,
    Skipped(String),
    Deviates(String),
}

#[test]
fn every_conductor_fixture_replays_as_conductor_runs_it() {
    let started = Instant::now();
    let plan = load_plan();
    check_plan_covers_every_file(&plan);
    let server = Server::start();
    let api = server.api();
    let stub = start_http_stub();
    let only = std::env::var("CORPUS_ONLY").ok();
    let mut verdicts = BTreeMap::new();
    for (file, entry) in plan.as_object().into_iter().flatten() {
        if only.as_deref().is_some_and(|o| !file.contains(o)) || entry.get("data_for").is_some() {
            continue;
        }
        verdicts.insert(file.clone(), replay_file(api, &stub, file, entry));
    }
    for (file, entry) in plan.as_object().into_iter().flatten() {
        if let Some(user) = entry["data_for"].as_str() {
            if let Some(verdict) = verdicts.get(user).map(Verdict::as_data) {
                verdicts.insert(file.clone(), verdict);
            }
        }
    }
    report(&verdicts, started.elapsed(), only.is_none());
}

impl Verdict {
    /// The verdict of a data file: that of the fixture whose replay uses it.
    fn as_data(&self) -> Verdict {
        match self {
            Verdict::Replayed => Verdict::Replayed,
            Verdict::Skipped(why) => Verdict::Skipped(format!("its user is not replayed: {why}")),
            Verdict::Deviates(what) => Verdict::Deviates(format!("its user deviates: {what}")),
        }
    }
}

/// The plan: fixture file (relative to `tests/data/conductor`) -> entry.
fn load_plan() -> Value {
    read_json(&Path::new(DATA_DIR).join(PLAN_FILE))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// A fixture file's JSON; `Null` for a file that is not JSON (Conductor's empty `input.json`).
fn fixture(file: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(DATA_DIR).join(file))
        .unwrap_or_else(|e| panic!("cannot read fixture {file}: {e}"));
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// Every fixture file has exactly one plan entry, and the plan names no other file.
fn check_plan_covers_every_file(plan: &Value) {
    let mut files = Vec::new();
    for dir in ["test-harness", "e2e"] {
        let entries = std::fs::read_dir(Path::new(DATA_DIR).join(dir)).expect("fixture dir");
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    let mut planned: Vec<String> = plan.as_object().expect("plan").keys().cloned().collect();
    planned.sort();
    assert_eq!(files.len(), FILES_TOTAL, "fixture files on disk");
    assert_eq!(planned, files, "the plan has one entry per fixture file");
}

/// Replays every run of one fixture file; a panic inside a run is that fixture's deviation.
fn replay_file(api: &Api, stub: &str, file: &str, entry: &Value) -> Verdict {
    if let Some(reason) = entry["skip"].as_str() {
        return Verdict::Skipped(reason.to_owned());
    }
    let runs = entry["runs"].as_array().cloned().unwrap_or_default();
    assert!(
        !runs.is_empty(),
        "{file}: the plan has neither runs nor a skip reason"
    );
    for (i, run) in runs.iter().enumerate() {
        let outcome = catch_unwind(AssertUnwindSafe(|| Run::new(api, stub, file, run).replay()));
        terminate_leftovers(api);
        if let Err(panic) = outcome {
            let message = panic_message(&panic);
            return Verdict::Deviates(format!("run {i} ({}): {message}", run["workflow"]));
        }
    }
    Verdict::Replayed
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "panic".to_owned())
}

/// Terminates whatever a run left running (workflows a START_WORKFLOW task started, a run that
/// deviated), so that the next fixture's worker polls only its own tasks.
fn terminate_leftovers(api: &Api) {
    let query = "/api/workflow/search?size=1000&query=status%20IN%20(RUNNING%2C%20PAUSED)";
    let found = api.get(query).expect_ok("search running workflows").json();
    for hit in found["results"].as_array().into_iter().flatten() {
        if let Some(id) = hit["workflowId"].as_str() {
            api.delete(&format!("/api/workflow/{id}?reason=replay%20over"));
        }
    }
}

/// Prints the count, the skip list and the deviations, then asserts the acceptance.
fn report(verdicts: &BTreeMap<String, Verdict>, elapsed: Duration, whole: bool) {
    let known: HashMap<&str, (&str, &str)> = KNOWN_DEVIATIONS
        .iter()
        .map(|(f, baton, conductor)| (*f, (*baton, *conductor)))
        .collect();
    let mut replayed = 0;
    let mut unexpected = Vec::new();
    println!("--- fixtures not replayed ---");
    for (file, verdict) in verdicts {
        match (verdict, known.get(file.as_str())) {
            (Verdict::Replayed, None) => replayed += 1,
            (Verdict::Replayed, Some(_)) => {
                unexpected.push(format!("{file}: listed as a known deviation but replays"))
            }
            (Verdict::Skipped(reason), _) => println!("{file}: {reason}"),
            (Verdict::Deviates(what), Some((baton, conductor))) => {
                println!("{file}: KNOWN DEVIATION: Baton {baton}; Conductor {conductor} ({what})")
            }
            (Verdict::Deviates(what), None) => unexpected.push(format!("{file}: {what}")),
        }
    }
    println!("{replayed} of {FILES_TOTAL} fixtures replayed in {elapsed:?}");
    assert!(
        unexpected.is_empty(),
        "{} fixtures deviate:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    if whole {
        assert!(
            replayed >= MIN_REPLAYED,
            "{replayed} replayed, want at least {MIN_REPLAYED}"
        );
    }
}

/// One run of a fixture: start a workflow and drive it to a terminal status.
struct Run<'a> {
    api: &'a Api,
    /// The loopback HTTP stub standing in for the public hosts (`http://127.0.0.1:PORT`).
    stub: &'a str,
    file: String,
    spec: &'a Value,
    correlation_id: String,
    /// Answers given so far per plan key (the index of the next answer).
    answered: HashMap<String, usize>,
}

impl<'a> Run<'a> {
    fn new(api: &'a Api, stub: &'a str, file: &str, spec: &'a Value) -> Run<'a> {
        Run {
            api,
            stub,
            file: file.to_owned(),
            spec,
            correlation_id: format!("corpus-{}", harness::nonce()),
            answered: HashMap::new(),
        }
    }

    fn replay(mut self) {
        self.register();
        let id = self.start();
        if let Some(want) = self.spec.get("start_tasks") {
            let wf = self.api.workflow(&id);
            assert_eq!(&json!(sequence(&wf)), want, "tasks right after the start");
        }
        let wf = self.drive(&id);
        self.check(&wf);
    }

    /// Answers tasks round after round until the workflow is terminal; after [`RUN_DEADLINE`] (or
    /// the run's own `deadline_s`) fails with where the workflow stands.
    fn drive(&mut self, id: &str) -> Value {
        let within = self.spec["deadline_s"]
            .as_u64()
            .map_or(RUN_DEADLINE, Duration::from_secs);
        let deadline = Instant::now() + within;
        loop {
            if let Some(wf) = self.step(id) {
                return wf;
            }
            if Instant::now() >= deadline {
                let wf = self.api.workflow(id);
                panic!(
                    "still {} after {within:?}; tasks {:?}",
                    wf["status"],
                    sequence(&wf)
                );
            }
            std::thread::sleep(harness::WAIT_POLL_INTERVAL);
        }
    }

    /// Task definitions (the specs' set, the plan's overrides, a fixture's own), then every
    /// workflow definition of this file and of the files the plan names.
    fn register(&self) {
        self.api.register_spec_task_defs();
        let overrides = self.spec["task_defs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let defs: Vec<Value> = overrides
            .into_iter()
            .map(|d| {
                let name = d["name"].as_str().unwrap_or_default().to_owned();
                harness::task_def(&name, d)
            })
            .collect();
        if !defs.is_empty() {
            self.api.register_task_defs(&defs);
        }
        for def in self.spec["defs"].as_array().into_iter().flatten() {
            self.put_workflow_def(def);
        }
        for file in self.spec["task_def_files"].as_array().into_iter().flatten() {
            let defs = as_list(fixture(file.as_str().unwrap_or_default()));
            self.api.register_task_defs(&defs);
        }
        let mut files = vec![self.file.clone()];
        for f in self.spec["register"].as_array().into_iter().flatten() {
            files.push(f.as_str().unwrap_or_default().to_owned());
        }
        for file in files {
            for def in as_list(fixture(&file)) {
                if def.get("tasks").is_some() {
                    self.put_workflow_def(&self.local_hosts(&def));
                }
            }
        }
    }

    /// `PUT /api/metadata/workflow`: creates or replaces the definition (several fixtures define
    /// the same name and version, as Conductor's specs do in turn); its `BulkResponse` must
    /// list no error.
    fn put_workflow_def(&self, def: &Value) {
        let name = def["name"].as_str().unwrap_or("?");
        let what = format!("register workflow definition {name}");
        let bulk = self
            .api
            .put_json("/api/metadata/workflow", &json!([def]))
            .expect_ok(&what)
            .json();
        let errors = &bulk["bulkErrorResults"];
        assert!(
            errors.as_object().is_none_or(|e| e.is_empty()),
            "{what}: {errors}"
        );
    }

    /// The definition with the public hosts its HTTP tasks call replaced by the stub.
    fn local_hosts(&self, def: &Value) -> Value {
        let mut text = def.to_string();
        for host in PUBLIC_HOSTS {
            text = text.replace(host, self.stub);
        }
        serde_json::from_str(&text).expect("a definition with replaced hosts is JSON")
    }

    fn start(&self) -> String {
        let input = match self.spec["input_file"].as_str() {
            Some(file) => fixture(file),
            None => self.spec.get("input").cloned().unwrap_or_else(|| json!({})),
        };
        let mut request = json!({
            "name": self.spec["workflow"],
            "input": input,
            "correlationId": self.correlation_id,
        });
        if let Some(version) = self.spec.get("version") {
            request["version"] = version.clone();
        }
        self.api.start_workflow_request(&request)
    }
}

fn as_list(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        one => vec![one],
    }
}

/// The workflow's tasks as `reference:STATUS`, in listed order.
fn sequence(wf: &Value) -> Vec<String> {
    harness::tasks(wf)
        .iter()
        .map(|t| {
            let reference = t["referenceTaskName"].as_str().unwrap_or_default();
            let status = t["status"].as_str().unwrap_or_default();
            format!("{reference}:{status}")
        })
        .collect()
}

/// Task types a worker does not poll for (Baton's system tasks).
const SYSTEM_TYPES: &[&str] = &[
    "FORK_JOIN",
    "FORK",
    "JOIN",
    "SWITCH",
    "DECISION",
    "DO_WHILE",
    "SUB_WORKFLOW",
    "FORK_JOIN_DYNAMIC",
    "DYNAMIC",
    "EXCLUSIVE_JOIN",
    "START_WORKFLOW",
    "HUMAN",
    "INLINE",
    "LAMBDA",
    "JSON_JQ_TRANSFORM",
    "SET_VARIABLE",
    "TERMINATE",
    "WAIT",
    "EVENT",
    "HTTP",
];

impl Run<'_> {
    /// One round of the worker: answers every task that waits for one, in the workflow and in its
    /// sub-workflows; the workflow once it is terminal.
    fn step(&mut self, id: &str) -> Option<Value> {
        let root = self.api.workflow(id);
        if harness::is_terminal_workflow_status(root["status"].as_str().unwrap_or_default()) {
            return Some(root);
        }
        for wf in self.family(root) {
            for task in harness::tasks(&wf).to_vec() {
                if self.due_now(&wf, &task) {
                    self.answer(&task);
                }
            }
        }
        None
    }

    /// The workflow and, recursively, the sub-workflows its tasks started.
    fn family(&self, root: Value) -> Vec<Value> {
        let mut all = vec![root];
        let mut i = 0;
        while i < all.len() {
            let children: Vec<String> = harness::tasks(&all[i])
                .iter()
                .filter_map(|t| t["subWorkflowId"].as_str().map(str::to_owned))
                .collect();
            for child in children {
                all.push(self.api.workflow(&child));
            }
            i += 1;
        }
        all
    }

    fn answer(&mut self, task: &Value) {
        let ty = task["taskType"].as_str().unwrap_or_default();
        let status = task["status"].as_str().unwrap_or_default();
        if status == "SCHEDULED" && !SYSTEM_TYPES.contains(&ty) && !self.unpolled(task) {
            if let Some(polled) = self.api.poll(ty, "corpus-worker") {
                self.act(&polled);
            }
        } else if status == "IN_PROGRESS" && self.completed_from_outside(ty, task) {
            self.act(task);
        }
    }

    /// WAIT and HUMAN tasks without a due time, and HTTP tasks with asyncComplete the plan
    /// answers, are completed by a task update, as Conductor's specs complete them.
    fn completed_from_outside(&self, ty: &str, task: &Value) -> bool {
        match ty {
            "WAIT" | "HUMAN" => !self.due(task),
            "HTTP" => self.plan_for(task).is_some(),
            _ => false,
        }
    }

    /// Whether a WAIT completes by itself (it has a duration or an until) and the plan does not
    /// say to complete it from outside.
    fn due(&self, task: &Value) -> bool {
        let input = &task["inputData"];
        let timed = input.get("duration").is_some() || input.get("until").is_some();
        timed && self.plan_for(task).is_none()
    }

    /// Whether the plan's next answer for the task may be given now: an answer `after` a
    /// reference waits until the workflow holds a task of that reference.
    fn due_now(&self, wf: &Value, task: &Value) -> bool {
        match self.next_answer(task).and_then(|a| a["after"].as_str()) {
            Some(after) => harness::task_by_ref(wf, after).is_some(),
            None => true,
        }
    }

    /// Whether the plan leaves the task unpolled (to let its poll timeout pass).
    fn unpolled(&self, task: &Value) -> bool {
        self.next_answer(task)
            .is_some_and(|answer| answer.get("no_poll").is_some())
    }

    /// The key of the plan's answers for a task: its reference name, else the name without the
    /// DO_WHILE iteration suffix `__N` (whose answers then run on across iterations).
    fn plan_key(&self, task: &Value) -> String {
        let reference = task["referenceTaskName"].as_str().unwrap_or_default();
        let worker = &self.spec["worker"];
        let base = reference.rsplit_once("__").map_or(reference, |(b, _)| b);
        let key = if worker.get(reference).is_none() && worker.get(base).is_some() {
            base
        } else {
            reference
        };
        key.to_owned()
    }

    /// The plan's answers for a task, if it has any.
    fn plan_for(&self, task: &Value) -> Option<&Value> {
        self.spec["worker"].get(self.plan_key(task))
    }

    /// The plan's next answer for a task (its last one once all were given).
    fn next_answer(&self, task: &Value) -> Option<&Value> {
        let index = self
            .answered
            .get(&self.plan_key(task))
            .copied()
            .unwrap_or(0);
        let answers = self.plan_for(task)?.as_array()?;
        answers.get(index).or(answers.last())
    }

    /// Gives the task the plan's next answer (complete with `{}` when the plan has none).
    fn act(&mut self, task: &Value) {
        let answer = self
            .next_answer(task)
            .cloned()
            .unwrap_or_else(|| json!({"complete": {}}));
        *self.answered.entry(self.plan_key(task)).or_default() += 1;
        self.give(task, &answer);
    }

    fn give(&self, task: &Value, answer: &Value) {
        let (status, output, reason) = if let Some(output) = answer.get("complete") {
            ("COMPLETED", output.clone(), None)
        } else if let Some(reason) = answer.get("fail") {
            ("FAILED", json!({}), reason.as_str())
        } else if let Some(reason) = answer.get("fail_terminal") {
            ("FAILED_WITH_TERMINAL_ERROR", json!({}), reason.as_str())
        } else if let Some(file) = answer.get("complete_with_file") {
            (
                "COMPLETED",
                fixture(file.as_str().unwrap_or_default()),
                None,
            )
        } else {
            assert!(answer.get("ignore").is_some(), "unknown answer {answer}");
            return;
        };
        let result = harness::task_result(task, status, output, reason, None);
        self.api.update_task(&result).expect_ok("update task");
    }
}

impl Run<'_> {
    /// The terminal status, the task sequence, and the plan's checks.
    fn check(&self, wf: &Value) {
        if std::env::var_os("CORPUS_PRINT").is_some() {
            println!(
                "ACTUAL {} {} {} {}",
                self.file,
                self.spec["workflow"],
                wf["status"],
                json!(sequence(wf))
            );
        }
        let want = &self.spec["status"];
        assert_eq!(
            &wf["status"],
            want,
            "terminal status; reason {}; tasks {:?}",
            wf["reasonForIncompletion"],
            sequence(wf)
        );
        if let Some(want) = self.spec.get("tasks") {
            assert_eq!(&json!(sequence(wf)), want, "task sequence");
        }
        if let Some(want) = self.spec["tasks_any_order"].as_array() {
            let mut want: Vec<String> = want
                .iter()
                .map(|t| t.as_str().unwrap_or("").to_owned())
                .collect();
            let mut got = sequence(wf);
            want.sort();
            got.sort();
            assert_eq!(got, want, "tasks, in any order");
        }
        if let Some(want) = self.spec["task_count"].as_u64() {
            assert_eq!(harness::tasks(wf).len() as u64, want, "number of tasks");
        }
        for (reference, want) in self.spec["children"].as_object().into_iter().flatten() {
            let child = self.linked(wf, reference);
            assert_eq!(
                &json!(sequence(&child)),
                want,
                "tasks of the workflow {reference} started"
            );
        }
        for check in self.spec["checks"].as_array().into_iter().flatten() {
            self.check_one(wf, check);
        }
        if let Some(reference) = self.spec["retry_chain"].as_str() {
            check_retry_chain(wf, reference);
        }
        for (reference, want) in self.spec["attempts"].as_object().into_iter().flatten() {
            let got = harness::attempts(wf, reference).len() as u64;
            assert_eq!(Some(got), want.as_u64(), "attempts of {reference}");
        }
        if let Some([reference, key]) = self.spec["own_task_id"].as_array().map(Vec::as_slice) {
            check_own_task_id(wf, reference.as_str().unwrap_or_default(), key);
        }
    }

    /// A value in the workflow (`at: "workflow"`), in the latest attempt of a task (`at: REF`), in
    /// the workflow a task started (`at: "started:REF"`), or in the failure workflow
    /// (`at: "failure:NAME"`): `equals` a value, is a string that `contains` a text, or an object
    /// that `has_keys`.
    fn check_one(&self, wf: &Value, check: &Value) {
        let at = check["at"].as_str().unwrap_or("workflow");
        let target = if at == "workflow" {
            wf.clone()
        } else if let Some(reference) = at.strip_prefix("started:") {
            self.linked(wf, reference)
        } else if let Some(name) = at.strip_prefix("failure:") {
            self.failure_workflow(name)
        } else {
            harness::task_by_ref(wf, at)
                .cloned()
                .unwrap_or_else(|| panic!("no task {at}"))
        };
        let path = check["path"].as_str().unwrap_or_default();
        let found = target.pointer(path).cloned().unwrap_or(Value::Null);
        if let Some(want) = check.get("equals") {
            assert_eq!(&found, want, "{at} {path}");
        }
        if let Some(part) = check["contains"].as_str() {
            let text = found.as_str().unwrap_or_default();
            assert!(
                text.contains(part),
                "{at} {path} is {found}, wants it to contain {part}"
            );
        }
        for key in check["has_keys"].as_array().into_iter().flatten() {
            let key = key.as_str().unwrap_or_default();
            assert!(
                found.get(key).is_some(),
                "{at} {path} has no key {key}: {found}"
            );
        }
    }

    /// The workflow a task started: its sub-workflow, or the one a START_WORKFLOW task output.
    fn linked(&self, wf: &Value, reference: &str) -> Value {
        let task = harness::task_by_ref(wf, reference).unwrap_or_else(|| panic!("no {reference}"));
        let id = task["subWorkflowId"]
            .as_str()
            .or(task["outputData"]["workflowId"].as_str())
            .or(task["outputData"]["subWorkflowId"].as_str())
            .unwrap_or_else(|| panic!("{reference} started no workflow: {task}"));
        self.api.workflow(id)
    }

    /// The failure workflow this run's end started (it shares the run's correlation id).
    fn failure_workflow(&self, name: &str) -> Value {
        let found = harness::wait_for(RUN_DEADLINE, "the failure workflow", || {
            self.api
                .correlated(name, &self.correlation_id)
                .into_iter()
                .next()
        });
        let id = found["workflowId"].as_str().unwrap_or_default();
        self.api.workflow(id)
    }
}

/// Every attempt of `reference` after the first names the one before it in `retriedTaskId`.
fn check_retry_chain(wf: &Value, reference: &str) {
    let attempts = harness::attempts(wf, reference);
    for pair in attempts.windows(2) {
        assert_eq!(
            pair[1]["retriedTaskId"], pair[0]["taskId"],
            "{reference} retry chain"
        );
    }
}

/// Hosts the fixtures' HTTP tasks call that the stub serves instead.
const PUBLIC_HOSTS: &[&str] = &[
    "https://orkes-api-tester.orkesconductor.com",
    "http://httpbin-server:8081",
];

/// A loopback HTTP server answering every request `200` with a small JSON body, except paths
/// under `/dddd`, which answer `404` (the e2e fixture `this_will_fail` calls such a path to fail).
fn start_http_stub() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the HTTP stub");
    let base = format!("http://{}", listener.local_addr().expect("stub address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer_http(stream));
        }
    });
    base
}

fn answer_http(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stub stream"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let (status, body) = if path.starts_with("/dddd") {
        ("404 Not Found", json!({"error": "no such path"}))
    } else {
        (
            "200 OK",
            json!({"path": path, "fact": "stub answer", "randomString": "abc"}),
        )
    };
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
}

/// Every attempt of `reference` sees its own task id in input `key` (`${CPEWF_TASK_ID}`).
fn check_own_task_id(wf: &Value, reference: &str, key: &Value) {
    let key = key.as_str().unwrap_or_default();
    for attempt in harness::attempts(wf, reference) {
        assert_eq!(
            attempt["inputData"][key], attempt["taskId"],
            "{reference} input {key}"
        );
    }
}
