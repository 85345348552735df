//! Test harness: starts real `baton` processes and talks to them over HTTP.
//!
//! Black-box only: nothing here links the engine. A [`Server`] is one `baton server` child process on a
//! loopback port with its own temporary data directory; [`Api`] is a small blocking client for the
//! Conductor REST API it serves under `/api`. Tests synchronise by waiting on conditions with a deadline
//! ([`wait_until`], [`wait_for`]), never by sleeping for a guessed amount of time.
//!
//! What this is not: a Conductor SDK. Helpers return `serde_json::Value` so tests assert on the exact
//! JSON the server produced, field names included.

pub mod brokers;
pub mod cluster;
pub mod load;
pub mod python;
pub mod release;
pub mod upstream;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

/// How long a server may take to answer `/health` after it was spawned (a debug build recovering a
/// data directory with many partitions can be slow on a 2-core box).
pub const SERVER_START_DEADLINE: Duration = Duration::from_secs(60);
/// Per-request timeout of the harness client; generous so a slow server fails a test with a clear
/// assertion rather than a transport error.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Interval between two checks of a waited-for condition.
pub const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(25);
/// Partitions of every test server: the production default, kept small for a 2-core box.
pub const PARTITIONS: usize = 8;
/// Bytes of the server log printed when a test fails.
const LOG_TAIL_BYTES: u64 = 16 * 1024;

/// The workspace root (the directory holding the root `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives one level below the workspace root")
        .to_path_buf()
}

/// The Conductor test-harness fixtures (tests/data/README.md says where they come from).
pub const FIXTURES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/conductor/test-harness");

/// Loads a fixture from `tests/data/conductor/test-harness` by file name.
pub fn fixture(file_name: &str) -> Value {
    let path = Path::new(FIXTURES_DIR).join(file_name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("fixture {} is not JSON: {e}", path.display()))
}

/// The `baton` binary under test: `$BATON_BIN`, else `<workspace>/target/debug/baton`.
pub fn baton_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("BATON_BIN") {
        return PathBuf::from(bin);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("debug").join("baton")
}

/// [`baton_bin`], or a panic saying how to build it: every process the harness spawns goes through
/// here so a missing binary fails with the fix rather than with a spawn error.
pub(crate) fn require_bin() -> PathBuf {
    let bin = baton_bin();
    if !bin.is_file() {
        panic!(
            "baton binary not found at {}: run `cargo build -p baton-node --bin baton` first \
             (or set BATON_BIN to the binary to test)",
            bin.display()
        );
    }
    bin
}

/// The last `max` bytes of a file, lossily decoded (a log tail printed when a test fails).
pub(crate) fn file_tail(path: &Path, max: u64) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Picks a free loopback port by binding port 0 and releasing it.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener
        .local_addr()
        .expect("local addr of a bound listener")
        .port()
}

/// One `baton server` child process with its own data directory and port.
///
/// Dropping it kills the child. If the test thread is panicking, the tail of the server's log is
/// printed so a failure shows what the server said.
pub struct Server {
    child: Option<Child>,
    data_dir: tempfile::TempDir,
    port: u16,
    /// How many times the process was (re)started; each start gets its own log file.
    generation: u32,
    api: Api,
    /// Arguments added to every start.
    extra_args: Vec<String>,
}

impl Server {
    /// Starts a single node with [`PARTITIONS`] partitions and waits until `/health` answers.
    pub fn start() -> Server {
        Server::start_with_args(&[])
    }

    /// Like [`Server::start`], with more arguments for `baton server` (kept for restarts).
    pub fn start_with_args(extra_args: &[String]) -> Server {
        let data_dir = tempfile::Builder::new()
            .prefix("baton-test-")
            .tempdir()
            .expect("create a temporary data directory");
        let port = free_port();
        let mut server = Server {
            child: None,
            data_dir,
            port,
            generation: 0,
            api: Api::new(&format!("http://127.0.0.1:{port}")),
            extra_args: extra_args.to_vec(),
        };
        server.spawn();
        server
    }

    /// The client for this server (cheap to clone; hand clones to worker threads).
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn base_url(&self) -> String {
        self.api.base.clone()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// Kills the process with SIGKILL (no chance to flush or shut down cleanly) and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            // `Child::kill` sends SIGKILL on Unix.
            child.kill().expect("SIGKILL the server");
            child.wait().expect("reap the killed server");
        }
    }

    /// The server process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends SIGTERM and waits up to `within` for the process to exit (then kills it); answers
    /// its exit status and how long it took, or None if it did not exit in time.
    pub fn terminate(&mut self, within: Duration) -> Option<(std::process::ExitStatus, Duration)> {
        let mut child = self.child.take()?;
        let started = Instant::now();
        cluster::signal(child.id(), "TERM");
        loop {
            if let Some(status) = child.try_wait().expect("query the server process") {
                return Some((status, started.elapsed()));
            }
            if started.elapsed() >= within {
                child.kill().expect("SIGKILL the server");
                child.wait().expect("reap the server");
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the process exits by itself (a failpoint aborted it); its exit status.
    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let child = self.child.as_mut().expect("a running server");
        wait_for(timeout, "the server process to exit", || {
            child.try_wait().expect("query the server process")
        })
    }

    /// Starts the server again on the same data directory and port, and waits for `/health`.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// As [`Server::restart`], with `between` run on the data directory while no process holds
    /// it (a test's hook into the store).
    pub fn restart_with(&mut self, between: impl FnOnce(&Path)) {
        self.kill9();
        between(&self.data_dir.path().join("data"));
        self.spawn();
    }

    /// Starts the server again without waiting for `/health`: for a start that is expected to
    /// end soon by itself (a failpoint).
    pub fn restart_unchecked(&mut self) {
        self.kill9();
        self.spawn_process();
    }

    fn log_path(&self, generation: u32) -> PathBuf {
        self.data_dir
            .path()
            .join(format!("server-{generation}.log"))
    }

    fn spawn(&mut self) {
        self.spawn_process();
        self.wait_healthy();
    }

    fn spawn_process(&mut self) {
        let bin = require_bin();
        self.generation += 1;
        let log_path = self.log_path(self.generation);
        let log = File::create(&log_path).expect("create the server log file");
        let data = self.data_dir.path().join("data");
        let mut cmd = Command::new(&bin);
        cmd.arg("server")
            .arg("--data-dir")
            .arg(&data)
            .arg("--http")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--partitions")
            .arg(PARTITIONS.to_string())
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log file handle"))
            .stderr(log);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", bin.display()));
        self.child = Some(child);
    }

    fn wait_healthy(&mut self) {
        let deadline = Instant::now() + SERVER_START_DEADLINE;
        let health = Api::with_timeout(&self.api.base, Duration::from_secs(2));
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait().expect("query the server process") {
                    self.child = None;
                    panic!(
                        "baton server exited during start-up with {status}\n--- server log ---\n{}",
                        self.log_tail()
                    );
                }
            }
            if let Ok(reply) = health.try_get("/health") {
                if reply.is_success() {
                    return;
                }
            }
            if Instant::now() >= deadline {
                let tail = self.log_tail();
                self.kill9();
                panic!(
                    "baton server on port {} did not answer GET /health within {:?}\n--- server log ---\n{tail}",
                    self.port, SERVER_START_DEADLINE
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last bytes of the current process's log.
    pub fn log_tail(&self) -> String {
        file_tail(&self.log_path(self.generation), LOG_TAIL_BYTES)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "--- baton server log (port {}, start #{}) ---\n{}\n--- end of server log ---",
                self.port,
                self.generation,
                self.log_tail()
            );
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An HTTP answer: status code and body text.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body parsed as JSON; panics with the body if it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "reply body is not JSON ({e}): status {} body {:?}",
                self.status, self.body
            )
        })
    }

    /// Panics unless the status is 2xx; `what` names the request in the message.
    pub fn expect_ok(self, what: &str) -> Reply {
        assert!(
            self.is_success(),
            "{what}: expected a 2xx answer, got {} with body {:?}",
            self.status,
            self.body
        );
        self
    }

    /// Panics unless the status is exactly `status`.
    pub fn expect_status(self, status: u16, what: &str) -> Reply {
        assert_eq!(
            self.status, status,
            "{what}: unexpected status; body {:?}",
            self.body
        );
        self
    }

    /// Asserts a Conductor `ErrorResponse` body: a JSON object whose `status` equals the HTTP status and
    /// whose `message` is a non-empty string.
    pub fn assert_error_response(&self, status: u16, what: &str) {
        assert_eq!(
            self.status, status,
            "{what}: unexpected status; body {:?}",
            self.body
        );
        let body: Value = serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{what}: error body is not JSON ({e}): {:?}", self.body));
        assert_eq!(
            body["status"].as_u64(),
            Some(u64::from(status)),
            "{what}: ErrorResponse.status must echo the HTTP status: {body}"
        );
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            !message.trim().is_empty(),
            "{what}: ErrorResponse.message must say what is wrong: {body}"
        );
    }

    /// The body as a bare id (start/rerun/update answer text/plain; tolerate a JSON string too).
    pub fn id(&self) -> String {
        let text = self.body.trim();
        match serde_json::from_str::<Value>(text) {
            Ok(Value::String(s)) => s,
            _ => text.to_string(),
        }
    }
}

/// Blocking client for the Conductor REST API of one server. Cheap to clone.
#[derive(Clone)]
pub struct Api {
    base: String,
    http: reqwest::blocking::Client,
}

impl Api {
    pub fn new(base: &str) -> Api {
        Api::with_timeout(base, REQUEST_TIMEOUT)
    }

    pub fn with_timeout(base: &str, timeout: Duration) -> Api {
        let http = reqwest::blocking::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("build the HTTP client");
        Api {
            base: base.trim_end_matches('/').to_string(),
            http,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn send(&self, req: reqwest::blocking::RequestBuilder) -> anyhow::Result<Reply> {
        let resp = req.send()?;
        let status = resp.status().as_u16();
        let body = resp.text()?;
        Ok(Reply { status, body })
    }

    // ---- raw requests: `try_*` return transport errors, the others panic on them ----

    pub fn try_get(&self, path: &str) -> anyhow::Result<Reply> {
        self.send(self.http.get(self.url(path)))
    }

    pub fn try_post_json(&self, path: &str, body: &Value) -> anyhow::Result<Reply> {
        self.send(self.http.post(self.url(path)).json(body))
    }

    pub fn try_post_raw(
        &self,
        path: &str,
        body: &str,
        content_type: &str,
    ) -> anyhow::Result<Reply> {
        self.send(
            self.http
                .post(self.url(path))
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body.to_string()),
        )
    }

    /// POSTs a JSON body (as text, byte for byte) with extra headers.
    pub fn post_with_headers(&self, path: &str, body: &str, headers: &[(String, String)]) -> Reply {
        let mut request = self
            .http
            .post(self.url(path))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        for (k, v) in headers {
            request = request.header(k.as_str(), v.as_str());
        }
        self.send(request)
            .unwrap_or_else(|e| panic!("POST {path}: {e:#}"))
    }

    /// One request with extra `headers` (a token, say) and an optional JSON body: its status
    /// and its body as JSON (a JSON string when it is not JSON).
    pub fn call(
        &self,
        headers: &[(&str, &str)],
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
        let mut request = self.http.request(method, self.url(path));
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let reply = self
            .send(request)
            .unwrap_or_else(|e| panic!("{path}: {e:#}"));
        let json = serde_json::from_str(&reply.body).unwrap_or(Value::String(reply.body));
        (reply.status, json)
    }

    /// The execution records of an event handler (`GET /api/event/executions`).
    pub fn executions(&self, handler: &str) -> Vec<Value> {
        self.get(&format!("/api/event/executions?handler={handler}"))
            .expect_ok("executions")
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn get(&self, path: &str) -> Reply {
        self.try_get(path)
            .unwrap_or_else(|e| panic!("GET {path}: {e:#}"))
    }

    pub fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.try_post_json(path, body)
            .unwrap_or_else(|e| panic!("POST {path}: {e:#}"))
    }

    pub fn post_raw(&self, path: &str, body: &str, content_type: &str) -> Reply {
        self.try_post_raw(path, body, content_type)
            .unwrap_or_else(|e| panic!("POST {path}: {e:#}"))
    }

    /// POST without a body (Conductor's retry/restart take only query parameters).
    pub fn post_empty(&self, path: &str) -> Reply {
        self.send(self.http.post(self.url(path)))
            .unwrap_or_else(|e| panic!("POST {path}: {e:#}"))
    }

    pub fn put_json(&self, path: &str, body: &Value) -> Reply {
        self.send(self.http.put(self.url(path)).json(body))
            .unwrap_or_else(|e| panic!("PUT {path}: {e:#}"))
    }

    pub fn put_empty(&self, path: &str) -> Reply {
        self.send(self.http.put(self.url(path)))
            .unwrap_or_else(|e| panic!("PUT {path}: {e:#}"))
    }

    pub fn try_delete(&self, path: &str) -> anyhow::Result<Reply> {
        self.send(self.http.delete(self.url(path)))
    }

    pub fn delete(&self, path: &str) -> Reply {
        self.try_delete(path)
            .unwrap_or_else(|e| panic!("DELETE {path}: {e:#}"))
    }

    /// Starts an instance of the registered document `version` (`namespace/name/version`)
    /// with `input`; answers its id.
    pub fn start_dsl(&self, version: &str, input: &Value) -> String {
        let path = format!("/api/dsl/workflows/{version}/instances");
        let started = self
            .post_json(&path, input)
            .expect_ok("start an instance")
            .json();
        started["id"]
            .as_str()
            .expect("the instance's id")
            .to_owned()
    }

    /// Waits until the DSL instance `id` has ended (completed, faulted or cancelled); answers
    /// its view.
    pub fn wait_dsl_ended(&self, id: &str, timeout: Duration) -> Value {
        wait_for(timeout, &format!("instance {id} to end"), || {
            let view = self
                .get(&format!("/api/dsl/instances/{id}"))
                .expect_ok("view")
                .json();
            ["completed", "faulted", "cancelled"]
                .contains(&view["phase"].as_str().unwrap_or(""))
                .then_some(view)
        })
    }

    // ---- metadata ----

    /// `POST /api/dsl/workflows` with a Serverless Workflow document (YAML); answers the
    /// status and the body as JSON (null when it is not).
    pub fn register_dsl(&self, text: &str) -> (u16, Value) {
        let reply = self
            .try_post_raw("/api/dsl/workflows", text, "application/yaml")
            .unwrap_or_else(|e| panic!("POST a document: {e:#}"));
        let body = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
        (reply.status, body)
    }

    /// `POST /api/metadata/taskdefs` with a list of task definitions.
    pub fn register_task_defs(&self, defs: &[Value]) {
        self.post_json("/api/metadata/taskdefs", &Value::Array(defs.to_vec()))
            .expect_ok("register task defs");
    }

    /// `POST /api/metadata/workflow` with one workflow definition.
    pub fn register_workflow_def(&self, def: &Value) {
        let name = def["name"].as_str().unwrap_or("?").to_string();
        self.post_json("/api/metadata/workflow", def)
            .expect_ok(&format!("register workflow def {name}"));
    }

    /// Loads a test-harness fixture by file name and registers it; returns the definition.
    pub fn register_fixture(&self, file_name: &str) -> Value {
        let def = fixture(file_name);
        self.register_workflow_def(&def);
        def
    }

    /// Registers the task definitions the Conductor specs assume; see [`spec_task_defs`].
    pub fn register_spec_task_defs(&self) {
        self.register_task_defs(&spec_task_defs());
    }

    // ---- workflows ----

    /// `POST /api/workflow/{name}` with the input as body; returns the new workflow id.
    pub fn start_workflow(&self, name: &str, input: &Value) -> String {
        let reply = self
            .post_json(&format!("/api/workflow/{name}"), input)
            .expect_ok(&format!("start workflow {name}"));
        let id = reply.id();
        assert!(!id.is_empty(), "start workflow {name}: empty id");
        id
    }

    /// `POST /api/workflow` with a StartWorkflowRequest; returns the new workflow id.
    pub fn start_workflow_request(&self, request: &Value) -> String {
        let reply = self
            .post_json("/api/workflow", request)
            .expect_ok("start workflow request");
        let id = reply.id();
        assert!(!id.is_empty(), "start workflow request: empty id");
        id
    }

    /// `POST /api/workflow` starting `name` with `idempotencyKey` = `key`, sent again while the
    /// answer is a retryable 503 (a partition changing leader, as it may just after a cluster
    /// formed on a loaded machine) for up to `within`. The key makes a repeated start answer the
    /// run an earlier attempt may have created. Returns the workflow id.
    pub fn start_workflow_keyed(
        &self,
        name: &str,
        input: &Value,
        key: &str,
        within: Duration,
    ) -> String {
        let request = json!({ "name": name, "input": input, "idempotencyKey": key });
        let deadline = Instant::now() + within;
        loop {
            let reply = self.post_json("/api/workflow", &request);
            let retryable = reply.status == 503 && reply.json()["retryable"] == json!(true);
            if !retryable || Instant::now() >= deadline {
                let id = reply
                    .expect_ok(&format!("start workflow {name} ({key})"))
                    .id();
                assert!(!id.is_empty(), "start workflow {name} ({key}): empty id");
                return id;
            }
            thread::sleep(WAIT_POLL_INTERVAL);
        }
    }

    /// `GET /api/workflow/{id}?includeTasks=true`; panics unless 200.
    pub fn workflow(&self, id: &str) -> Value {
        self.get(&format!("/api/workflow/{id}?includeTasks=true"))
            .expect_status(200, &format!("get workflow {id}"))
            .json()
    }

    /// `GET /api/workflow/{name}/correlated/{correlationId}`, closed ones too, without tasks.
    pub fn correlated(&self, workflow: &str, correlation_id: &str) -> Vec<Value> {
        self.get(&format!(
            "/api/workflow/{workflow}/correlated/{correlation_id}?includeClosed=true&includeTasks=false"
        ))
        .expect_ok("correlated")
        .json()
        .as_array()
        .cloned()
        .unwrap_or_default()
    }

    /// The workflow's status string.
    pub fn workflow_status(&self, id: &str) -> String {
        self.workflow(id)["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits until the workflow reaches `status` and returns it; fails early with the workflow if it
    /// reaches a different terminal status.
    pub fn wait_workflow_status(&self, id: &str, status: &str, timeout: Duration) -> Value {
        wait_for(
            timeout,
            &format!("workflow {id} to become {status}"),
            || {
                let wf = self.workflow(id);
                let current = wf["status"].as_str().unwrap_or_default();
                if current == status {
                    return Some(wf);
                }
                assert!(
                    !is_terminal_workflow_status(current),
                    "workflow {id} ended {current} while waiting for {status}: {wf:#}"
                );
                None
            },
        )
    }

    // ---- tasks ----

    /// `GET /api/tasks/poll/{type}?workerid=`: `Some(task)` on 200, `None` on 204.
    pub fn poll(&self, task_type: &str, worker_id: &str) -> Option<Value> {
        self.try_poll(task_type, worker_id)
            .unwrap_or_else(|e| panic!("poll {task_type}: {e:#}"))
    }

    pub fn try_poll(&self, task_type: &str, worker_id: &str) -> anyhow::Result<Option<Value>> {
        let reply = self.try_get(&format!("/api/tasks/poll/{task_type}?workerid={worker_id}"))?;
        match reply.status {
            204 => Ok(None),
            200 if reply.body.trim().is_empty() => Ok(None),
            200 => Ok(Some(
                serde_json::from_str(&reply.body).context("poll answer is not JSON")?,
            )),
            other => bail!("poll {task_type}: status {other}, body {:?}", reply.body),
        }
    }

    /// `GET /api/tasks/poll/batch/{type}?workerid=&count=&timeout=` (timeout in ms).
    pub fn batch_poll(
        &self,
        task_type: &str,
        worker_id: &str,
        count: usize,
        timeout_ms: u64,
    ) -> Vec<Value> {
        self.try_batch_poll(task_type, worker_id, count, timeout_ms)
            .unwrap_or_else(|e| panic!("batch poll {task_type}: {e:#}"))
    }

    pub fn try_batch_poll(
        &self,
        task_type: &str,
        worker_id: &str,
        count: usize,
        timeout_ms: u64,
    ) -> anyhow::Result<Vec<Value>> {
        let reply = self.try_get(&format!(
            "/api/tasks/poll/batch/{task_type}?workerid={worker_id}&count={count}&timeout={timeout_ms}"
        ))?;
        match reply.status {
            204 => Ok(Vec::new()),
            200 if reply.body.trim().is_empty() => Ok(Vec::new()),
            200 => {
                match serde_json::from_str(&reply.body).context("batch poll answer is not JSON")? {
                    Value::Array(tasks) => Ok(tasks),
                    other => bail!("batch poll {task_type}: expected a JSON array, got {other}"),
                }
            }
            other => bail!(
                "batch poll {task_type}: status {other}, body {:?}",
                reply.body
            ),
        }
    }

    /// Polls until a task of `task_type` is handed out or `timeout` passes.
    pub fn poll_until(&self, task_type: &str, worker_id: &str, timeout: Duration) -> Value {
        wait_for(timeout, &format!("a {task_type} task to poll"), || {
            self.poll(task_type, worker_id)
        })
    }

    /// `POST /api/tasks` with a TaskResult; returns the raw reply (callers decide what status they expect).
    pub fn update_task(&self, result: &Value) -> Reply {
        self.post_json("/api/tasks", result)
    }

    pub fn try_update_task(&self, result: &Value) -> anyhow::Result<Reply> {
        self.try_post_json("/api/tasks", result)
    }

    /// Completes a polled task with `output`; panics unless the server accepts it.
    pub fn complete(&self, task: &Value, output: Value) {
        self.update_task(&task_result(task, "COMPLETED", output, None, None))
            .expect_ok("complete task");
    }

    /// Fails a polled task (retriable FAILED) with `reason`; panics unless the server accepts it.
    pub fn fail(&self, task: &Value, reason: &str) {
        self.update_task(&task_result(task, "FAILED", json!({}), Some(reason), None))
            .expect_ok("fail task");
    }

    /// `GET /api/tasks/queue/sizes?taskType=...` as a map of type -> size.
    pub fn queue_sizes(&self, task_types: &[&str]) -> Value {
        let query: Vec<String> = task_types.iter().map(|t| format!("taskType={t}")).collect();
        self.get(&format!("/api/tasks/queue/sizes?{}", query.join("&")))
            .expect_status(200, "queue sizes")
            .json()
    }
}

/// A Conductor TaskResult for `task` (a polled task or a task row of a workflow).
pub fn task_result(
    task: &Value,
    status: &str,
    output: Value,
    reason: Option<&str>,
    callback_after_s: Option<u64>,
) -> Value {
    let mut result = json!({
        "workflowInstanceId": task["workflowInstanceId"],
        "taskId": task["taskId"],
        "status": status,
        "outputData": output,
        "workerId": "baton-tests",
    });
    if let Some(reason) = reason {
        result["reasonForIncompletion"] = json!(reason);
    }
    if let Some(seconds) = callback_after_s {
        result["callbackAfterSeconds"] = json!(seconds);
    }
    result
}

/// Whether a workflow status is terminal in Conductor.
pub fn is_terminal_workflow_status(status: &str) -> bool {
    matches!(status, "COMPLETED" | "FAILED" | "TIMED_OUT" | "TERMINATED")
}

/// Every attempt of the task with reference name `reference`, in the order the server lists them
/// (Conductor lists tasks by `seq`).
pub fn attempts<'a>(workflow: &'a Value, reference: &str) -> Vec<&'a Value> {
    tasks(workflow)
        .iter()
        .filter(|t| t["referenceTaskName"] == reference)
        .collect()
}

/// The latest attempt of the task with reference name `reference`, if it was scheduled.
pub fn task_by_ref<'a>(workflow: &'a Value, reference: &str) -> Option<&'a Value> {
    attempts(workflow, reference).into_iter().last()
}

/// The status of the latest attempt of `reference`, or `None` if it was never scheduled.
pub fn status_of(workflow: &Value, reference: &str) -> Option<String> {
    task_by_ref(workflow, reference).map(|t| t["status"].as_str().unwrap_or_default().to_string())
}

/// The workflow's task list (empty if absent).
pub fn tasks(workflow: &Value) -> &[Value] {
    workflow["tasks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Reference names of the workflow's tasks, in listed order.
pub fn task_refs(workflow: &Value) -> Vec<String> {
    tasks(workflow)
        .iter()
        .map(|t| {
            t["referenceTaskName"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Reads a millisecond timestamp field (Conductor sends epoch millis as numbers).
pub fn millis(value: &Value, field: &str) -> i64 {
    value[field]
        .as_i64()
        .unwrap_or_else(|| panic!("field {field} is not an integer in {value}"))
}

/// Waits until `condition` holds, checking every [`WAIT_POLL_INTERVAL`]; panics after `timeout`.
pub fn wait_until(timeout: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    wait_for(timeout, what, || condition().then_some(()));
}

/// Waits until `probe` returns `Some`, checking every [`WAIT_POLL_INTERVAL`]; panics after `timeout`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        thread::sleep(WAIT_POLL_INTERVAL);
    }
}

/// Arms the failpoint `point` for the nodes this test starts from now on
/// (`BATON_FAILPOINT=point@marker`): the first node to reach it aborts, as `kill -9` would,
/// once, leaving the answered marker path behind so later starts pass the point. nextest runs
/// each test in its own process, so the variable reaches only this test's nodes.
pub fn arm_failpoint(point: &str) -> PathBuf {
    let marker = tempfile::NamedTempFile::new().expect("a marker path");
    let marker_path = marker.path().to_owned();
    drop(marker); // the failpoint fires while the file does not exist
    arm_failpoint_at(point, &marker_path);
    marker_path
}

/// [`arm_failpoint`] with a marker path of the test's choosing (one per round of crashes).
pub fn arm_failpoint_at(point: &str, marker: &Path) {
    std::env::set_var("BATON_FAILPOINT", format!("{point}@{}", marker.display()));
}

/// A unique suffix for names and values so that asserted values cannot be coincidences.
pub fn nonce() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{:x}{:x}{:x}",
        std::process::id(),
        nanos & 0xffff_ffff,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A task definition with Conductor's required fields, overridden by `fields`.
pub fn task_def(name: &str, fields: Value) -> Value {
    let mut def = json!({
        "name": name,
        "description": name,
        "ownerEmail": "test@harness.com",
        "retryCount": 3,
        "retryLogic": "FIXED",
        "retryDelaySeconds": 0,
        "timeoutSeconds": 0,
        "timeoutPolicy": "TIME_OUT_WF",
        "responseTimeoutSeconds": 3600,
    });
    merge(&mut def, fields);
    def
}

/// Shallow-merges the fields of `patch` (an object) into `target` (an object).
pub fn merge(target: &mut Value, patch: Value) {
    if let (Some(target), Value::Object(patch)) = (target.as_object_mut(), patch) {
        for (key, value) in patch {
            target.insert(key, value);
        }
    }
}

/// Retry delay given to the spec task definitions instead of the specs' 60 s.
///
/// Conductor's specs register `integration_task_*` with `retryDelaySeconds 60` but never let a 60 s
/// delay pass: they drive retries by hand. A black-box suite can only wait for a retry to become
/// pollable, so a 60 s delay would make every retrying test take a minute. The delay value itself is
/// checked in `t20_retry_timing`; everywhere else it does not matter, so it is 0 here.
pub const SPEC_RETRY_DELAY_S: u64 = 0;

/// The task definitions Conductor's test-harness specs assume (tests/data/README.md), with
/// the retry delay of `integration_task_*` shortened to [`SPEC_RETRY_DELAY_S`].
///
/// Tests that need a different definition register an override after these (registering a task
/// definition again replaces it).
pub fn spec_task_defs() -> Vec<Value> {
    let mut defs = Vec::new();
    for i in 0..=20 {
        defs.push(task_def(
            &format!("integration_task_{i}"),
            json!({
                "retryCount": 1,
                "timeoutSeconds": 120,
                "responseTimeoutSeconds": 120,
                "retryLogic": "FIXED",
                "retryDelaySeconds": SPEC_RETRY_DELAY_S,
            }),
        ));
    }
    for i in 0..=4 {
        defs.push(task_def(
            &format!("integration_task_0_RT_{i}"),
            json!({
                "retryCount": 0,
                "timeoutSeconds": 120,
                "responseTimeoutSeconds": 120,
            }),
        ));
    }
    defs.push(task_def(
        "short_time_out",
        json!({ "timeoutSeconds": 5, "responseTimeoutSeconds": 5 }),
    ));
    defs.push(task_def(
        "task_rt",
        json!({ "responseTimeoutSeconds": 10, "retryDelaySeconds": 0 }),
    ));
    defs.push(task_def(
        "task_optional",
        json!({
            "timeoutSeconds": 5,
            "timeoutPolicy": "RETRY",
            "retryCount": 1,
            "retryDelaySeconds": 0,
            "responseTimeoutSeconds": 5,
        }),
    ));
    defs
}
