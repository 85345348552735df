//! A call's authentication (`endpoint.authentication`, inline or a name under
//! `use.authentications`): `basic` (username and password) and `bearer` (a token) as the
//! `Authorization` header it sends, and `oauth2` as the grant by which the runtime obtains the
//! access token it sends ([`crate::OAuth2Grant`], an `http` call's only); each given in the
//! document (expressions may read `$secrets`) or as a secret of the operator's store
//! (`basic: { use: <secret> }`, the secret holding the scheme's fields). Other schemes are
//! refused when the document is registered.

use super::{errors, Runner};
use crate::OAuth2Grant;
use base64::Engine as _;
use serde_json::Value;
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
