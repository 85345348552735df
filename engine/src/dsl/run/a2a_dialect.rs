//! A2A 1.0 as `call: a2a` speaks it to an agent that offers nothing else: the DSL names methods
//! and shapes messages as A2A 0.3 does, so requests are translated to 1.0's names
//! (`SendMessage`, `GetTask`, ...) and shapes (`ROLE_USER`, parts without `kind`), sent with the
//! `A2A-Version: 1.0` header, and answers are read back in 0.3's shapes (a task or message
//! unwrapped, `TASK_STATE_COMPLETED` as `completed`, parts with their `kind`), so a document
//! reads the same output whichever version its agent speaks.

use serde_json::{Map, Value};

/// The header that names the protocol version of a request.
pub(super) const VERSION_HEADER: &str = "A2A-Version";
/// The version requests in 1.0's terms name.
pub(super) const VERSION: &str = "1.0";

/// A method's A2A 1.0 name (the DSL names them as v0.3 does); an unknown one as it is.
pub(super) fn method(method: &str) -> &str {
    match method {
        "message/send" => "SendMessage",
        "message/stream" => "SendStreamingMessage",
        "tasks/get" => "GetTask",
        "tasks/list" => "ListTasks",
        "tasks/cancel" => "CancelTask",
        "tasks/resubscribe" => "SubscribeToTask",
        "agent/getAuthenticatedExtendedCard" => "GetExtendedAgentCard",
        other => other,
    }
}

/// Parameters in 1.0's shapes: `configuration.blocking` as `returnImmediately`, a message's
/// role `ROLE_{ROLE}`, its parts without `kind` (`{text}`, `{data, mediaType}`, a file's
/// `{url}` or `{raw}`).
pub(super) fn params(params: &Value) -> Value {
    let mut params = params.clone();
    let configuration = params
        .get_mut("configuration")
        .and_then(Value::as_object_mut);
    if let Some(configuration) = configuration {
        if let Some(blocking) = configuration.remove("blocking") {
            let immediately = blocking == Value::Bool(false);
            configuration.insert("returnImmediately".into(), immediately.into());
        }
    }
    let Some(message) = params.get_mut("message").and_then(Value::as_object_mut) else {
        return params;
    };
    message.remove("kind");
    if let Some(Value::String(role)) = message.get_mut("role") {
        if !role.starts_with("ROLE_") {
            *role = format!("ROLE_{}", role.to_ascii_uppercase());
        }
    }
    if let Some(Value::Array(parts)) = message.get_mut("parts") {
        parts.iter_mut().for_each(part);
    }
    params
}

/// A v0.3 part (`kind` text, data or file) as 1.0 spells it.
fn part(part: &mut Value) {
    let Some(map) = part.as_object_mut() else {
        return;
    };
    let kind = map.remove("kind");
    match kind.as_ref().and_then(Value::as_str) {
        Some("data") => {
            map.entry("mediaType").or_insert("application/json".into());
        }
        Some("file") => {
            let file = map.remove("file").unwrap_or_default();
            let field = |k: &str| file.get(k).cloned();
            if let Some(uri) = field("uri") {
                map.insert("url".into(), uri);
            }
            if let Some(bytes) = field("bytes") {
                map.insert("raw".into(), bytes);
            }
            for (from, to) in [("mimeType", "mediaType"), ("name", "filename")] {
                if let Some(v) = field(from) {
                    map.insert(to.into(), v);
                }
            }
        }
        _ => {}
    }
}

/// A 1.0 result in 0.3's shapes: `{task}` / `{message}` / `{statusUpdate}` /
/// `{artifactUpdate}` unwrapped and marked with their `kind`, states and roles in 0.3's spelling, parts with their `kind`, in the status message,
/// the history, the artifacts and an update's artifact. 1.0's status updates carry no `final`:
/// the state says whether the task settled.
pub(super) fn as_v03(result: Value) -> Value {
    const WRAPPERS: [(&str, &str); 4] = [
        ("task", "task"),
        ("message", "message"),
        ("statusUpdate", "status-update"),
        ("artifactUpdate", "artifact-update"),
    ];
    let Value::Object(mut outer) = result else {
        return result;
    };
    let wrapped = WRAPPERS.iter().find(|(key, _)| outer.contains_key(*key));
    let (mut value, kind) = match wrapped {
        Some((key, kind)) => (outer.remove(*key).unwrap_or_default(), *kind),
        None => (Value::Object(outer), ""),
    };
    let Value::Object(map) = &mut value else {
        return value;
    };
    if !kind.is_empty() {
        map.entry("kind").or_insert(kind.into());
    }
    v03_object(map);
    if let Some(Value::Object(artifact)) = map.get_mut("artifact") {
        v03_object(artifact);
    }
    value
}

/// A task's or message's fields in 0.3's spelling.
fn v03_object(map: &mut Map<String, Value>) {
    if let Some(Value::String(state)) = map.get_mut("status").and_then(|s| s.get_mut("state")) {
        if let Some(name) = state.strip_prefix("TASK_STATE_") {
            *state = name.to_ascii_lowercase().replace('_', "-");
        }
    }
    if let Some(Value::String(role)) = map.get_mut("role") {
        if let Some(name) = role.strip_prefix("ROLE_") {
            *role = name.to_ascii_lowercase();
        }
    }
    if let Some(Value::Array(parts)) = map.get_mut("parts") {
        parts.iter_mut().for_each(v03_part);
    }
    if let Some(Value::Object(message)) = map.get_mut("status").and_then(|s| s.get_mut("message")) {
        message.entry("kind").or_insert("message".into());
        v03_object(message);
    }
    for list in ["history", "artifacts"] {
        if let Some(Value::Array(items)) = map.get_mut(list) {
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                if list == "history" {
                    item.entry("kind").or_insert("message".into());
                }
                v03_object(item);
            }
        }
    }
}

/// A 1.0 part with its 0.3 `kind`: `text`, `data`, or `file` (from `url` or `raw`).
fn v03_part(part: &mut Value) {
    let Some(map) = part.as_object_mut() else {
        return;
    };
    if map.contains_key("kind") {
        return;
    }
    if map.contains_key("text") {
        map.insert("kind".into(), "text".into());
    } else if map.contains_key("data") {
        map.remove("mediaType");
        map.insert("kind".into(), "data".into());
    } else if map.contains_key("url") || map.contains_key("raw") {
        let mut file = Map::new();
        for (from, to) in [
            ("url", "uri"),
            ("raw", "bytes"),
            ("mediaType", "mimeType"),
            ("filename", "name"),
        ] {
            if let Some(v) = map.remove(from) {
                file.insert(to.into(), v);
            }
        }
        map.insert("kind".into(), "file".into());
        map.insert("file".into(), Value::Object(file));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_go_out_in_1_0_shapes_and_answers_come_back_in_0_3_shapes() {
        let sent = params(&json!({"configuration": {"blocking": false},
                "message": {"kind": "message", "role": "user", "parts": [
            {"kind": "text", "text": "hi"}, {"kind": "data", "data": {"a": 1}},
            {"kind": "file", "file": {"uri": "http://f", "mimeType": "text/plain"}}]}}));
        assert_eq!(
            sent,
            json!({"configuration": {"returnImmediately": true},
                "message": {"role": "ROLE_USER", "parts": [{"text": "hi"},
                {"data": {"a": 1}, "mediaType": "application/json"},
                {"url": "http://f", "mediaType": "text/plain"}]}})
        );
        assert_eq!(method("message/send"), "SendMessage");
        assert_eq!(method("tasks/get"), "GetTask");

        let answer = json!({"task": {"id": "t", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"role": "ROLE_AGENT", "parts": [{"text": "more?"}]}},
            "artifacts": [{"artifactId": "a", "parts": [{"data": {"sum": 3}, "mediaType": "application/json"}]}]}});
        assert_eq!(
            as_v03(answer),
            json!({"kind": "task", "id": "t", "status": {"state": "input-required",
                "message": {"kind": "message", "role": "agent", "parts": [{"kind": "text", "text": "more?"}]}},
                "artifacts": [{"artifactId": "a", "parts": [{"kind": "data", "data": {"sum": 3}}]}]})
        );
        let update =
            json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}});
        assert_eq!(
            as_v03(update),
            json!({"kind": "status-update", "taskId": "t", "status": {"state": "working"}})
        );
        let artifact =
            json!({"artifactUpdate": {"taskId": "t", "artifact": {"parts": [{"text": "x"}]}}});
        assert_eq!(
            as_v03(artifact),
            json!({"kind": "artifact-update", "taskId": "t",
                "artifact": {"parts": [{"kind": "text", "text": "x"}]}})
        );
    }
}
