//! What a handler does with a message before its actions run: the payload is parsed (a body that
//! is not JSON is a JSON string), the condition is evaluated on its root, with string fields that
//! hold JSON expanded, in the script sandbox, and each action's fields have their `${path}`
//! placeholders resolved from that root (expanded too when the action asks: `expandInlineJSON`).

use super::pool::ScriptPool;
use super::script::{self, Limits, ScriptError};
use serde_json::Value;

/// The evaluator types a condition may name (absent = javascript).
pub const EVALUATORS: &[&str] = &["javascript", "graaljs", VALUE_PARAM];
/// The condition is a payload path (`status.ready`) whose value's truthiness decides.
pub const VALUE_PARAM: &str = "value-param";

/// Checks that a condition parses. It is wrapped in a function that is never called, so a
/// syntax error shows and nothing runs; a condition written to close that function early does
/// run, in a script host like any script.
pub async fn check_condition(scripts: &ScriptPool, condition: &str) -> Result<(), String> {
    let wrapped = format!("(function(){{\n{condition}\n}})");
    match scripts
        .evaluate(&wrapped, &Value::Null, &Limits::default())
        .await
    {
        Ok(_) | Err(ScriptError::NotJson(_)) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether a handler's condition holds for a payload (absent or blank: true). A script runs in
/// one of `scripts`' hosts.
pub async fn condition_holds(
    scripts: &ScriptPool,
    evaluator: Option<&str>,
    condition: Option<&str>,
    payload: &Value,
) -> Result<bool, ScriptError> {
    let Some(c) = condition.filter(|c| !c.trim().is_empty()) else {
        return Ok(true);
    };
    if evaluator == Some(VALUE_PARAM) {
        // Conductor's value-param: the condition names a payload path; its value decides.
        let placeholder = Value::String(format!("${{{}}}", c.trim()));
        return Ok(script::is_truthy(&engine::resolve_in(
            &placeholder,
            payload,
        )));
    }
    scripts
        .evaluate(c, payload, &Limits::default())
        .await
        .map(|v| script::is_truthy(&v))
}

/// A message body as JSON: parsed when it is JSON, else the text as a JSON string.
pub fn payload_of(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

/// Conductor's `expandInlineJSON`: string values holding a JSON object or array are replaced by
/// what they hold, recursively.
pub fn expand_inline_json(value: &Value) -> Value {
    match value {
        Value::String(s) => {
            let t = s.trim_start();
            if t.starts_with('{') || t.starts_with('[') {
                if let Ok(inner) = serde_json::from_str::<Value>(s) {
                    return expand_inline_json(&inner);
                }
            }
            value.clone()
        }
        Value::Array(items) => Value::Array(items.iter().map(expand_inline_json).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), expand_inline_json(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Resolves an action's details (any serialisable struct of Conductor's shape) against a payload.
pub fn resolve_details<T>(details: &T, payload: &Value) -> Result<T, String>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let template = serde_json::to_value(details).map_err(|e| e.to_string())?;
    let resolved = engine::resolve_in(&template, payload);
    serde_json::from_value(resolved).map_err(|e| format!("after resolving placeholders: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::model::{StartWorkflowAction, TaskDetails};
    use serde_json::json;

    #[test]
    fn placeholders_come_from_the_payload_root_and_keep_their_type() {
        let payload = json!({"orderId": "o-7", "amount": 12.5, "items": [{"sku": "a"}], "nested": {"k": true}});
        let action: StartWorkflowAction = serde_json::from_value(json!({
            "name": "fulfill_order",
            "correlationId": "${orderId}",
            "input": {"order": "${orderId}", "amount": "${amount}", "first": "${$.items[0].sku}",
                      "k": "${nested.k}", "text": "order ${orderId} of ${amount}", "missing": "${nope}",
                      "token": "${workflow.secrets.shop_token}"}
        }))
        .expect("ok");
        let got = resolve_details(&action, &payload).expect("ok");
        assert_eq!(got.correlation_id.as_deref(), Some("o-7"));
        assert_eq!(
            Value::Object(got.input),
            json!({"order": "o-7", "amount": 12.5, "first": "a", "k": true,
                   "text": "order o-7 of 12.5", "missing": null,
                   "token": "${workflow.secrets.shop_token}"}),
            "a secret is passed on by name, never resolved"
        );
    }

    #[test]
    fn inline_json_is_expanded_when_asked() {
        let payload =
            json!({"body": "{\"workflowId\": \"w1\", \"data\": \"[1,2]\"}", "plain": "{not json"});
        let expanded = expand_inline_json(&payload);
        assert_eq!(
            expanded,
            json!({"body": {"workflowId": "w1", "data": [1, 2]}, "plain": "{not json"})
        );
        let details: TaskDetails =
            serde_json::from_value(json!({"workflowId": "${body.workflowId}", "taskRefName": "t"}))
                .expect("ok");
        assert_eq!(
            resolve_details(&details, &expanded)
                .expect("ok")
                .workflow_id
                .as_deref(),
            Some("w1")
        );
    }

    #[test]
    fn bodies_that_are_not_json_are_strings() {
        assert_eq!(payload_of(b"{\"a\":1}"), json!({"a": 1}));
        assert_eq!(payload_of(b"hello"), json!("hello"));
    }
}
