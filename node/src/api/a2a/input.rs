//! What a request carries, read in either protocol version's spelling: a sent message (its
//! skill, its input, its context, whether to wait) and a task's id.

use super::rpc::{RpcError, CONTENT_TYPE_NOT_SUPPORTED};
use super::wire::Dialect;
use serde_json::{json, Map, Value};

/// Output modes the agent answers in (its artifacts are JSON data).
pub const OUTPUT_MODES: [&str; 2] = ["application/json", "text/plain"];

/// A sent message, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub message_id: String,
    pub context_id: Option<String>,
    /// The task the message continues, if any.
    pub task_id: Option<String>,
    /// The skill named in the message's (or the request's) metadata.
    pub skill: Option<String>,
    /// The workflow's input.
    pub input: Map<String, Value>,
    /// Whether the sender waits for the task to end (the default of both versions).
    pub wait: bool,
    /// The message as it was sent (the task's history).
    pub message: Value,
}

/// Reads `message/send`'s (and `message/stream`'s) parameters.
pub fn sent(params: &Map<String, Value>, d: Dialect) -> Result<Sent, RpcError> {
    let message = params
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(|| RpcError::invalid_params("params.message must be an object"))?;
    let text = |field: &str| {
        message
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let message_id = text("messageId")
        .filter(|id| !id.is_empty())
        .ok_or_else(|| RpcError::invalid_params("message.messageId must be a string"))?;
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| RpcError::invalid_params("message.parts must be an array"))?;
    let configuration = params.get("configuration").unwrap_or(&Value::Null);
    accepts_output(configuration)?;
    Ok(Sent {
        message_id,
        context_id: text("contextId").filter(|c| !c.is_empty()),
        task_id: text("taskId").filter(|t| !t.is_empty()),
        skill: skill_named(message.get("metadata")).or_else(|| skill_named(params.get("metadata"))),
        input: input_of(parts)?,
        wait: waits(configuration, d),
        message: Value::Object(message.clone()),
    })
}

fn skill_named(metadata: Option<&Value>) -> Option<String> {
    metadata?.get("skill")?.as_str().map(str::to_owned)
}

/// v0.3 waits unless `blocking` is false; v1.0 unless `returnImmediately` is true.
fn waits(configuration: &Value, d: Dialect) -> bool {
    match d {
        Dialect::V03 => configuration.get("blocking") != Some(&json!(false)),
        Dialect::V10 => configuration.get("returnImmediately") != Some(&json!(true)),
    }
}

/// Refuses a sender that accepts none of the agent's output modes.
fn accepts_output(configuration: &Value) -> Result<(), RpcError> {
    let Some(modes) = configuration
        .get("acceptedOutputModes")
        .and_then(Value::as_array)
    else {
        return Ok(());
    };
    let accepted = |m: &str| OUTPUT_MODES.contains(&m) || m == "*/*" || m == "application/*";
    if modes.is_empty() || modes.iter().filter_map(Value::as_str).any(accepted) {
        return Ok(());
    }
    Err(RpcError::new(
        CONTENT_TYPE_NOT_SUPPORTED,
        format!("this agent answers in {OUTPUT_MODES:?} only"),
    ))
}

/// A part of a message, whichever version spelled it.
#[derive(Debug, Clone, PartialEq)]
pub enum Part<'a> {
    Text(&'a str),
    Data(&'a Value),
    /// A file, URL or raw bytes: not an input a workflow takes.
    Other,
}

pub fn part(value: &Value) -> Part<'_> {
    let kind = value.get("kind").and_then(Value::as_str);
    match (kind, value.get("text"), value.get("data")) {
        (Some("text") | None, Some(Value::String(t)), _) => Part::Text(t),
        (Some("data") | None, _, Some(data)) => Part::Data(data),
        _ => Part::Other,
    }
}

/// The workflow's input: the first data part (a JSON object), else the first text part, parsed
/// as a JSON object if it is one, else as `{"text": ...}`.
pub fn input_of(parts: &[Value]) -> Result<Map<String, Value>, RpcError> {
    let parts: Vec<Part> = parts.iter().map(part).collect();
    if let Some(data) = parts.iter().find_map(|p| match p {
        Part::Data(d) => Some(*d),
        _ => None,
    }) {
        return match data {
            Value::Object(object) => Ok(object.clone()),
            _ => Err(RpcError::invalid_params(
                "a data part must hold a JSON object (the workflow's input)",
            )),
        };
    }
    match parts.iter().find_map(|p| match p {
        Part::Text(t) => Some(*t),
        _ => None,
    }) {
        Some(text) => Ok(match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(object)) => object,
            _ => Map::from_iter([("text".to_owned(), json!(text))]),
        }),
        None if parts.is_empty() => Err(RpcError::invalid_params("message.parts is empty")),
        None => Err(RpcError::new(
            CONTENT_TYPE_NOT_SUPPORTED,
            "a message needs a data or a text part; files are not supported",
        )),
    }
}

/// A task's id: `params.id`.
pub fn task_id(params: &Map<String, Value>) -> Result<String, RpcError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| RpcError::invalid_params("params.id must be a task id"))
}

/// `params.historyLength`, if given: how many messages of the history to answer.
pub fn history_length(params: &Map<String, Value>) -> Result<Option<usize>, RpcError> {
    match params.get("historyLength") {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n
            .as_u64()
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| RpcError::invalid_params("historyLength must be a whole number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::a2a::rpc::INVALID_PARAMS;

    fn params(message: Value) -> Map<String, Value> {
        object(json!({ "message": message }))
    }

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn data_parts_come_first_in_either_spelling() {
        let v03 = [
            json!({"kind": "text", "text": "hi"}),
            json!({"kind": "data", "data": {"a": 1}}),
        ];
        assert_eq!(input_of(&v03), Ok(object(json!({"a": 1}))));
        let v10 = [
            json!({"text": "hi"}),
            json!({"data": {"b": 2}, "mediaType": "application/json"}),
        ];
        assert_eq!(input_of(&v10), Ok(object(json!({"b": 2}))));
        let scalar = input_of(&[json!({"data": 3})]).expect_err("refused");
        assert_eq!(scalar.code, INVALID_PARAMS);
    }

    #[test]
    fn text_parts_are_json_objects_or_text() {
        let read = |part: Value| input_of(&[part]).map(Value::Object);
        assert_eq!(read(json!({"text": "{\"n\": 2}"})), Ok(json!({"n": 2})));
        assert_eq!(
            read(json!({"kind": "text", "text": "7"})),
            Ok(json!({"text": "7"}))
        );
        assert_eq!(read(json!({"text": "hello"})), Ok(json!({"text": "hello"})));
        let file = input_of(&[json!({"kind": "file", "file": {"uri": "x"}})]);
        assert_eq!(file.expect_err("refused").code, CONTENT_TYPE_NOT_SUPPORTED);
        assert_eq!(input_of(&[]).expect_err("refused").code, INVALID_PARAMS);
    }

    #[test]
    fn a_message_names_its_skill_context_and_wait() {
        let message = json!({"messageId": "m1", "role": "user", "contextId": "c",
            "parts": [{"kind": "data", "data": {}}], "metadata": {"skill": "sum"}});
        let mut p = params(message);
        let read = sent(&p, Dialect::V03).expect("read");
        assert_eq!(read.message_id, "m1");
        assert_eq!(read.context_id.as_deref(), Some("c"));
        assert_eq!((read.skill.as_deref(), read.wait), (Some("sum"), true));
        p.insert("configuration".into(), json!({"blocking": false}));
        assert!(!sent(&p, Dialect::V03).expect("read").wait);
        p.insert("configuration".into(), json!({"returnImmediately": true}));
        assert!(!sent(&p, Dialect::V10).expect("read").wait);
        p.insert(
            "configuration".into(),
            json!({"acceptedOutputModes": ["image/png"]}),
        );
        let refused = sent(&p, Dialect::V10).expect_err("refused");
        assert_eq!(refused.code, CONTENT_TYPE_NOT_SUPPORTED);
    }

    #[test]
    fn a_message_needs_an_id_and_parts() {
        let no_id = sent(&params(json!({"parts": []})), Dialect::V03).expect_err("refused");
        assert_eq!(no_id.code, INVALID_PARAMS);
        let no_parts = sent(&params(json!({"messageId": "m"})), Dialect::V03);
        assert_eq!(no_parts.expect_err("refused").code, INVALID_PARAMS);
        assert!(sent(&Map::new(), Dialect::V10).is_err());
    }
}
