//! A minimal blocking client for the Conductor API calls the bench makes. One per thread: each
//! reqwest blocking client has its own I/O thread, so threads do not queue behind each other.

use anyhow::{bail, Context};
use reqwest::StatusCode;
use serde_json::Value;
use std::time::Duration;

/// Upper bound on any one request (long polls included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The target refused a request for good (a 4xx answer): retrying it elsewhere cannot help.
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// The token every client sends once the target's access control is on (`--auth`): the
/// latest target's (a fresh target for the sweep sets its own).
static TOKEN: std::sync::RwLock<Option<String>> = std::sync::RwLock::new(None);

/// Has every client made from now on send `token` (`X-Authorization`, as Orkes' clients do).
pub fn use_token(token: String) {
    *TOKEN.write().unwrap_or_else(|e| e.into_inner()) = Some(token);
}

/// The headers every request carries: the token, when there is one.
pub fn default_headers() -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    let token = TOKEN.read().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(value) = token.and_then(|t| t.parse().ok()) {
        headers.insert("x-authorization", value);
    }
    headers
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::blocking::Client,
    base: String,
}

/// A workflow's status as far as the bench cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Running,
    Completed,
    /// FAILED, TERMINATED, TIMED_OUT: it will not complete.
    Failed,
}

impl Client {
    pub fn new(base: &str) -> anyhow::Result<Self> {
        Self::with_timeout(base, REQUEST_TIMEOUT)
    }

    /// A client whose requests may take up to `timeout` (an execute waits for its workflow).
    pub fn with_timeout(base: &str, timeout: Duration) -> anyhow::Result<Self> {
        Ok(Self {
            http: reqwest::blocking::Client::builder()
                .timeout(timeout)
                .default_headers(default_headers())
                .build()
                .context("cannot build the HTTP client")?,
            base: base.trim_end_matches('/').to_owned(),
        })
    }

    fn post(&self, path: &str, body: &Value) -> anyhow::Result<(StatusCode, String)> {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .json(body)
            .send()
            .with_context(|| format!("POST {path}"))?;
        let status = resp.status();
        Ok((status, resp.text().unwrap_or_default()))
    }

    fn get(&self, path: &str) -> anyhow::Result<(StatusCode, String)> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .with_context(|| format!("GET {path}"))?;
        let status = resp.status();
        Ok((status, resp.text().unwrap_or_default()))
    }

    fn post_ok(&self, path: &str, body: &Value) -> anyhow::Result<String> {
        let (status, text) = self.post(path, body)?;
        if !status.is_success() {
            bail!("POST {path}: {status}: {}", text.trim());
        }
        Ok(text)
    }

    /// `POST /api/metadata/taskdefs` with a JSON array.
    pub fn register_task_defs(&self, defs: &Value) -> anyhow::Result<()> {
        self.post_ok("/api/metadata/taskdefs", defs).map(drop)
    }

    /// `POST /api/metadata/workflow`.
    pub fn register_workflow(&self, def: &Value) -> anyhow::Result<()> {
        self.post_ok("/api/metadata/workflow", def).map(drop)
    }

    /// `POST /api/dsl/workflows?overwrite=true` with a DSL document (JSON): registers it, or
    /// replaces the version already there.
    pub fn register_dsl(&self, document: &Value) -> anyhow::Result<()> {
        self.post_ok("/api/dsl/workflows?overwrite=true", document)
            .map(drop)
    }

    /// `POST /api/workflow/{name}`; answers the new workflow's id.
    pub fn start(&self, name: &str, input: &Value) -> anyhow::Result<String> {
        self.start_at(&format!("/api/workflow/{name}"), input)
    }

    /// `POST path` with `input`, a request that starts a workflow; answers its id, whether the
    /// answer is the id as text or JSON (Conductor's) or `{"id": ...}` (a DSL instance's).
    pub fn start_at(&self, path: &str, input: &Value) -> anyhow::Result<String> {
        let text = self.post_ok(path, input)?;
        let text = text.trim();
        let id = match serde_json::from_str::<Value>(text) {
            Ok(Value::String(s)) => s,
            Ok(Value::Object(o)) => o
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            _ => text.to_owned(),
        };
        if id.is_empty() {
            bail!("POST {path} answered no id");
        }
        Ok(id)
    }

    /// `POST /api/workflow/execute/{name}/1?waitForSeconds=`: starts a workflow and answers its
    /// id and status once it finished or `wait_s` passed (then it is still running).
    pub fn execute(
        &self,
        name: &str,
        input: &Value,
        wait_s: u64,
    ) -> anyhow::Result<(String, Status)> {
        let path = execute_path(name, wait_s);
        let text = self.post_ok(&path, &execute_body(input))?;
        parse_run(&path, &text)
    }

    /// `GET /api/admin/storage`: the node's durable flushes so far.
    pub fn storage_flushes(&self) -> anyhow::Result<u64> {
        let path = "/api/admin/storage";
        let (code, text) = self.get(path)?;
        if !code.is_success() {
            bail!("GET {path}: {code}: {}", text.trim());
        }
        let v: Value = serde_json::from_str(&text).with_context(|| format!("GET {path}"))?;
        v["flushes"]
            .as_u64()
            .with_context(|| format!("GET {path}: no flushes in {text}"))
    }

    /// `GET /api/workflow/{id}`: the whole workflow with its tasks.
    pub fn workflow(&self, id: &str) -> anyhow::Result<Value> {
        self.get_json(&format!("/api/workflow/{id}"))
    }

    /// `GET /api/admin/status`: every group this node hosts, with its leader.
    pub fn groups(&self) -> anyhow::Result<Vec<Value>> {
        let v = self.get_json("/api/admin/status")?;
        Ok(v.as_array().cloned().unwrap_or_default())
    }

    fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        let (code, text) = self.get(path)?;
        if !code.is_success() {
            bail!("GET {path}: {code}: {}", text.trim());
        }
        serde_json::from_str(&text).with_context(|| format!("GET {path}"))
    }

    /// `GET /api/workflow/{id}/status`.
    pub fn status(&self, id: &str) -> anyhow::Result<Status> {
        let path = format!("/api/workflow/{id}/status");
        let (code, text) = self.get(&path)?;
        if !code.is_success() {
            bail!("GET {path}: {code}: {}", text.trim());
        }
        let wf: Value = serde_json::from_str(&text).with_context(|| format!("GET {path}"))?;
        Ok(status_of(&wf))
    }

    /// `GET /api/tasks/poll/batch/{type}`: up to `count` tasks, waiting up to `timeout_ms`.
    pub fn poll(
        &self,
        task_type: &str,
        worker: &str,
        count: usize,
        timeout_ms: u64,
    ) -> anyhow::Result<Vec<Value>> {
        let path = format!(
            "/api/tasks/poll/batch/{task_type}?workerid={worker}&count={count}&timeout={timeout_ms}"
        );
        let (code, text) = self.get(&path)?;
        match code {
            StatusCode::NO_CONTENT => Ok(Vec::new()),
            c if c.is_success() => {
                if text.trim().is_empty() {
                    return Ok(Vec::new());
                }
                let tasks: Value =
                    serde_json::from_str(&text).with_context(|| format!("GET {path}"))?;
                Ok(tasks.as_array().cloned().unwrap_or_default())
            }
            c => bail!("GET {path}: {c}: {}", text.trim()),
        }
    }

    /// `POST /api/tasks/update-v2` completing `task`; answers the next task handed out, if any.
    pub fn complete(&self, task: &Value, worker: &str) -> anyhow::Result<Option<Value>> {
        let result = serde_json::json!({
            "workflowInstanceId": task["workflowInstanceId"],
            "taskId": task["taskId"],
            "workerId": worker,
            "status": "COMPLETED",
            "outputData": { "ok": true },
        });
        let (code, text) = self.post("/api/tasks/update-v2", &result)?;
        match code {
            StatusCode::NO_CONTENT => Ok(None),
            c if c.is_success() => {
                if text.trim().is_empty() {
                    return Ok(None);
                }
                let next: Value = serde_json::from_str(&text).context("update-v2 answer")?;
                Ok(next.is_object().then_some(next))
            }
            c if c.is_client_error() => Err(anyhow::Error::new(Refused(format!(
                "POST /api/tasks/update-v2: {c}: {}",
                text.trim()
            )))),
            c => bail!("POST /api/tasks/update-v2: {c}: {}", text.trim()),
        }
    }
}

/// The async twin of [`Client::execute`], for the open loop: one task per arrival instead of a
/// thread per workflow in flight, so the load generator takes little of the CPU it shares with
/// the target.
#[derive(Clone)]
pub struct AsyncClient {
    http: reqwest::Client,
    base: String,
}

impl AsyncClient {
    /// A client whose requests may take up to `timeout`; it needs a tokio runtime to run on.
    pub fn with_timeout(base: &str, timeout: Duration) -> anyhow::Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .timeout(timeout)
                .default_headers(default_headers())
                .build()
                .context("cannot build the HTTP client")?,
            base: base.trim_end_matches('/').to_owned(),
        })
    }

    /// See [`Client::execute`].
    pub async fn execute(
        &self,
        name: &str,
        input: &Value,
        wait_s: u64,
    ) -> anyhow::Result<(String, Status)> {
        let path = execute_path(name, wait_s);
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&execute_body(input))
            .send()
            .await
            .with_context(|| format!("POST {path}"))?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            bail!("POST {path}: {status}: {}", text.trim());
        }
        parse_run(&path, &text)
    }
}

fn execute_path(name: &str, wait_s: u64) -> String {
    format!("/api/workflow/execute/{name}/1?waitForSeconds={wait_s}")
}

fn execute_body(input: &Value) -> Value {
    serde_json::json!({ "input": input })
}

/// The two fields of an execute's answer (a `WorkflowRun`) the bench reads; the rest (the tasks,
/// their inputs and outputs) is skipped without being built.
#[derive(serde::Deserialize)]
struct RunHead {
    #[serde(rename = "workflowId")]
    workflow_id: String,
    #[serde(default)]
    status: String,
}

/// An execute's answer: its workflow's id and status.
fn parse_run(path: &str, text: &str) -> anyhow::Result<(String, Status)> {
    let run: RunHead = serde_json::from_str(text).with_context(|| format!("POST {path}"))?;
    Ok((run.workflow_id, status_named(&run.status)))
}

/// The status of a workflow (or workflow run) JSON, as far as the bench cares.
fn status_of(wf: &Value) -> Status {
    status_named(wf["status"].as_str().unwrap_or_default())
}

fn status_named(status: &str) -> Status {
    match status {
        "COMPLETED" => Status::Completed,
        "RUNNING" | "PAUSED" => Status::Running,
        _ => Status::Failed,
    }
}
