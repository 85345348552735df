//! The tasks that wait on the world, as Conductor tasks the runtime already serves: `call` of a
//! function (a worker task whose type is the function's name, polled over HTTP or QUIC), `call:
//! http` (an HTTP task, performed by the leader after the commit), a function of
//! `use.functions` (its own task run with the caller's `with` as input), and `wait` (a WAIT task,
//! a durable timer). The end of a `run` of a shell command or a script is read here too.

use super::auth::Authorization;
use super::{errors, Outcome, Runner};
use proto::model::dsl::{Body, Frame};
use proto::model::{task_type, TaskStatus};
use proto::TaskId;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The calls the DSL defines that this runtime does not make.
pub(crate) const UNSUPPORTED_CALLS: [&str; 3] = ["grpc", "asyncapi", "mcp"];

impl Runner<'_, '_> {
    /// Starts a `call`.
    pub(super) fn start_call(
        &mut self,
        at: &str,
        name: &str,
        def: &Value,
        input: Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Frame, Value> {
        let target = def.get("call").and_then(Value::as_str).unwrap_or_default();
        let with = def.get("with").cloned().unwrap_or_default();
        let args = self
            .scope(vars, &input, None)
            .deep(&with, &input)
            .map_err(|e| errors::expression_error(&format!("{at}/with"), &e))?;
        let args = self.with_authorization(at, &with, args, &input, vars)?;
        let declared = crate::dsl::rules::child("/use/functions", target);
        if target == "a2a" && self.doc.pointer(&declared).is_none() {
            return self.start_a2a(at, name, &args, input);
        }
        let task_id = match self.doc.pointer(&declared).cloned() {
            Some(function) => self.call_function(at, name, &function, args, vars)?,
            None if target == "http" => {
                self.call_target(at, name, target, fill_templates(args, &input))?
            }
            None => self.call_target(at, name, target, args)?,
        };
        Ok(external(at, name, task_id, input))
    }

    /// A function of `use.functions`: its own call, its `with` evaluated on the caller's
    /// arguments.
    fn call_function(
        &mut self,
        at: &str,
        name: &str,
        function: &Value,
        input: Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<TaskId, Value> {
        let target = function
            .get("call")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let with = function.get("with").cloned().unwrap_or_default();
        let args = self
            .scope(vars, &input, None)
            .deep(&with, &input)
            .map_err(|e| errors::expression_error(&format!("{at}/call"), &e))?;
        let args = match target {
            "http" => fill_templates(args, &input),
            _ => args,
        };
        self.call_target(at, name, target, args)
    }

    /// A built-in call, or a worker's function.
    fn call_target(
        &mut self,
        at: &str,
        name: &str,
        target: &str,
        args: Value,
    ) -> Result<TaskId, Value> {
        if target == "http" {
            let mut request = http_request(&args);
            match self.authorization(at, &args)? {
                Some(Authorization::Header(header)) => {
                    if let Some(headers) = request.get_mut("headers") {
                        headers["Authorization"] = header.into();
                    }
                }
                Some(Authorization::OAuth2(grant)) => {
                    request["oauth2"] = serde_json::to_value(grant).unwrap_or_default();
                    if self.reads_authorization_after(at) {
                        request[proto::model::HTTP_SHOW_TOKEN] = true.into();
                    }
                }
                None => {}
            }
            let output = args.get("output").cloned().unwrap_or("content".into());
            let input = json!({"http_request": request, "output": output});
            return Ok(self.open_task(at, name, task_type::HTTP, "", &input));
        }
        if target == "openapi" {
            return self.start_openapi(at, name, &args);
        }
        if UNSUPPORTED_CALLS.contains(&target)
            || target == "a2a"
            || target.contains(':')
            || target.contains('@')
        {
            let detail = format!("'call: {target}' is not supported by this runtime");
            return Err(errors::configuration_error(&format!("{at}/call"), &detail));
        }
        Ok(self.open_task(at, name, task_type::SIMPLE, target, &args))
    }

    /// Starts a `wait`: a WAIT task due after its duration.
    pub(super) fn start_wait(
        &mut self,
        at: &str,
        name: &str,
        def: &Value,
        input: Value,
    ) -> Result<Frame, Value> {
        let duration = def.get("wait").unwrap_or(&Value::Null);
        let ms = crate::dsl::millis(duration)
            .map_err(|e| errors::configuration_error(&format!("{at}/wait"), &e))?;
        let due = self.ctx.now.saturating_add(ms);
        let task_id = self.open_wait(at, name, due, &input);
        Ok(external(at, name, task_id, input))
    }

    /// A WAIT task at `at` that completes at `due`.
    pub(super) fn open_wait(&mut self, at: &str, name: &str, due: i64, input: &Value) -> TaskId {
        let id = self.open_task(at, name, task_type::WAIT, "", input);
        if let Some(i) = self.ctx.index_of(&id) {
            self.ctx.wf.tasks[i].wait_timeout = due.max(1);
        }
        id
    }

    /// How a call or a wait ended, once its Conductor task did.
    pub(super) fn call_outcome(&mut self, frame: &mut Frame) -> Outcome {
        let Some(task) = self.task(&frame.task_id) else {
            let detail = "the task's record is missing";
            return Outcome::Fault(errors::runtime_error(&frame.at, detail));
        };
        if !task.status.is_terminal() {
            return Outcome::Pending;
        }
        let fetched =
            task.status == TaskStatus::Completed && task.input_data.contains_key("openapi");
        if fetched {
            if let Some(next) = self.openapi_operation(frame) {
                return next;
            }
        }
        let Some(task) = self.task(&frame.task_id) else {
            return Outcome::Pending;
        };
        let output = Value::Object(task.output_data.clone());
        let reason = task.reason_for_incompletion.clone().unwrap_or_default();
        match (task.task_type.as_str(), task.status) {
            (task_type::WAIT, _) => Outcome::done(frame.input.clone()),
            (crate::process::PROCESS_TASK_TYPE, TaskStatus::Completed) => {
                Outcome::done(crate::process::shaped(&task.input_data, &task.output_data))
            }
            (task_type::HTTP, TaskStatus::Completed) => {
                let mode = task.input_data.get("output").and_then(Value::as_str);
                Outcome::done(http_output(
                    &task.input_data,
                    &output,
                    mode.unwrap_or("content"),
                ))
            }
            (task_type::HTTP, _) => {
                let status = output
                    .pointer("/response/statusCode")
                    .and_then(Value::as_u64);
                let status = status.and_then(|s| u16::try_from(s).ok()).unwrap_or(500);
                let kind = errors::Kind::Communication;
                Outcome::Fault(errors::with_status(kind, status, &frame.at, &reason))
            }
            // The event as published (the task's input), without the gate's bookkeeping.
            (task_type::EVENT, TaskStatus::Completed) => {
                Outcome::done(Value::Object(task.input_data.clone()))
            }
            (task_type::EVENT, _) => {
                let kind = errors::Kind::Communication;
                Outcome::Fault(errors::with_status(kind, 500, &frame.at, &reason))
            }
            (task_type::SUB_WORKFLOW, TaskStatus::Completed) => {
                // The child's output as it gave it, without Conductor's `subWorkflowId`.
                let mut output = task.output_data.clone();
                output.remove("subWorkflowId");
                Outcome::done(crate::dsl::instance_output(&output))
            }
            (_, TaskStatus::Completed | TaskStatus::CompletedWithErrors) => Outcome::done(output),
            (_, TaskStatus::TimedOut) => Outcome::Fault(errors::timeout_error(&frame.at, &reason)),
            _ => Outcome::Fault(errors::runtime_error(&frame.at, &reason)),
        }
    }
}

/// A task that waits on its Conductor task `task_id`.
pub(super) fn external(at: &str, name: &str, task_id: TaskId, input: Value) -> Frame {
    Frame {
        at: at.to_owned(),
        name: name.to_owned(),
        task_id,
        input,
        body: Body::External,
        deadline: None,
    }
}

/// An endpoint's URI: the endpoint itself, or its `uri`.
pub(super) fn endpoint_uri(endpoint: Option<&Value>) -> String {
    match endpoint {
        Some(Value::String(uri)) => uri.clone(),
        Some(other) => other
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        None => String::new(),
    }
}

/// Conductor's `http_request` for the DSL's HTTP arguments.
fn http_request(args: &Value) -> Value {
    let uri = endpoint_uri(args.get("endpoint"));
    let query = args.get("query").and_then(Value::as_object);
    let uri = with_query(uri, query);
    let method = args.get("method").and_then(Value::as_str).unwrap_or("get");
    let mut request = Map::new();
    request.insert("uri".into(), uri.into());
    request.insert("method".into(), method.to_ascii_uppercase().into());
    let headers = args.get("headers").and_then(Value::as_object);
    let text: Map<String, Value> = headers
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            (
                k.clone(),
                v.as_str()
                    .map_or_else(|| v.to_string(), str::to_owned)
                    .into(),
            )
        })
        .collect();
    request.insert("headers".into(), Value::Object(text));
    if let Some(body) = args.get("body") {
        request.insert("body".into(), body.clone());
    }
    Value::Object(request)
}

/// `uri` with the query parameters appended.
fn with_query(uri: String, query: Option<&Map<String, Value>>) -> String {
    let Some(query) = query.filter(|q| !q.is_empty()) else {
        return uri;
    };
    let pairs: Vec<String> = query
        .iter()
        .map(|(k, v)| {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            format!("{}={}", encode(k), encode(&v))
        })
        .collect();
    let sep = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{sep}{}", pairs.join("&"))
}

/// Percent-encodes what a query component may not hold as it is (RFC 3986 unreserved kept).
pub(super) fn encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A function's HTTP arguments with the URI template's `{name}` filled from its input's
/// top-level values.
fn fill_templates(mut args: Value, input: &Value) -> Value {
    let fill = |uri: &str| {
        let mut out = uri.to_owned();
        for (k, v) in input.as_object().into_iter().flatten() {
            let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            out = out.replace(&format!("{{{k}}}"), &encode(&text));
        }
        out
    };
    if let Some(endpoint) = args.get_mut("endpoint") {
        match endpoint {
            Value::String(uri) => *uri = fill(uri),
            Value::Object(map) => {
                if let Some(Value::String(uri)) = map.get_mut("uri") {
                    *uri = fill(uri);
                }
            }
            _ => {}
        }
    }
    args
}

/// What an HTTP call gives the DSL: the body (`content`), the whole response (`response`), or
/// the body base64-encoded (`raw`; the node decodes a JSON body, so a JSON body is encoded as
/// its compact text).
fn http_output(input: &proto::model::Json, output: &Value, mode: &str) -> Value {
    let response = output.get("response").cloned().unwrap_or_default();
    let body = response.get("body").cloned().unwrap_or_default();
    match mode {
        "response" => json!({
            "request": input.get("http_request"),
            "statusCode": response.get("statusCode"),
            "headers": response.get("headers"),
            "content": body,
        }),
        "raw" => {
            use base64::Engine as _;
            let text = match body {
                Value::String(text) => text,
                other => other.to_string(),
            };
            Value::String(base64::engine::general_purpose::STANDARD.encode(text))
        }
        _ => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_arguments_become_conductors_request() {
        let args = json!({"method": "get", "endpoint": {"uri": "http://h/pets"},
            "query": {"q": "a b", "n": 2}, "headers": {"x": 1}});
        let request = http_request(&args);
        assert_eq!(request["uri"], "http://h/pets?q=a%20b&n=2");
        assert_eq!(request["method"], "GET");
        assert_eq!(request["headers"]["x"], "1");
        let answer = json!({"response": {"statusCode": 200, "body": "hi"}});
        assert_eq!(
            http_output(&Default::default(), &answer, "raw"),
            json!("aGk=")
        );
        let filled = fill_templates(
            json!({"endpoint": "http://h/pet/{petId}"}),
            &json!({"petId": 7}),
        );
        assert_eq!(filled["endpoint"], "http://h/pet/7");
    }
}
