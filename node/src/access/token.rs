//! Tokens: JWTs signed with HS256 by the cluster's signing key (named by `kid`), holding the
//! application (`sub`), the access key it was exchanged for (`key`), and when it was issued and
//! expires (`iat`, `exp`, seconds). Expiry is checked by [`super::authenticate`] against the
//! node's clock; a token is honoured only while its key and application are, and while the
//! signing key it names is the cluster's, or the one that key replaced, within its grace.

use super::Denied;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use proto::limits::TOKEN_TTL_SECS;
use proto::model::access::SigningKey;
use proto::model::EpochMs;
use serde::{Deserialize, Serialize};

/// A token's claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The application's id.
    pub sub: String,
    /// The access key's id.
    pub key: String,
    pub iat: i64,
    pub exp: i64,
}

/// A token for `application`'s key `key`, issued at `now`, honoured [`TOKEN_TTL_SECS`].
pub fn issue(signing: &SigningKey, application: &str, key: &str, now: EpochMs) -> String {
    let iat = now.div_euclid(1000);
    let claims = Claims {
        sub: application.to_owned(),
        key: key.to_owned(),
        iat,
        exp: iat + TOKEN_TTL_SECS,
    };
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(signing.id.clone());
    jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(&signing.secret))
        .expect("HS256 signs any claims")
}

/// The claims of `token` when the key of `keys` its header names (`kid`) signed it (its
/// expiry is not checked here).
pub fn verify(keys: &[&SigningKey], token: &str) -> Result<Claims, Denied> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| Denied::Invalid)?;
    let kid = header.kid.ok_or(Denied::Invalid)?;
    let signing = keys.iter().find(|k| k.id == kid).ok_or(Denied::Invalid)?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.validate_exp = false;
    validation.required_spec_claims.clear();
    let key = DecodingKey::from_secret(&signing.secret);
    let data =
        jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|_| Denied::Invalid)?;
    Ok(data.claims)
}
