//! Access control's decisions: who a request's token names ([`authenticate`]) and whether its
//! roles reach the route it asks for ([`Family`], [`permits`]). Pure functions of the replica's
//! [`AccessTable`], the token and the time; the API's guard (`api::guard`) calls them on every
//! request once access control is set up, and the Access service makes keys and tokens.

pub mod caller;
pub mod oidc;
mod routes;
pub mod secret;
pub mod token;

pub use routes::{audited_operation, AUDITED_OPERATIONS, GRANTED_ROUTES};

use crate::meta::AccessTable;
use proto::model::access::{
    AccessType, Application, Grant, KeyStatus, Role, SigningKey, TargetType,
};
use proto::model::EpochMs;
use std::collections::BTreeSet;

/// Who made a request: the application its token names, with the roles it holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub application: String,
    pub name: String,
    pub roles: BTreeSet<Role>,
    pub grants: Vec<Grant>,
    /// The access key the token was exchanged for.
    pub key: String,
}

impl Principal {
    /// How the audit log names it: the application's name and id.
    pub fn who(&self) -> String {
        format!("{} ({})", self.name, self.application)
    }

    /// Whether its roles reach `family`.
    pub fn reaches(&self, family: Family) -> bool {
        permits(&self.roles, family)
    }

    /// Whether a grant gives it `access` to the resource `name` of kind `kind`.
    pub fn granted(&self, kind: TargetType, name: &str, access: AccessType) -> bool {
        self.grants
            .iter()
            .any(|g| g.access.contains(&access) && g.target.covers(kind, name))
    }

    /// Whether a grant gives it one of `accesses` to some resources of kind `kind`.
    fn granted_some(&self, kind: TargetType, accesses: &[AccessType]) -> bool {
        self.grants
            .iter()
            .any(|g| g.target.kind == kind && accesses.iter().any(|a| g.access.contains(a)))
    }

    /// Whether it may do `ask` to the resource `name`: by a role reaching the ask's family,
    /// or by a grant of the ask's access to that resource.
    pub fn may(&self, ask: Ask, name: &str) -> bool {
        self.reaches(ask.family) || self.granted(ask.kind, name, ask.access)
    }

    /// Whether it may use the route `route` of family `family`: by its roles, or by grants
    /// when the route checks them against the resource it names ([`GRANTED_ROUTES`]).
    pub fn may_use(&self, family: Family, route: &str) -> bool {
        if self.reaches(family) {
            return true;
        }
        let granted = GRANTED_ROUTES
            .iter()
            .find(|(f, r, _, _)| *f == family && *r == route);
        granted.is_some_and(|(_, _, kind, accesses)| self.granted_some(*kind, accesses))
    }
}

/// What a request does to one named resource: the family of routes whose roles allow it, or
/// the grant on the resource that stands in for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    pub family: Family,
    pub kind: TargetType,
    pub access: AccessType,
}

impl Ask {
    /// Poll a task type's tasks and report their results and logs.
    pub const EXECUTE_TASKS: Ask = Ask::new(Family::Work, TargetType::TaskDef, AccessType::Execute);
    /// Start workflows of a name and operate on them.
    pub const RUN_WORKFLOWS: Ask = Ask::new(
        Family::Operate,
        TargetType::WorkflowDef,
        AccessType::Execute,
    );

    const fn new(family: Family, kind: TargetType, access: AccessType) -> Ask {
        Ask {
            family,
            kind,
            access,
        }
    }

    /// Read a resource of `kind` (for a workflow definition: its workflows too).
    pub const fn read(kind: TargetType) -> Ask {
        Ask::new(Family::Read, kind, AccessType::Read)
    }

    /// Write a definition of `kind`: create it when it is new, update it when it `exists`.
    pub const fn put(kind: TargetType, exists: bool) -> Ask {
        let access = if exists {
            AccessType::Update
        } else {
            AccessType::Create
        };
        Ask::new(Family::Define, kind, access)
    }

    /// Delete a definition of `kind`.
    pub const fn delete(kind: TargetType) -> Ask {
        Ask::new(Family::Define, kind, AccessType::Delete)
    }

    /// Change a definition of `kind` in place (pause or resume a schedule).
    pub const fn update(kind: TargetType) -> Ask {
        Ask::new(Family::Define, kind, AccessType::Update)
    }
}

/// Why a request was not authenticated (401). Each says what the client should do: fetch a new
/// token (`EXPIRED_TOKEN`, `INVALID_TOKEN`, the codes Orkes' clients renew their token on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("no token: send the one POST /api/token answers in X-Authorization")]
    Missing,
    #[error("the token is not one this cluster signed")]
    Invalid,
    #[error("the token has expired: fetch a new one from POST /api/token")]
    Expired,
    #[error("the token's access key or application was revoked")]
    Revoked,
}

impl Denied {
    /// The `error` an Orkes client reads in the 401's body.
    pub fn error_code(self) -> &'static str {
        match self {
            Denied::Expired => "EXPIRED_TOKEN",
            Denied::Missing | Denied::Invalid | Denied::Revoked => "INVALID_TOKEN",
        }
    }
}

/// Who `token` names, as the replica's table holds them at `now`.
pub fn authenticate(
    table: &AccessTable,
    token: Option<&str>,
    now: EpochMs,
) -> Result<Principal, Denied> {
    let token = token.ok_or(Denied::Missing)?;
    let signing = table.signing.as_ref().ok_or(Denied::Invalid)?;
    let retired = table.retired.as_ref().filter(|r| now < r.honoured_until);
    let keys: Vec<&SigningKey> = std::iter::once(signing)
        .chain(retired.map(|r| &r.key))
        .collect();
    let claims = token::verify(&keys, token)?;
    if claims.exp.saturating_mul(1000) <= now {
        return Err(Denied::Expired);
    }
    let key = table.keys.get(&claims.key).ok_or(Denied::Revoked)?;
    let app = table.applications.get(&claims.sub).ok_or(Denied::Revoked)?;
    if key.status != KeyStatus::Active || key.application_id != app.id {
        return Err(Denied::Revoked);
    }
    Ok(Principal {
        application: app.id.clone(),
        name: app.name.clone(),
        roles: app.roles.clone(),
        grants: app.grants.clone(),
        key: key.id.clone(),
    })
}

/// A new application `id` named `name`, made by `by` at `now`, without roles.
pub fn application(id: String, name: &str, by: &str, now: EpochMs) -> Application {
    Application {
        id,
        name: name.to_owned(),
        roles: BTreeSet::new(),
        grants: Vec::new(),
        created_by: by.to_owned(),
        create_time: now,
        updated_by: by.to_owned(),
        update_time: now,
    }
}

/// The application access control is set up with: `name`, with the role `ADMIN`.
pub fn administrator(id: String, name: &str, now: EpochMs) -> Application {
    let mut app = application(id, name, "baton", now);
    app.roles.insert(Role::Admin);
    app
}

/// A family of routes, by what they let a caller do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    /// Served to anyone: health, metrics, the agent card, token exchange, signed webhooks.
    Public,
    /// Reads of definitions, workflows, tasks, queues, handlers and triggers.
    Read,
    /// Writes of definitions, schemas, DSL documents, event handlers, webhooks, schedules and
    /// secrets.
    Define,
    /// Operations on workflows and DSL instances, and publishing events.
    Operate,
    /// Polling tasks and reporting their results and logs.
    Work,
    /// The administration API and applications.
    Admin,
}

/// The routes (by path as declared and method) served to anyone.
const PUBLIC: &[&str] = &[
    "/health",
    "/api/health",
    "/metrics",
    "/.well-known/agent-card.json",
    "/api/token",
    "/api/webhook/{name}",
];

/// The routes a worker uses, for every method.
const WORK: &[&str] = &[
    "/api/tasks",
    "/api/tasks/update-v2",
    "/api/tasks/poll/{task_type}",
    "/api/tasks/poll/batch/{task_type}",
    "/api/tasks/{id}/{reference}/{status}",
    "/api/tasks/{id}/{reference}/{status}/sync",
];

/// The routes that change something although asked for with GET (Conductor's pause and
/// resume of schedules).
const CHANGING_GETS: &[&str] = &[
    "/api/scheduler/schedules/{name}/pause",
    "/api/scheduler/schedules/{name}/resume",
];

/// The routes that only read although asked for with POST.
const READING_POSTS: &[&str] = &[
    "/api/dsl/validate",
    "/api/secrets",
    "/api/workflow/correlated/batch",
    "/api/workflow/{id}/correlated",
];

/// The path prefixes of definitions (their writes are [`Family::Define`]).
const DEFINE: &[&str] = &[
    "/api/metadata/",
    "/api/event",
    "/api/scheduler/",
    "/api/schema",
    "/api/dsl/workflows",
    "/api/secrets/",
];

/// The family of the route declared as `path`, asked for with `method`. A route no rule names
/// falls to [`Family::Operate`] when it changes something and [`Family::Read`] when it reads.
pub fn family(method: &str, path: &str) -> Family {
    let reads = matches!(method, "GET" | "HEAD") && !CHANGING_GETS.contains(&path)
        || READING_POSTS.contains(&path);
    if PUBLIC.contains(&path) {
        Family::Public
    } else if ["/api/admin/", "/api/applications", "/api/auth/"]
        .iter()
        .any(|p| path.starts_with(p))
    {
        Family::Admin
    } else if WORK.contains(&path) || (path == "/api/tasks/{id}/log" && !reads) {
        Family::Work
    } else if reads {
        Family::Read
    } else if path.starts_with("/api/event/publish") || path.ends_with("/instances") {
        Family::Operate
    } else if DEFINE.iter().any(|p| path.starts_with(p)) {
        Family::Define
    } else {
        Family::Operate
    }
}

/// The families a role reaches.
fn reaches(role: Role, family: Family) -> bool {
    use Family::*;
    match role {
        Role::Admin => true,
        Role::MetadataManager => matches!(family, Read | Define),
        Role::WorkflowManager => matches!(family, Read | Operate | Work),
        Role::Worker => family == Work,
        Role::ReadOnly => family == Read,
    }
}

/// Whether any of `roles` reaches `family`.
pub fn permits(roles: &BTreeSet<Role>, family: Family) -> bool {
    family == Family::Public || roles.iter().any(|r| reaches(*r, family))
}

#[cfg(test)]
mod tests;
