//! A call's authentication (`endpoint.authentication`, inline or a name under
//! `use.authentications`), as the `Authorization` header it sends: `basic` (username and
//! password) and `bearer` (a token). Other schemes are refused when the document is registered.

use super::{errors, Runner};
use base64::Engine as _;
use serde_json::Value;

impl Runner<'_, '_> {
    /// The `Authorization` header of a call whose evaluated arguments are `args`, if it
    /// authenticates.
    pub(super) fn authentication(&self, at: &str, args: &Value) -> Result<Option<String>, Value> {
        let Some(policy) = args.pointer("/endpoint/authentication") else {
            return Ok(None);
        };
        let policy = match policy.get("use").and_then(Value::as_str) {
            Some(name) => {
                let declared = crate::dsl::rules::child("/use/authentications", name);
                self.doc.pointer(&declared).cloned().unwrap_or_default()
            }
            None => policy.clone(),
        };
        let text = |pointer: &str| policy.pointer(pointer).and_then(Value::as_str);
        if let (Some(user), Some(password)) = (text("/basic/username"), text("/basic/password")) {
            let encoded =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            return Ok(Some(format!("Basic {encoded}")));
        }
        if let Some(token) = text("/bearer/token") {
            return Ok(Some(format!("Bearer {token}")));
        }
        let at = format!("{at}/with/endpoint/authentication");
        Err(errors::configuration_error(
            &at,
            "only basic and bearer authentication are supported",
        ))
    }
}
