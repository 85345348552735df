//! Where a workflow names a secret and the node puts its value: `${workflow.secrets.NAME}` in
//! an HTTP task's header values and in its OAuth2 grant's client secret and password. The
//! engine leaves the placeholder as it is (`engine::expr`), so the records, the log and every
//! API answer hold the name; the node that makes the call replaces it just before, and the
//! value lives only in that request.

use engine::HttpRequest;

/// What begins a placeholder.
const OPEN: &str = "${workflow.secrets.";

/// Why a placeholder could not be filled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevealError {
    #[error("the secrets store has no secret named {0:?}")]
    Missing(String),
    #[error("a ${{workflow.secrets...}} placeholder is not closed")]
    Unclosed,
    #[error(transparent)]
    Sealed(#[from] super::key::SealError),
}

/// Whether `request` names any secret.
pub fn names_secrets(request: &HttpRequest) -> bool {
    let grant = request.oauth2.as_deref();
    let grant = grant
        .into_iter()
        .flat_map(|g| [&g.client_secret, &g.password]);
    request.headers.values().any(|v| v.contains(OPEN)) || grant.flatten().any(|v| v.contains(OPEN))
}

/// Fills every placeholder of `request` with what `value` answers for its name.
pub fn fill_request(
    request: &mut HttpRequest,
    value: &dyn Fn(&str) -> Result<String, RevealError>,
) -> Result<(), RevealError> {
    for v in request.headers.values_mut() {
        *v = fill(v, value)?;
    }
    if let Some(grant) = request.oauth2.as_deref_mut() {
        for v in [&mut grant.client_secret, &mut grant.password]
            .into_iter()
            .flatten()
        {
            *v = fill(v, value)?;
        }
    }
    Ok(())
}

/// `text` with every placeholder replaced.
fn fill(
    text: &str,
    value: &dyn Fn(&str) -> Result<String, RevealError>,
) -> Result<String, RevealError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let end = after.find('}').ok_or(RevealError::Unclosed)?;
        out.push_str(&value(after[..end].trim())?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_in_headers_and_grants_are_filled_and_others_left() {
        let mut request: HttpRequest = serde_json::from_value(serde_json::json!({
            "uri": "https://api.example.com/${workflow.secrets.token}",
            "method": "GET",
            "headers": {
                "Authorization": "Bearer ${workflow.secrets.token}",
                "X-Pair": "${workflow.secrets.a}:${workflow.secrets.b}",
                "Accept-Language": "en"
            },
            "body": null, "accept": "application/json", "content_type": "application/json",
            "connect_timeout_ms": 1, "read_timeout_ms": 1,
        }))
        .expect("a request");
        assert!(names_secrets(&request));
        let value = |name: &str| match name {
            "token" => Ok("t0k".to_owned()),
            "a" | "b" => Ok(name.to_uppercase()),
            other => Err(RevealError::Missing(other.into())),
        };
        fill_request(&mut request, &value).expect("filled");
        assert_eq!(request.headers["Authorization"], "Bearer t0k");
        assert_eq!(request.headers["X-Pair"], "A:B");
        assert_eq!(request.headers["Accept-Language"], "en");
        assert!(
            request.uri.contains("${workflow.secrets.token}"),
            "only headers"
        );
        request
            .headers
            .insert("X".into(), "${workflow.secrets.none}".into());
        let missing = fill_request(&mut request, &value).expect_err("missing");
        assert_eq!(missing, RevealError::Missing("none".into()));
        request
            .headers
            .insert("X".into(), "${workflow.secrets.open".into());
        assert_eq!(
            fill_request(&mut request, &value),
            Err(RevealError::Unclosed)
        );
    }
}
