//! The guard: once access control is set up, every request to a route that is not public must
//! carry a token (`X-Authorization: <token>`, as Orkes' clients send it, or `Authorization:
//! Bearer <token>`) whose application holds a role reaching the route's family; otherwise 401
//! (with the `error` Orkes' clients renew their token on) or 403. Before it is set up, every
//! request passes. It runs after routing, so it judges the route as declared, not the path.
//! An operation on workflows it lets through (`access::AUDITED_OPERATIONS`) is recorded in the
//! audit log once it succeeded, before the answer leaves.

use super::ApiError;
use crate::access::{self, caller, Ask, Denied, Family, Principal};
use crate::Node;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use proto::model::access::{AccessType, TargetType};

/// The header Orkes' clients send their token in.
pub const TOKEN_HEADER: &str = "x-authorization";

pub async fn guard(State(node): State<Node>, mut request: Request, next: Next) -> Response {
    let anonymous = || caller::ANONYMOUS.to_owned();
    let table = node.access.table();
    if table.signing.is_none() {
        return caller::acting_as(anonymous(), next.run(request)).await;
    }
    let route = request.extensions().get::<MatchedPath>();
    let route = route.map_or("", |p| p.as_str());
    let family = access::family(request.method().as_str(), route);
    if family == Family::Public {
        return caller::acting_as(anonymous(), next.run(request)).await;
    }
    let token = token(request.headers());
    match node.access.authenticate(&table, token) {
        Err(denied) => unauthorized(denied),
        Ok(principal) if !principal.may_use(family, route) => forbidden(&principal, family),
        Ok(principal) => {
            let who = principal.who();
            let audited = access::audited_operation(request.method().as_str(), route)
                .map(|action| (action, request.uri().to_string()));
            request.extensions_mut().insert(principal);
            caller::acting_as(who, async {
                let response = next.run(request).await;
                if let Some((action, target)) = audited {
                    if response.status().is_success() {
                        node.access.record_operation(action, target).await;
                    }
                }
                response
            })
            .await
        }
    }
}

/// The request's token, if it carries one.
fn token(headers: &HeaderMap) -> Option<&str> {
    if let Some(token) = headers.get(TOKEN_HEADER) {
        return token.to_str().ok().map(str::trim);
    }
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn unauthorized(denied: Denied) -> Response {
    let error = ApiError::new(StatusCode::UNAUTHORIZED, denied.to_string());
    let mut body = serde_json::to_value(error.body()).unwrap_or_default();
    body["error"] = denied.error_code().into();
    let challenge = [(header::WWW_AUTHENTICATE, "Bearer")];
    (StatusCode::UNAUTHORIZED, challenge, Json(body)).into_response()
}

/// The principal of a request made with a token (none while access control is off).
pub type Caller = Option<axum::Extension<Principal>>;

/// 403 unless the request's principal (if access control is on) may do `ask` to the
/// resource `name`.
pub fn allow(principal: Option<&Principal>, ask: Ask, name: &str) -> Result<(), ApiError> {
    match principal {
        Some(p) if !p.may(ask, name) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "application {:?} may not {} the {} {name:?}",
                p.name,
                verb(ask.access),
                noun(ask.kind),
            ),
        )),
        _ => Ok(()),
    }
}

/// 403 unless the request's principal (if access control is on) may create the resource
/// `name` of `kind`, or update it when `exists` (a lookup run only while access control is
/// on) finds it. Answers the ask it judged.
pub async fn allow_put<E>(
    principal: Option<&Principal>,
    kind: TargetType,
    name: &str,
    exists: impl std::future::Future<Output = Result<bool, E>>,
) -> Result<Ask, ApiError>
where
    ApiError: From<E>,
{
    let Some(p) = principal else {
        return Ok(Ask::put(kind, false));
    };
    let ask = Ask::put(kind, exists.await?);
    allow(Some(p), ask, name)?;
    Ok(ask)
}

/// Whether the request's principal (if access control is on) may read the resource `name` of
/// `kind`: what a list shows it.
pub fn sees(principal: Option<&Principal>, kind: TargetType, name: &str) -> bool {
    principal.is_none_or(|p| p.may(Ask::read(kind), name))
}

fn verb(access: AccessType) -> &'static str {
    match access {
        AccessType::Create => "create",
        AccessType::Read => "read",
        AccessType::Update => "update",
        AccessType::Delete => "delete",
        AccessType::Execute => "execute",
    }
}

fn noun(kind: TargetType) -> &'static str {
    match kind {
        TargetType::TaskDef => "task type",
        TargetType::WorkflowDef => "workflows named",
        TargetType::EventHandler => "event handler",
        TargetType::WorkflowSchedule => "schedule",
        TargetType::Webhook => "webhook",
        TargetType::SecretName => "secret",
    }
}

fn forbidden(principal: &Principal, family: Family) -> Response {
    let roles: Vec<&str> = principal.roles.iter().map(|r| r.name()).collect();
    let message = format!(
        "application {:?} (roles: {}) may not use this route ({family:?})",
        principal.name,
        if roles.is_empty() {
            "none".to_owned()
        } else {
            roles.join(", ")
        },
    );
    ApiError::new(StatusCode::FORBIDDEN, message).into_response()
}
