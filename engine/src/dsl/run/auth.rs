//! A call's authentication (`endpoint.authentication`, inline or a name under
//! `use.authentications`), as the `Authorization` header it sends: `basic` (username and
//! password) and `bearer` (a token), each given in the document (expressions may read
//! `$secrets`) or as a secret of the operator's store (`basic: { use: <secret> }`, the secret
//! holding the scheme's fields). Other schemes are refused when the document is registered.

use super::{errors, Runner};
use base64::Engine as _;
use serde_json::Value;
use std::collections::BTreeMap;

impl Runner<'_, '_> {
    /// The `Authorization` header of a call whose evaluated arguments are `args`, if it
    /// authenticates.
    pub(super) fn authentication(&self, at: &str, args: &Value) -> Result<Option<String>, Value> {
        let Some(policy) = args.pointer("/endpoint/authentication") else {
            return Ok(None);
        };
        let at = format!("{at}/with/endpoint/authentication");
        let policy = match policy.get("use").and_then(Value::as_str) {
            Some(name) => self.declared_policy(name)?,
            None => policy.clone(),
        };
        let scheme = |name: &str| self.scheme(&policy, name, &at);
        if let Some(basic) = scheme("basic")? {
            let text = |key: &str| basic.get(key).and_then(Value::as_str).unwrap_or_default();
            let pair = format!("{}:{}", text("username"), text("password"));
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            return Ok(Some(format!("Basic {encoded}")));
        }
        if let Some(bearer) = scheme("bearer")? {
            let token = bearer
                .get("token")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Ok(Some(format!("Bearer {token}")));
        }
        Err(errors::configuration_error(
            &at,
            "only basic and bearer authentication are supported",
        ))
    }

    /// A policy declared under `use.authentications`, its expressions evaluated.
    fn declared_policy(&self, name: &str) -> Result<Value, Value> {
        let declared = crate::dsl::rules::child("/use/authentications", name);
        let policy = self.doc.pointer(&declared).cloned().unwrap_or_default();
        let vars = BTreeMap::new();
        let scope = self.scope(&vars, &Value::Null, None);
        let evaluated = scope.deep(&policy, &Value::Null);
        evaluated.map_err(|e| errors::expression_error(&declared, &e))
    }

    /// The fields of `policy`'s scheme `name`, if it has that scheme: as written, or the
    /// secret its `use` names.
    fn scheme(&self, policy: &Value, name: &str, at: &str) -> Result<Option<Value>, Value> {
        let Some(scheme) = policy.get(name) else {
            return Ok(None);
        };
        let Some(secret) = scheme.get("use").and_then(Value::as_str) else {
            return Ok(Some(scheme.clone()));
        };
        match self.ctx.catalog.secret(secret) {
            Some(fields @ Value::Object(_)) => Ok(Some(fields)),
            _ => Err(errors::configuration_error(
                &format!("{at}/{name}/use"),
                &format!("the secret '{secret}' is not in the secrets store as an object with the {name} scheme's fields"),
            )),
        }
    }
}
