//! A call's authentication (`endpoint.authentication`, inline or a name under
//! `use.authentications`): `basic` (username and password) and `bearer` (a token) as the
//! `Authorization` header it sends, and `oauth2` as the grant by which the runtime obtains the
//! access token it sends ([`crate::OAuth2Grant`], an `http` call's only); each given in the
//! document (expressions may read `$secrets`) or as a secret of the operator's store
//! (`basic: { use: <secret> }`, the secret holding the scheme's fields). Other schemes are
//! refused when the document is registered.
//!
//! `$authorization` is the resolved authorization as the spec describes it, `{scheme,
//! parameter}` (`{"scheme": "Basic", "parameter": "YXBwOnB3"}`). In a call's definition (its
//! `with`) it is the basic or bearer authorization, its arguments evaluated once more with it
//! (an OAuth2 token is obtained later, by the runtime making the call). In the call's
//! `output.as` and `export.as` it is the authorization the call sent: for OAuth2 the runtime
//! shows the token it obtained in the HTTP task's output, only for a task whose `output.as` or
//! `export.as` reads `$authorization` (the token is then stored with the instance).

use super::{errors, Runner};
use crate::OAuth2Grant;
use base64::Engine as _;
use proto::model::dsl::{Body, Frame};
use proto::model::task_type;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// How a call authenticates.
pub(super) enum Authorization {
    /// The `Authorization` header to send.
    Header(String),
    /// The access token to obtain first.
    OAuth2(OAuth2Grant),
}

/// The OAuth2 token endpoint's path under the authority when the policy names none.
const TOKEN_PATH: &str = "/oauth2/token";

impl Runner<'_, '_> {
    /// The `Authorization` header of a call whose evaluated arguments are `args`, if it
    /// authenticates; an OAuth2 policy is a configuration error here (it is an `http` call's).
    pub(super) fn authentication(&self, at: &str, args: &Value) -> Result<Option<String>, Value> {
        match self.authorization(at, args)? {
            None => Ok(None),
            Some(Authorization::Header(header)) => Ok(Some(header)),
            Some(Authorization::OAuth2(_)) => Err(errors::configuration_error(
                &format!("{at}/with/endpoint/authentication"),
                "oauth2 authentication is supported on 'call: http' only",
            )),
        }
    }

    /// How a call whose evaluated arguments are `args` authenticates, if it does.
    pub(super) fn authorization(
        &self,
        at: &str,
        args: &Value,
    ) -> Result<Option<Authorization>, Value> {
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
            return Ok(Some(Authorization::Header(format!("Basic {encoded}"))));
        }
        if let Some(bearer) = scheme("bearer")? {
            let token = bearer
                .get("token")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Ok(Some(Authorization::Header(format!("Bearer {token}"))));
        }
        if let Some(oauth2) = scheme("oauth2")? {
            return Ok(Some(Authorization::OAuth2(grant(&oauth2))));
        }
        Err(errors::configuration_error(
            &at,
            "only basic, bearer and oauth2 authentication are supported",
        ))
    }

    /// `$authorization` after a call: what the call's `frame` sent.
    pub(super) fn authorization_arg(&self, frame: &Frame) -> Value {
        if let Body::A2a(call) = &frame.body {
            return call
                .authorization
                .as_deref()
                .map_or(Value::Null, descriptor);
        }
        let Some(task) = self.task(&frame.task_id) else {
            return Value::Null;
        };
        if task.task_type != task_type::HTTP {
            return Value::Null;
        }
        if let Some(shown) = task.output_data.get("authorization") {
            return shown.clone();
        }
        let request = task.input_data.get("http_request");
        let sent = request.and_then(|r| r.pointer("/headers/Authorization"));
        sent.and_then(Value::as_str).map_or(Value::Null, descriptor)
    }

    /// A call's arguments `args`, evaluated once more with `$authorization` when its `with`
    /// reads it and it authenticates by basic or bearer.
    pub(super) fn with_authorization(
        &self,
        at: &str,
        with: &Value,
        args: Value,
        input: &Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Value, Value> {
        if !reads_authorization(Some(with)) {
            return Ok(args);
        }
        let Some(Authorization::Header(header)) = self.authorization(at, &args)? else {
            return Ok(args);
        };
        let scope = self.scope(vars, input, None);
        let scope = scope.with("authorization", descriptor(&header));
        let args = scope.deep(with, input);
        args.map_err(|e| errors::expression_error(&format!("{at}/with"), &e))
    }

    /// Whether the task at `at` reads `$authorization` after its call (`output.as`,
    /// `export.as`).
    pub(super) fn reads_authorization_after(&self, at: &str) -> bool {
        let def = self.doc.pointer(at);
        let after = ["/output/as", "/export/as"];
        after
            .iter()
            .any(|p| reads_authorization(def.and_then(|d| d.pointer(p))))
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

/// An `Authorization` header as `$authorization`: `{scheme, parameter}`.
fn descriptor(header: &str) -> Value {
    let (scheme, parameter) = header.split_once(' ').unwrap_or((header, ""));
    json!({"scheme": scheme, "parameter": parameter})
}

/// Whether an expression in `value` names `$authorization`.
fn reads_authorization(value: Option<&Value>) -> bool {
    value.is_some_and(|v| v.to_string().contains("$authorization"))
}

/// The grant an `oauth2` policy's fields describe: the token endpoint under its `authority`
/// (`endpoints.token`, [`TOKEN_PATH`] when absent; an absolute URI as it is).
fn grant(oauth2: &Value) -> OAuth2Grant {
    let text = |p: &str| oauth2.pointer(p).and_then(Value::as_str).map(str::to_owned);
    let list = |p: &str| -> Vec<String> {
        let items = oauth2.pointer(p).and_then(Value::as_array);
        items
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let path = text("/endpoints/token").unwrap_or_else(|| TOKEN_PATH.into());
    let token_uri = if path.contains("://") {
        path
    } else {
        let authority = text("/authority").unwrap_or_default();
        format!(
            "{}/{}",
            authority.trim_end_matches('/'),
            path.trim_start_matches('/')
        )
    };
    OAuth2Grant {
        token_uri,
        grant: text("/grant").unwrap_or_else(|| "client_credentials".into()),
        client_id: text("/client/id").unwrap_or_default(),
        client_secret: text("/client/secret"),
        client_authentication: text("/client/authentication")
            .unwrap_or_else(|| "client_secret_post".into()),
        username: text("/username"),
        password: text("/password"),
        scopes: list("/scopes"),
        audiences: list("/audiences"),
    }
}
