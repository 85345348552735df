//! Applications, their roles and access keys (Orkes' `/api/applications` paths, which its
//! clients' `OrkesAuthorizationClient` calls), and `POST /api/token`, which exchanges an access
//! key for a token as Orkes does, so `conductor-python`'s `AuthenticationSettings` work
//! unchanged. Every path but the token's is for administrators ([`crate::access::Family::Admin`]).

use super::error::ApiResult;
use super::extract::{Body, Params, PathArgs};
use super::ApiError;
use crate::access::Principal;
use crate::Node;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use proto::model::access::{
    AccessKeyView, AccessType, Application, AuthorizationRequest, CreatedAccessKey, Subject,
    Target, TokenAnswer, TokenRequest,
};
use serde::Deserialize;
use std::collections::BTreeMap;

/// `POST /api/applications`' and `PUT /api/applications/{id}`'s body.
#[derive(Debug, Deserialize)]
pub struct ApplicationRequest {
    pub name: String,
}

/// Who made the request (`anonymous` before access control is set up).
fn by(principal: &Option<Extension<Principal>>) -> String {
    principal
        .as_ref()
        .map_or_else(|| "anonymous".to_owned(), |p| p.name.clone())
}

/// `POST /api/token`: a token for an access key; 401 for an unknown, wrong or revoked key, 404
/// while access control is not set up (Orkes' clients then go on without tokens).
pub async fn token(
    State(node): State<Node>,
    Body(request): Body<TokenRequest>,
) -> ApiResult<Json<TokenAnswer>> {
    let token = node.access.token(request).await?;
    Ok(Json(TokenAnswer { token }))
}

/// `GET /api/applications`.
pub async fn list(State(node): State<Node>) -> ApiResult<Json<Vec<Application>>> {
    Ok(Json(node.access.applications().await?))
}

/// `POST /api/applications`: a new application, without roles or keys.
pub async fn create(
    State(node): State<Node>,
    principal: Option<Extension<Principal>>,
    Body(request): Body<ApplicationRequest>,
) -> ApiResult<Json<Application>> {
    let app = node
        .access
        .create_application(&request.name, &by(&principal))
        .await?;
    Ok(Json(app))
}

/// `GET /api/applications/{id}`.
pub async fn get(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<Json<Application>> {
    Ok(Json(node.access.application(&id).await?))
}

/// `PUT /api/applications/{id}`: renames it.
pub async fn rename(
    State(node): State<Node>,
    principal: Option<Extension<Principal>>,
    PathArgs(id): PathArgs<String>,
    Body(request): Body<ApplicationRequest>,
) -> ApiResult<Json<Application>> {
    let app = node
        .access
        .rename_application(&id, &request.name, &by(&principal))
        .await?;
    Ok(Json(app))
}

/// `DELETE /api/applications/{id}`: the application and its keys; their tokens stop working.
pub async fn delete(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.access.delete_application(&id).await?;
    Ok(StatusCode::OK)
}

/// `POST /api/applications/{id}/roles/{role}`.
pub async fn grant(
    State(node): State<Node>,
    PathArgs((id, role)): PathArgs<(String, String)>,
) -> ApiResult<StatusCode> {
    node.access.set_role(&id, &role, true).await?;
    Ok(StatusCode::OK)
}

/// `DELETE /api/applications/{id}/roles/{role}`.
pub async fn withdraw(
    State(node): State<Node>,
    PathArgs((id, role)): PathArgs<(String, String)>,
) -> ApiResult<StatusCode> {
    node.access.set_role(&id, &role, false).await?;
    Ok(StatusCode::OK)
}

/// `POST /api/applications/{id}/accessKeys`: a new key, with its secret (shown this once).
pub async fn create_key(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<Json<CreatedAccessKey>> {
    Ok(Json(node.access.create_key(&id).await?))
}

/// `GET /api/applications/{id}/accessKeys`: the keys, without secrets.
pub async fn keys(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<Json<Vec<AccessKeyView>>> {
    Ok(Json(node.access.keys(&id).await?))
}

/// `POST /api/applications/{id}/accessKeys/{key}/status`: deactivates an active key (its
/// tokens stop working) or activates an inactive one.
pub async fn toggle_key(
    State(node): State<Node>,
    PathArgs((id, key)): PathArgs<(String, String)>,
) -> ApiResult<Json<AccessKeyView>> {
    Ok(Json(node.access.toggle_key(&id, &key).await?))
}

/// `DELETE /api/applications/{id}/accessKeys/{key}`.
pub async fn delete_key(
    State(node): State<Node>,
    PathArgs((id, key)): PathArgs<(String, String)>,
) -> ApiResult<StatusCode> {
    node.access.delete_key(&id, &key).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/applications/key/{key}`: the application holding a key.
pub async fn of_key(
    State(node): State<Node>,
    PathArgs(key): PathArgs<String>,
) -> ApiResult<Json<Application>> {
    Ok(Json(node.access.application_of_key(&key).await?))
}

/// `POST /api/admin/access`: sets access control up on a running cluster, as `baton server
/// --auth` does, answering the administrator's key (the only time its secret is shown); 409
/// when it is set up already.
pub async fn set_up(State(node): State<Node>) -> ApiResult<Json<CreatedAccessKey>> {
    match node.access.set_up().await? {
        Some(key) => Ok(Json(key)),
        None => Err(ApiError::new(
            StatusCode::CONFLICT,
            "access control is set up already",
        )),
    }
}

/// `POST /api/admin/access/signing-key?retireNow=`: replaces the key tokens are signed with.
/// Tokens the old key signed are honoured for their lifetime (an hour), or, with
/// `retireNow=true` (a key thought leaked), refused from now: clients fetch new ones.
pub async fn rotate_signing_key(
    State(node): State<Node>,
    params: Params,
) -> ApiResult<Json<serde_json::Value>> {
    let retire_now = params.bool("retireNow", false)?;
    let (id, until) = node.access.rotate_signing_key(retire_now).await?;
    Ok(Json(
        serde_json::json!({"id": id, "replacedKeyHonouredUntil": until}),
    ))
}

/// `POST /api/auth/authorization`: grants access on a target to an application (Orkes'
/// subject `{"type": "USER", "id": "app:ID"}`).
pub async fn grant_access(
    State(node): State<Node>,
    Body(request): Body<AuthorizationRequest>,
) -> ApiResult<StatusCode> {
    node.access.set_grant(request, true).await?;
    Ok(StatusCode::OK)
}

/// `DELETE /api/auth/authorization`: takes the access it names away.
pub async fn remove_access(
    State(node): State<Node>,
    Body(request): Body<AuthorizationRequest>,
) -> ApiResult<StatusCode> {
    node.access.set_grant(request, false).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/auth/authorization/{type}/{id}`: who holds which access on the target.
pub async fn permissions(
    State(node): State<Node>,
    PathArgs((kind, id)): PathArgs<(String, String)>,
) -> ApiResult<Json<BTreeMap<AccessType, Vec<Subject>>>> {
    let kind = serde_json::from_value(serde_json::Value::String(kind.clone())).map_err(|_| {
        ApiError::bad_request(format!(
            "no target type {kind:?}: grants name TASK_DEF targets"
        ))
    })?;
    let target = Target { kind, id };
    Ok(Json(node.access.permissions(&target).await?))
}

/// `GET /api/admin/audit?before=SEQ&limit=N`: the audit log, newest first (100 entries by
/// default); `before` pages back from an entry's `seq`.
pub async fn audit(
    State(node): State<Node>,
    params: super::extract::Params,
) -> ApiResult<Json<Vec<proto::record::audit::AuditEntry>>> {
    let before = params.num::<u64>("before")?;
    let limit = params.num_or::<u64>("limit", 100)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    Ok(Json(node.access.audit(before, limit).await?))
}

#[cfg(test)]
mod tests {
    use crate::api::testing::TestApi;
    use axum::http::StatusCode;
    use serde_json::json;

    #[tokio::test]
    async fn tokens_wait_for_set_up_and_a_replaced_signing_key_honours_its_own_until_retired() {
        let api = TestApi::start().await;
        let key = json!({"keyId": "k", "keySecret": "s"});
        let (status, answer) = api.send("POST", "/api/token", Some(&key)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains("not set up"), "{answer}");
        let created = api.ok("POST", "/api/admin/access", None).await;
        let key = json!({"keyId": created["id"], "keySecret": created["secret"]});
        let (status, answer) = api.send("POST", "/api/token", Some(&key)).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert!(answer["token"].is_string(), "{answer}");
        let old = answer["token"].as_str().unwrap_or_default().to_owned();
        let read = |token: &str| {
            let api = &api;
            let token = token.to_owned();
            async move {
                let headers = [("X-Authorization", token.as_str())];
                api.send_with("GET", "/api/metadata/taskdefs", None, &headers)
                    .await
                    .0
            }
        };
        assert_eq!(read(&old).await, StatusCode::OK);
        // Rotated: the old key's tokens are honoured for their lifetime.
        let rotate = "/api/admin/access/signing-key";
        let headers = [("X-Authorization", old.as_str())];
        let (status, rotated) = api.send_with("POST", rotate, None, &headers).await;
        assert_eq!(status, StatusCode::OK, "{rotated}");
        assert!(rotated["replacedKeyHonouredUntil"].is_i64(), "{rotated}");
        assert_eq!(read(&old).await, StatusCode::OK);
        // Retired now: they are refused at once, and a new token works.
        let now = format!("{rotate}?retireNow=true");
        let (status, rotated) = api.send_with("POST", &now, None, &headers).await;
        assert_eq!(status, StatusCode::OK, "{rotated}");
        assert_eq!(read(&old).await, StatusCode::UNAUTHORIZED);
        let (_, answer) = api.send("POST", "/api/token", Some(&key)).await;
        assert_eq!(
            read(answer["token"].as_str().unwrap_or_default()).await,
            StatusCode::OK
        );
        api.stop().await;
    }
}
