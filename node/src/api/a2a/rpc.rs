//! JSON-RPC 2.0 as A2A uses it: the request envelope, the method names of both protocol
//! versions, and the error codes.

use super::wire::Dialect;
use crate::service::a2a::A2aError;
use serde_json::{json, Map, Value};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const TASK_NOT_FOUND: i64 = -32001;
pub const TASK_NOT_CANCELABLE: i64 = -32002;
pub const PUSH_NOT_SUPPORTED: i64 = -32003;
pub const UNSUPPORTED_OPERATION: i64 = -32004;
pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
pub const VERSION_NOT_SUPPORTED: i64 = -32009;

/// An error answer: its code and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }
}

impl From<A2aError> for RpcError {
    fn from(e: A2aError) -> Self {
        let code = match &e {
            A2aError::TaskNotFound(_) => TASK_NOT_FOUND,
            A2aError::NotCancelable(_) => TASK_NOT_CANCELABLE,
            A2aError::Unsupported(_) => UNSUPPORTED_OPERATION,
            A2aError::InvalidParams(_) => INVALID_PARAMS,
            A2aError::Busy(_) | A2aError::Node(_) => INTERNAL_ERROR,
        };
        Self::new(code, e.to_string())
    }
}

/// What the agent serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Send,
    Stream,
    Get,
    Cancel,
    Resubscribe,
    List,
}

/// The method a name calls, and the protocol version that spells it so.
pub fn method(name: &str) -> Result<(Method, Dialect), RpcError> {
    use Dialect::{V03, V10};
    Ok(match name {
        "message/send" => (Method::Send, V03),
        "SendMessage" => (Method::Send, V10),
        "message/stream" => (Method::Stream, V03),
        "SendStreamingMessage" => (Method::Stream, V10),
        "tasks/get" => (Method::Get, V03),
        "GetTask" => (Method::Get, V10),
        "tasks/cancel" => (Method::Cancel, V03),
        "CancelTask" => (Method::Cancel, V10),
        "tasks/resubscribe" => (Method::Resubscribe, V03),
        "SubscribeToTask" => (Method::Resubscribe, V10),
        "tasks/list" => (Method::List, V03),
        "ListTasks" => (Method::List, V10),
        _ if is_push_config(name) => {
            return Err(RpcError::new(
                PUSH_NOT_SUPPORTED,
                "push notifications are not supported",
            ))
        }
        "agent/getAuthenticatedExtendedCard" | "GetExtendedAgentCard" => {
            return Err(RpcError::new(
                UNSUPPORTED_OPERATION,
                "there is no extended agent card",
            ))
        }
        _ => {
            return Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("no method '{name}'"),
            ))
        }
    })
}

fn is_push_config(name: &str) -> bool {
    name.starts_with("tasks/pushNotificationConfig/") || name.contains("TaskPushNotificationConfig")
}

/// One request: its id (answered back), method, version and parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: Value,
    pub method: Method,
    pub dialect: Dialect,
    pub params: Map<String, Value>,
}

/// Reads a request; a failure carries the id to answer with (null when unknown).
pub fn parse(body: &[u8]) -> Result<Call, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        (
            Value::Null,
            RpcError::new(PARSE_ERROR, format!("not JSON: {e}")),
        )
    })?;
    let Value::Object(mut request) = value else {
        let e = RpcError::new(INVALID_REQUEST, "a request is a JSON object (no batches)");
        return Err((Value::Null, e));
    };
    let id = match request.remove("id") {
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
        None => Value::Null,
        Some(_) => {
            let e = RpcError::new(INVALID_REQUEST, "id must be a string, a number or null");
            return Err((Value::Null, e));
        }
    };
    let fail = |e: RpcError| (id.clone(), e);
    if request.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(fail(RpcError::new(
            INVALID_REQUEST,
            "jsonrpc must be \"2.0\"",
        )));
    }
    let Some(Value::String(name)) = request.get("method") else {
        return Err(fail(RpcError::new(
            INVALID_REQUEST,
            "method must be a string",
        )));
    };
    let (method, dialect) = method(name).map_err(fail)?;
    let params = match request.remove("params") {
        Some(Value::Object(params)) => params,
        None => Map::new(),
        Some(_) => return Err(fail(RpcError::invalid_params("params must be an object"))),
    };
    Ok(Call {
        id,
        method,
        dialect,
        params,
    })
}

/// Whether an `A2A-Version` header names a version this agent speaks (none: any).
pub fn version_supported(header: Option<&str>) -> Result<(), RpcError> {
    match header.map(str::trim) {
        None | Some("") => Ok(()),
        Some(v)
            if ["0.3", "1.0"]
                .iter()
                .any(|s| v == *s || v.starts_with(&format!("{s}."))) =>
        {
            Ok(())
        }
        Some(v) => Err(RpcError::new(
            VERSION_NOT_SUPPORTED,
            format!("A2A version {v} is not supported; this agent speaks 0.3 and 1.0"),
        )),
    }
}

/// A success answer.
pub fn success(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error answer.
pub fn failure(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": error.code, "message": error.message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(body: &str) -> i64 {
        parse(body.as_bytes()).expect_err("refused").1.code
    }

    #[test]
    fn both_versions_name_each_method() {
        assert_eq!(method("message/send"), Ok((Method::Send, Dialect::V03)));
        assert_eq!(method("SendMessage"), Ok((Method::Send, Dialect::V10)));
        assert_eq!(
            method("tasks/resubscribe"),
            Ok((Method::Resubscribe, Dialect::V03))
        );
        assert_eq!(
            method("SubscribeToTask"),
            Ok((Method::Resubscribe, Dialect::V10))
        );
        assert_eq!(method("ListTasks"), Ok((Method::List, Dialect::V10)));
    }

    #[test]
    fn malformed_requests_have_their_codes() {
        assert_eq!(code_of("{"), PARSE_ERROR);
        assert_eq!(code_of("[]"), INVALID_REQUEST);
        assert_eq!(code_of(r#"{"id":1,"method":"tasks/get"}"#), INVALID_REQUEST);
        let unknown = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/nothing"}"#;
        assert_eq!(code_of(unknown), METHOD_NOT_FOUND);
        let push = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set"}"#;
        assert_eq!(code_of(push), PUSH_NOT_SUPPORTED);
        let params = r#"{"jsonrpc":"2.0","id":"a","method":"GetTask","params":[1]}"#;
        let (id, e) = parse(params.as_bytes()).expect_err("refused");
        assert_eq!((id, e.code), (json!("a"), INVALID_PARAMS));
    }

    #[test]
    fn a_request_keeps_its_id_and_params() {
        let body = r#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":"x"}}"#;
        let call = parse(body.as_bytes()).expect("parsed");
        assert_eq!(call.id, json!(7));
        assert_eq!((call.method, call.dialect), (Method::Get, Dialect::V03));
        assert_eq!(call.params["id"], "x");
    }

    #[test]
    fn service_errors_map_to_a2a_codes() {
        let code = |e: A2aError| RpcError::from(e).code;
        assert_eq!(code(A2aError::TaskNotFound("x".into())), TASK_NOT_FOUND);
        assert_eq!(
            code(A2aError::NotCancelable("x".into())),
            TASK_NOT_CANCELABLE
        );
        assert_eq!(
            code(A2aError::Unsupported("x".into())),
            UNSUPPORTED_OPERATION
        );
        assert_eq!(code(A2aError::InvalidParams("x".into())), INVALID_PARAMS);
        let node = A2aError::Node(crate::Error::Unavailable("x".into()));
        assert_eq!(code(node), INTERNAL_ERROR);
    }

    #[test]
    fn versions_are_checked_when_named() {
        for ok in [None, Some("0.3"), Some("0.3.0"), Some("1.0"), Some("1.0.1")] {
            assert_eq!(version_supported(ok), Ok(()), "{ok:?}");
        }
        let refused = version_supported(Some("2.0")).expect_err("refused");
        assert_eq!(refused.code, VERSION_NOT_SUPPORTED);
    }
}
