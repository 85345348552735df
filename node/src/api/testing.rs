//! Test helpers for the API modules: serve a router on a loopback port and send it one raw
//! HTTP/1.0 request, so extractor and fallback behaviour is checked through real HTTP without a
//! client library. Test-only; not part of the API.

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves `app` on an ephemeral port, sends `request`, and parses the answer.
pub(crate) async fn call(app: axum::Router, request: Request) -> Response {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("request body");
    let target = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    // HTTP/1.0 so the answer is close-delimited, never chunked.
    let mut raw = format!(
        "{} {} HTTP/1.0\r\nHost: test\r\nContent-Length: {}\r\n",
        parts.method,
        target,
        body.len()
    );
    for (name, value) in parts.headers.iter() {
        raw.push_str(&format!(
            "{}: {}\r\n",
            name,
            value.to_str().expect("ascii header")
        ));
    }
    raw.push_str("\r\n");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(raw.as_bytes()).await.expect("write head");
    stream.write_all(&body).await.expect("write body");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    server.abort();

    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of head");
    let head = String::from_utf8(answer[..split].to_vec()).expect("utf-8 head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let code: u16 = status_line
        .split(' ')
        .nth(1)
        .expect("status code")
        .parse()
        .expect("numeric status");
    let mut builder = Response::builder().status(StatusCode::from_u16(code).expect("status"));
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            builder = builder.header(name.trim(), value.trim());
        }
    }
    builder
        .body(Body::from(answer[split + 4..].to_vec()))
        .expect("response")
}

/// Reads a response body as JSON.
pub(crate) async fn body_json(response: Response) -> serde_json::Value {
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    serde_json::from_slice(&bytes).expect("JSON body")
}

/// The API router over a one-node cluster (in process, data in a temporary directory), for tests
/// of the routes that reach the node.
pub(crate) struct TestApi {
    cluster: crate::testing::TestCluster,
    app: axum::Router,
}

/// A status and the body as JSON (`Null` when empty, a JSON string when the body is not JSON).
pub(crate) type Answer = (StatusCode, serde_json::Value);

impl TestApi {
    pub(crate) async fn start() -> Self {
        let cluster = crate::testing::cluster(1, 2).await;
        let doors = super::doors::Doors::default();
        let node = cluster.node(proto::NodeId(1)).clone();
        let app = super::router(node, doors, None, super::AdminDoor::Beside);
        Self { cluster, app }
    }

    /// Sends `method path` with `body` as JSON.
    pub(crate) async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Answer {
        self.send_with(method, path, body, &[]).await
    }

    /// As [`TestApi::send`], with `headers` too.
    pub(crate) async fn send_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = match body {
            Some(json) => {
                request = request.header("content-type", "application/json");
                Body::from(json.to_string())
            }
            None => Body::empty(),
        };
        let response = call(self.app.clone(), request.body(body).expect("request")).await;
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let json = if bytes.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
            })
        };
        (status, json)
    }

    /// As [`TestApi::send`], failing the test unless the answer is a success.
    pub(crate) async fn ok(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> serde_json::Value {
        let (status, json) = self.send(method, path, body).await;
        assert!(status.is_success(), "{method} {path}: {status} {json}");
        json
    }

    /// Registers task type `task` and workflow `workflow` (version 1, restartable) that runs one
    /// task of it; a failure of the task fails the workflow.
    pub(crate) async fn define(&self, workflow: &str, task: &str) {
        let def = serde_json::json!([{ "name": task, "retryCount": 0, "ownerEmail": "t@t.io" }]);
        self.ok("POST", "/api/metadata/taskdefs", Some(&def)).await;
        let def = serde_json::json!({
            "name": workflow, "version": 1, "schemaVersion": 2, "restartable": true,
            "ownerEmail": "t@t.io",
            "tasks": [{ "name": task, "taskReferenceName": "only", "type": "SIMPLE" }],
        });
        let path = "/api/metadata/workflow?overwrite=true";
        self.ok("POST", path, Some(&def)).await;
    }

    /// Starts `workflow` with `correlation_id`; answers its id.
    pub(crate) async fn start_workflow(&self, workflow: &str, correlation_id: &str) -> String {
        let request = serde_json::json!({ "name": workflow, "correlationId": correlation_id });
        let id = self.ok("POST", "/api/workflow", Some(&request)).await;
        id.as_str().expect("the id as text").to_owned()
    }

    /// The workflow `id` as the API answers it, without its tasks.
    pub(crate) async fn workflow(&self, id: &str) -> serde_json::Value {
        let path = format!("/api/workflow/{id}?includeTasks=false");
        self.ok("GET", &path, None).await
    }

    /// Polls one task of `task_type` (waiting for it) and reports it `status`.
    pub(crate) async fn finish_task(&self, task_type: &str, status: &str) -> serde_json::Value {
        let path = format!("/api/tasks/poll/{task_type}?workerid=test");
        let task = crate::testing::until("a task to poll", async || {
            let (code, task) = self.send("GET", &path, None).await;
            (code == StatusCode::OK).then_some(task)
        })
        .await;
        let result = serde_json::json!({
            "workflowInstanceId": task["workflowInstanceId"],
            "taskId": task["taskId"],
            "status": status,
            "outputData": {},
        });
        self.ok("POST", "/api/tasks", Some(&result)).await;
        task
    }

    /// Waits until `check` holds of the answer to `GET path`.
    pub(crate) async fn until_get(
        &self,
        what: &str,
        path: &str,
        check: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        crate::testing::until(what, async || {
            let (status, json) = self.send("GET", path, None).await;
            (status.is_success() && check(&json)).then_some(json)
        })
        .await
    }

    pub(crate) async fn stop(self) {
        self.cluster.stop().await;
    }
}
