//! People signing in through an external OpenID Connect issuer (`baton server --oidc-issuer
//! URL --oidc-audience AUD`): a bearer token the issuer signed (RS*, PS*, ES*, EdDSA; never a
//! shared-secret algorithm) for this audience, unexpired, names a person, whose roles are the
//! Baton role names listed in one claim (`--oidc-roles-claim`, `roles` by default). The
//! issuer's keys are fetched from its discovery document's `jwks_uri` when the node starts,
//! every [`JWKS_REFRESH`], and when a token names a key the node does not hold (at most once
//! per [`JWKS_REFETCH_MIN`]). Each node is configured alike by its operator; nothing of it is
//! replicated.

use super::{Denied, Principal};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use proto::model::access::Role;
use serde_json::Value;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

/// How often the issuer's keys are fetched again.
pub const JWKS_REFRESH: Duration = Duration::from_secs(60 * 60);
/// The least time between two fetches a token naming an unknown key may cause.
pub const JWKS_REFETCH_MIN: Duration = Duration::from_secs(60);
/// How long a fetch of the discovery document or the keys may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The algorithms a person's token may be signed with: the issuer's private keys only.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The operator's issuer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcOptions {
    /// The issuer's URL, as its tokens' `iss` says it.
    pub issuer: String,
    /// The audience its tokens must name (`aud`): the client id Baton is registered under.
    pub audience: String,
    /// The claim listing a person's Baton roles (`ADMIN`, `READ_ONLY`, ...).
    pub roles_claim: String,
}

/// The issuer and the keys this node holds of it.
pub struct Oidc {
    options: OidcOptions,
    keys: RwLock<JwkSet>,
    fetched: Mutex<Option<Instant>>,
    http: reqwest::Client,
}

impl Oidc {
    pub fn new(options: OidcOptions) -> Result<Self, String> {
        let tls = crate::events::http::tls_config()?;
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            options,
            keys: RwLock::new(JwkSet { keys: Vec::new() }),
            fetched: Mutex::new(None),
            http,
        })
    }

    /// The person `token` names, if the issuer signed it for this audience and it is unexpired.
    pub fn authenticate(&self, token: &str) -> Result<Principal, Denied> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Denied::Invalid)?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Denied::Invalid);
        }
        let key = {
            let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
            let jwk = match &header.kid {
                Some(kid) => keys.find(kid),
                None if keys.keys.len() == 1 => keys.keys.first(),
                None => None,
            };
            DecodingKey::from_jwk(jwk.ok_or(Denied::Invalid)?).map_err(|_| Denied::Invalid)?
        };
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.options.issuer]);
        validation.set_audience(&[&self.options.audience]);
        let claims =
            jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(|e| {
                match e.kind() {
                    jsonwebtoken::errors::ErrorKind::ExpiredSignature => Denied::Expired,
                    _ => Denied::Invalid,
                }
            })?;
        person(&claims.claims, &self.options.roles_claim).ok_or(Denied::Invalid)
    }

    /// Whether a refused `token` names a key this node does not hold, and the keys were not
    /// fetched within [`JWKS_REFETCH_MIN`]: then they are worth fetching again.
    pub fn worth_refetching(&self, token: &str) -> bool {
        let Ok(header) = jsonwebtoken::decode_header(token) else {
            return false;
        };
        let known = header.kid.is_some_and(|kid| {
            let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
            keys.find(&kid).is_some()
        });
        let fetched = *self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        !known && fetched.is_none_or(|at| at.elapsed() >= JWKS_REFETCH_MIN)
    }

    /// Fetches the issuer's discovery document, then its keys, and holds them.
    pub async fn refresh(&self) -> Result<(), String> {
        *self.fetched.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        let issuer = self.options.issuer.trim_end_matches('/');
        let discovery = format!("{issuer}/.well-known/openid-configuration");
        let document: Value = self.fetch(&discovery).await?;
        let jwks_uri = document["jwks_uri"]
            .as_str()
            .ok_or_else(|| format!("{discovery} names no jwks_uri"))?;
        let keys: JwkSet = self.fetch(jwks_uri).await?;
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = keys;
        Ok(())
    }

    async fn fetch<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let answer = self.http.get(url).send().await;
        let answer = answer.and_then(|a| a.error_for_status());
        let answer = answer.map_err(|e| format!("{url}: {e}"))?;
        answer.json().await.map_err(|e| format!("{url}: {e}"))
    }
}

/// The person `claims` name: `oidc:{sub}`, shown by `email`, `preferred_username` or `sub`,
/// with the Baton roles the claim `roles_claim` lists (a list, or one name; case does not
/// matter; other names are ignored). No `sub`: none.
pub fn person(claims: &Value, roles_claim: &str) -> Option<Principal> {
    let sub = claims["sub"].as_str().filter(|s| !s.is_empty())?;
    let name = ["email", "preferred_username", "sub"]
        .iter()
        .find_map(|k| claims[*k].as_str())
        .unwrap_or(sub);
    let listed = match &claims[roles_claim] {
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        Value::String(one) => vec![one.as_str()],
        _ => Vec::new(),
    };
    let roles = listed
        .iter()
        .filter_map(|r| Role::parse(&r.to_ascii_uppercase()))
        .collect();
    Some(Principal {
        application: format!("oidc:{sub}"),
        name: name.to_owned(),
        roles,
        grants: Vec::new(),
        key: "oidc".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_person_is_named_by_sub_shown_by_email_with_the_roles_listed() {
        let claims = json!({"sub": "u1", "email": "ada@example.com",
            "roles": ["read_only", "WORKFLOW_MANAGER", "payroll-admins"]});
        let p = person(&claims, "roles").expect("a person");
        assert_eq!(p.application, "oidc:u1");
        assert_eq!(p.who(), "ada@example.com (oidc:u1)");
        assert_eq!(p.roles, [Role::ReadOnly, Role::WorkflowManager].into());
        let one = person(&json!({"sub": "u2", "groups": "ADMIN"}), "groups").expect("a person");
        assert_eq!(one.name, "u2");
        assert_eq!(one.roles, [Role::Admin].into());
        assert!(person(&json!({"email": "x@example.com"}), "roles").is_none());
    }

    #[test]
    fn without_the_issuers_keys_or_with_a_shared_secret_algorithm_a_token_is_invalid() {
        let oidc = Oidc::new(OidcOptions {
            issuer: "https://id.example.com".into(),
            audience: "baton".into(),
            roles_claim: "roles".into(),
        })
        .expect("a client");
        let hs256 = jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &json!({"sub": "u1", "iss": "https://id.example.com", "aud": "baton", "exp": 9_999_999_999u64}),
            &jsonwebtoken::EncodingKey::from_secret(b"guessable"),
        )
        .expect("a token");
        assert_eq!(oidc.authenticate(&hs256).err(), Some(Denied::Invalid));
        assert_eq!(
            oidc.authenticate("not.a.token").err(),
            Some(Denied::Invalid)
        );
    }
}
