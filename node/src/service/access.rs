//! Access control's service: setting it up, applications and their roles and keys (replicated
//! through the meta group), and the exchange of a key for a token (`POST /api/token`). The
//! decisions themselves are [`crate::access`]'s; the API's guard reads [`Access::table`].

use crate::access::oidc::{self, Oidc};
use crate::access::{self, secret, token, Denied, Principal};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::meta::AccessTable;
use crate::service::Loops;
use proto::limits::TOKEN_TTL_SECS;
use proto::model::access::{
    AccessKey, AccessKeyView, AccessType, Application, AuthorizationRequest, CreatedAccessKey,
    KeyStatus, Role, SigningKey, Subject, Target, TokenRequest,
};
use proto::model::EpochMs;
use proto::record::audit::AuditEntry;
use proto::record::{MetaCommand, MetaOutcome};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The name of the application access control is set up with.
pub const ADMIN_APPLICATION: &str = "admin";

/// Most secrets hashed or checked at once: each takes Argon2's 19 MiB and a core for tens of
/// milliseconds, so a flood of token requests queues here instead of exhausting memory.
const HASHES_AT_ONCE: usize = 4;
/// Longest target an operation's audit entry records (the request's path and query).
pub const OPERATION_TARGET_MAX: usize = 512;
/// How long a token request waits for a turn before it is answered 503.
const HASH_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Applications, keys and tokens, and the people an OpenID Connect issuer vouches for.
pub struct Access {
    host: Arc<Host>,
    hashing: tokio::sync::Semaphore,
    oidc: Option<Arc<Oidc>>,
    pub(crate) loops: Loops,
}

impl Access {
    /// The service; with an issuer, it fetches the issuer's keys now and every
    /// [`oidc::JWKS_REFRESH`].
    pub(crate) fn new(host: Arc<Host>, oidc: Option<Oidc>) -> Arc<Self> {
        let access = Arc::new(Self {
            host,
            hashing: tokio::sync::Semaphore::new(HASHES_AT_ONCE),
            oidc: oidc.map(Arc::new),
            loops: Loops::default(),
        });
        if let Some(oidc) = access.oidc.clone() {
            access.loops.add(tokio::spawn(refresh_keys(oidc)));
        }
        access
    }

    /// Who `token` names, by `table` (this node's [`Access::table`]): an application by a
    /// token this cluster signed, or a person by one the OpenID Connect issuer signed (a token
    /// naming a key of the issuer this node does not hold has the keys fetched again, for the
    /// next request).
    pub fn authenticate(
        &self,
        table: &AccessTable,
        token: Option<&str>,
    ) -> std::result::Result<Principal, Denied> {
        let answer = access::authenticate(table, token, self.now_ms());
        let (Err(Denied::Invalid), Some(oidc), Some(token)) = (&answer, &self.oidc, token) else {
            return answer;
        };
        let person = oidc.authenticate(token);
        if person == Err(Denied::Invalid) && oidc.worth_refetching(token) {
            let oidc = oidc.clone();
            tokio::spawn(async move {
                if let Err(e) = oidc.refresh().await {
                    tracing::warn!(error = %e, "the OpenID Connect issuer's keys were not fetched");
                }
            });
        }
        person
    }

    /// Access control's rows as this node's replica holds them.
    pub fn table(&self) -> Arc<AccessTable> {
        self.host.defs.access()
    }

    /// The time tokens are issued and checked at.
    pub fn now_ms(&self) -> proto::model::EpochMs {
        self.host.clock.now_ms()
    }

    /// Sets access control up unless it is: the signing key and the application
    /// [`ADMIN_APPLICATION`] with the role `ADMIN` and one key, answered (the only time its
    /// secret is shown). `None` when the cluster had it set up already.
    pub async fn set_up(&self) -> Result<Option<CreatedAccessKey>> {
        self.host.catch_up_meta().await?;
        if self.table().signing.is_some() {
            return Ok(None);
        }
        let now = self.now_ms();
        let signing = SigningKey {
            id: secret::new_id(),
            secret: secret::new_signing_secret(),
            created_at: now,
        };
        let admin = access::administrator(secret::new_id(), ADMIN_APPLICATION, now);
        let (created, key) = new_key(&admin.id, now).await?;
        let command = MetaCommand::SetUpAccess {
            signing,
            admin: Box::new(admin),
            key,
        };
        match self.host.propose_meta(command).await? {
            MetaOutcome::Applied => Ok(Some(created)),
            _ => Ok(None),
        }
    }

    pub async fn applications(&self) -> Result<Vec<Application>> {
        self.host.catch_up_meta().await?;
        let mut apps: Vec<Application> = self.table().applications.values().cloned().collect();
        apps.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
        Ok(apps)
    }

    pub async fn application(&self, id: &str) -> Result<Application> {
        self.host.catch_up_meta().await?;
        self.table()
            .applications
            .get(id)
            .cloned()
            .ok_or_else(|| no_application(id))
    }

    /// Replaces the signing key: the old one verifies the tokens it signed for their lifetime,
    /// or, when `retire_now`, none from now (each client fetches a new token). Answers the new
    /// key's id and until when the old key's tokens are honoured.
    pub async fn rotate_signing_key(&self, retire_now: bool) -> Result<(String, Option<EpochMs>)> {
        let signing = SigningKey {
            id: secret::new_id(),
            secret: secret::new_signing_secret(),
            created_at: self.now_ms(),
        };
        let id = signing.id.clone();
        let until = (!retire_now).then(|| signing.created_at + TOKEN_TTL_SECS * 1000);
        let command = MetaCommand::RotateSigningKey {
            signing,
            retire_now,
        };
        match self.host.propose_meta(command).await? {
            MetaOutcome::Applied => Ok((id, until)),
            _ => Err(Error::NotFound(
                "access control is not set up: `baton server --auth`".into(),
            )),
        }
    }

    /// Records in the audit log that the current caller made `action` on `target` (a request's
    /// path and query, cut to [`OPERATION_TARGET_MAX`] bytes). The operation was made already:
    /// a record that cannot be written is logged, and the answer still goes out.
    pub async fn record_operation(&self, action: &str, mut target: String) {
        if target.len() > OPERATION_TARGET_MAX {
            let mut end = OPERATION_TARGET_MAX;
            while !target.is_char_boundary(end) {
                end -= 1;
            }
            target.truncate(end);
        }
        let command = MetaCommand::RecordOperation {
            action: action.to_owned(),
            target: target.clone(),
        };
        if let Err(e) = self.host.propose_meta(command).await {
            tracing::warn!(action, target, error = %e, "an operation was made but not recorded in the audit log");
        }
    }

    /// A new application named `name`, made by `by`, without roles or keys.
    pub async fn create_application(&self, name: &str, by: &str) -> Result<Application> {
        proto::check::name("application", name)?;
        let app = access::application(secret::new_id(), name, by, self.now_ms());
        let command = MetaCommand::PutApplication {
            app: Box::new(app.clone()),
            create: true,
        };
        match self.host.propose_meta(command).await? {
            MetaOutcome::Applied => Ok(app),
            MetaOutcome::Full => Err(Error::TooLarge(format!(
                "the cluster holds {} applications already",
                proto::limits::APPLICATIONS_MAX
            ))),
            other => Err(Error::Conflict(format!(
                "application not created: {other:?}"
            ))),
        }
    }

    /// Renames application `id`.
    pub async fn rename_application(&self, id: &str, name: &str, by: &str) -> Result<Application> {
        proto::check::name("application", name)?;
        let mut app = self.application(id).await?;
        app.name = name.to_owned();
        app.updated_by = by.to_owned();
        app.update_time = self.now_ms();
        let command = MetaCommand::PutApplication {
            app: Box::new(app),
            create: false,
        };
        self.applied(command, id).await?;
        self.application(id).await
    }

    pub async fn delete_application(&self, id: &str) -> Result<()> {
        let command = MetaCommand::DeleteApplication { id: id.to_owned() };
        self.applied(command, id).await
    }

    /// Grants or withdraws `role`.
    pub async fn set_role(&self, id: &str, role: &str, granted: bool) -> Result<()> {
        let role = Role::parse(role).ok_or_else(|| {
            let names: Vec<&str> = Role::ALL.iter().map(|r| r.name()).collect();
            Error::Invalid(format!(
                "no role {role:?}: the roles are {}",
                names.join(", ")
            ))
        })?;
        let command = MetaCommand::SetRole {
            application: id.to_owned(),
            role,
            granted,
        };
        self.applied(command, id).await
    }

    /// Grants (`granted`) or takes away the access `request` names for the application its
    /// subject names.
    pub async fn set_grant(&self, request: AuthorizationRequest, granted: bool) -> Result<()> {
        let application = request.subject.application().ok_or_else(|| {
            Error::Invalid(format!(
                "subject {:?} {:?} names no application: grants are for applications, named as the user \"app:ID\" or as APPLICATION",
                request.subject.kind, request.subject.id
            ))
        })?;
        let target = request.target;
        proto::check::name("target id", target.id.trim_end_matches('*'))?;
        if request.access.is_empty() {
            return Err(Error::Invalid("access names nothing".into()));
        }
        let command = MetaCommand::SetGrant {
            application: application.to_owned(),
            target,
            access: request.access,
            granted,
        };
        match self.host.propose_meta(command).await? {
            MetaOutcome::Applied => Ok(()),
            MetaOutcome::Full => Err(Error::Conflict(format!(
                "application {application} holds grants on {} targets already",
                proto::limits::GRANTS_PER_APPLICATION_MAX
            ))),
            _ => Err(Error::NotFound(format!(
                "No such application, or no such grant: {application}"
            ))),
        }
    }

    /// Who holds which access on `target`, by access (Orkes' answer: subjects as `app:ID`
    /// users).
    pub async fn permissions(&self, target: &Target) -> Result<BTreeMap<AccessType, Vec<Subject>>> {
        let mut held: BTreeMap<AccessType, Vec<Subject>> = BTreeMap::new();
        for app in self.applications().await? {
            for grant in app.grants.iter().filter(|g| &g.target == target) {
                for access in &grant.access {
                    held.entry(*access).or_default().push(Subject {
                        kind: "USER".into(),
                        id: format!("app:{}", app.id),
                    });
                }
            }
        }
        Ok(held)
    }

    /// A new key of application `id`, with its secret (shown this once).
    pub async fn create_key(&self, id: &str) -> Result<CreatedAccessKey> {
        let turn = self.turn().await?;
        let (created, key) = new_key(id, self.now_ms()).await?;
        drop(turn);
        match self
            .host
            .propose_meta(MetaCommand::PutAccessKey(key))
            .await?
        {
            MetaOutcome::Applied => Ok(created),
            MetaOutcome::Full => Err(Error::Conflict(format!(
                "application {id} holds {} keys already: delete one first",
                proto::limits::ACCESS_KEYS_PER_APPLICATION_MAX
            ))),
            _ => Err(no_application(id)),
        }
    }

    pub async fn keys(&self, id: &str) -> Result<Vec<AccessKeyView>> {
        self.application(id).await?;
        let table = self.table();
        let mut keys: Vec<AccessKeyView> = table
            .keys
            .values()
            .filter(|k| k.application_id == id)
            .map(AccessKey::view)
            .collect();
        keys.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(keys)
    }

    /// Deactivates an active key and activates an inactive one (Orkes' toggle).
    pub async fn toggle_key(&self, id: &str, key: &str) -> Result<AccessKeyView> {
        self.host.catch_up_meta().await?;
        let held = self.key_of(id, key)?;
        let status = match held.status {
            KeyStatus::Active => KeyStatus::Inactive,
            KeyStatus::Inactive => KeyStatus::Active,
        };
        let command = MetaCommand::SetAccessKeyStatus {
            application: id.to_owned(),
            id: key.to_owned(),
            status,
        };
        self.applied(command, key).await?;
        Ok(AccessKeyView {
            status,
            ..held.view()
        })
    }

    pub async fn delete_key(&self, id: &str, key: &str) -> Result<()> {
        let command = MetaCommand::DeleteAccessKey {
            application: id.to_owned(),
            id: key.to_owned(),
        };
        self.applied(command, key).await
    }

    /// The application that holds key `key`.
    pub async fn application_of_key(&self, key: &str) -> Result<Application> {
        self.host.catch_up_meta().await?;
        let table = self.table();
        let held = table.keys.get(key).ok_or_else(|| no_key(key))?;
        let app = table.applications.get(&held.application_id);
        app.cloned()
            .ok_or_else(|| no_application(&held.application_id))
    }

    /// A token for an active key whose secret is `request.key_secret`; `NotFound` while access
    /// control is not set up (Orkes' clients then go on without tokens).
    pub async fn token(&self, request: TokenRequest) -> Result<String> {
        self.host.catch_up_meta().await?;
        let table = self.table();
        let refused =
            || Error::Unauthorized("unknown key id, wrong secret, or a revoked key".into());
        let signing = table.signing.clone().ok_or_else(|| {
            Error::NotFound(
                "no such endpoint: POST /api/token (access control is not set up: `baton server --auth`)"
                    .into(),
            )
        })?;
        let key = table
            .keys
            .get(&request.key_id)
            .cloned()
            .ok_or_else(refused)?;
        let active =
            key.status == KeyStatus::Active && table.applications.contains_key(&key.application_id);
        let hash = key.secret_hash.clone();
        let secret = request.key_secret;
        let _turn = self.turn().await?;
        let matches = tokio::task::spawn_blocking(move || secret::matches(&secret, &hash))
            .await
            .map_err(|e| Error::Internal(format!("checking a secret: {e}")))?;
        if !(active && matches) {
            return Err(refused());
        }
        Ok(token::issue(
            &signing,
            &key.application_id,
            &key.id,
            self.now_ms(),
        ))
    }

    /// The audit log's entries below sequence `before` (the newest when `None`), newest
    /// first, at most `limit` (bounded by [`proto::limits::AUDIT_PAGE_MAX`]).
    pub async fn audit(&self, before: Option<u64>, limit: usize) -> Result<Vec<AuditEntry>> {
        self.host.catch_up_meta().await?;
        let limit = limit.min(proto::limits::AUDIT_PAGE_MAX);
        Ok(self.host.defs.audit(before, limit))
    }

    /// A turn to hash or check a secret ([`HASHES_AT_ONCE`]); 503 after [`HASH_WAIT`].
    async fn turn(&self) -> Result<tokio::sync::SemaphorePermit<'_>> {
        let busy = || Error::Unavailable("too many token requests at once: retry".into());
        tokio::time::timeout(HASH_WAIT, self.hashing.acquire())
            .await
            .map_err(|_| busy())?
            .map_err(|_| busy())
    }

    fn key_of(&self, id: &str, key: &str) -> Result<AccessKey> {
        let table = self.table();
        table
            .keys
            .get(key)
            .filter(|k| k.application_id == id)
            .cloned()
            .ok_or_else(|| no_key(key))
    }

    /// Proposes `command`; `NotFound` names `what`.
    async fn applied(&self, command: MetaCommand, what: &str) -> Result<()> {
        match self.host.propose_meta(command).await? {
            MetaOutcome::Applied => Ok(()),
            _ => Err(Error::NotFound(format!(
                "No such application or key: {what}"
            ))),
        }
    }
}

/// A new active key of `application`: its id and secret, and what the meta group stores (the
/// secret's hash, made off the async threads).
async fn new_key(
    application: &str,
    now: proto::model::EpochMs,
) -> Result<(CreatedAccessKey, AccessKey)> {
    let created = CreatedAccessKey {
        id: secret::new_id(),
        secret: secret::new_secret(),
    };
    let plain = created.secret.clone();
    let hash = tokio::task::spawn_blocking(move || secret::hash(&plain))
        .await
        .map_err(|e| Error::Internal(format!("hashing a secret: {e}")))?
        .map_err(Error::Internal)?;
    let key = AccessKey {
        id: created.id.clone(),
        application_id: application.to_owned(),
        secret_hash: hash,
        status: KeyStatus::Active,
        created_at: now,
    };
    Ok((created, key))
}

fn no_application(id: &str) -> Error {
    Error::NotFound(format!("No such application: {id}"))
}

fn no_key(id: &str) -> Error {
    Error::NotFound(format!("No such access key: {id}"))
}

/// Fetches the issuer's keys now, then every [`oidc::JWKS_REFRESH`] (a failed fetch is tried
/// again a minute later).
async fn refresh_keys(oidc: Arc<Oidc>) {
    loop {
        let wait = match oidc.refresh().await {
            Ok(()) => oidc::JWKS_REFRESH,
            Err(e) => {
                tracing::warn!(error = %e, "the OpenID Connect issuer's keys were not fetched");
                oidc::JWKS_REFETCH_MIN
            }
        };
        tokio::time::sleep(wait).await;
    }
}
