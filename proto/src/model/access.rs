//! Who may use the API: applications (Orkes' name for a machine identity), their roles and
//! their access keys. A key's secret is never stored: the meta group keeps its password hash
//! (a PHC string), and the secret is shown once, when the key is made.

use super::EpochMs;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What an application may do; each role is a set of route families (`node::access`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Role {
    /// Everything, the administration API and applications included.
    Admin,
    /// Reads, and writes definitions: task and workflow definitions, schemas, DSL documents,
    /// event handlers, webhooks and schedules.
    MetadataManager,
    /// Reads, and operates workflows: start, terminate, pause, retry, publish events, complete
    /// tasks.
    WorkflowManager,
    /// Polls tasks and reports their results, nothing else.
    Worker,
    /// Reads everything but the administration API.
    ReadOnly,
}

impl Role {
    /// Every role, in the order the documentation lists them.
    pub const ALL: [Role; 5] = [
        Role::Admin,
        Role::MetadataManager,
        Role::WorkflowManager,
        Role::Worker,
        Role::ReadOnly,
    ];

    /// The role's name as the API spells it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Admin => "ADMIN",
            Role::MetadataManager => "METADATA_MANAGER",
            Role::WorkflowManager => "WORKFLOW_MANAGER",
            Role::Worker => "WORKER",
            Role::ReadOnly => "READ_ONLY",
        }
    }

    /// The role named `name` (as [`Role::name`] spells it).
    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// The kind of resource a grant names (Orkes' `TargetType`). `READ` reads the resource,
/// `CREATE`, `UPDATE` and `DELETE` write its definition; `EXECUTE` is said for each kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TargetType {
    /// `EXECUTE`: poll the type's tasks and report their results.
    TaskDef,
    /// `EXECUTE`: start workflows of the name and operate on them; `READ`: read them too.
    WorkflowDef,
    /// An event handler, by its name.
    EventHandler,
    /// A cron schedule, by its name; `UPDATE` pauses and resumes it.
    WorkflowSchedule,
    /// A webhook, by its name.
    Webhook,
    /// A secret of the store, by its name; `READ` says whether it exists, never its value.
    SecretName,
}

/// What a grant allows on its target (Orkes' `AccessType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AccessType {
    Create,
    Read,
    Update,
    Delete,
    /// For a task type: poll its tasks and report their results and logs; for a workflow
    /// definition: start workflows of it and operate on them.
    Execute,
}

/// A resource by kind and name; a name ending in `*` names every resource it is a prefix of.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Target {
    #[serde(rename = "type")]
    pub kind: TargetType,
    pub id: String,
}

impl Target {
    /// Whether this target names the resource `name` of kind `kind`.
    pub fn covers(&self, kind: TargetType, name: &str) -> bool {
        self.kind == kind
            && match self.id.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => self.id == name,
            }
    }
}

/// Access to one target, held by an application beside its roles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub target: Target,
    pub access: BTreeSet<AccessType>,
}

/// Who a grant is for: Orkes names an application as the user `app:{id}`; `APPLICATION` with
/// the bare id is taken too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

impl Subject {
    /// The application this subject names, if it names one.
    pub fn application(&self) -> Option<&str> {
        match self.kind.as_str() {
            "USER" => self.id.strip_prefix("app:"),
            "APPLICATION" => Some(self.id.as_str()),
            _ => None,
        }
    }
}

/// `POST` and `DELETE /api/auth/authorization`'s body (Orkes' `AuthorizationRequest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizationRequest {
    pub subject: Subject,
    pub target: Target,
    pub access: BTreeSet<AccessType>,
}

/// An application: a named identity holding roles and access keys (Orkes' `ConductorApplication`
/// with its roles).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Application {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub roles: BTreeSet<Role>,
    /// Access to named resources beyond what its roles give.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Grant>,
    #[serde(default)]
    pub created_by: String,
    #[serde(default)]
    pub create_time: EpochMs,
    #[serde(default)]
    pub updated_by: String,
    #[serde(default)]
    pub update_time: EpochMs,
}

/// Whether an access key may be exchanged for tokens, and whether its tokens are honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum KeyStatus {
    Active,
    Inactive,
}

/// An access key as the meta group stores it: the secret's password hash, never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessKey {
    pub id: String,
    pub application_id: String,
    /// The secret's Argon2id hash as a PHC string.
    pub secret_hash: String,
    pub status: KeyStatus,
    pub created_at: EpochMs,
}

impl AccessKey {
    /// What the API shows of a key (Orkes' `AccessKey`): never its hash.
    pub fn view(&self) -> AccessKeyView {
        AccessKeyView {
            id: self.id.clone(),
            status: self.status,
            created_at: self.created_at,
        }
    }
}

/// An access key as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessKeyView {
    pub id: String,
    pub status: KeyStatus,
    pub created_at: EpochMs,
}

/// A key as it is made: the only answer that ever holds its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedAccessKey {
    pub id: String,
    pub secret: String,
}

/// The cluster's token-signing key, made once when access control is set up.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SigningKey {
    /// Named in every token's header (`kid`).
    pub id: String,
    #[serde(with = "serde_bytes")]
    pub secret: Vec<u8>,
    pub created_at: EpochMs,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("id", &self.id).finish()
    }
}

/// A signing key that was replaced: it verifies the tokens it signed until `honoured_until`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredSigningKey {
    pub key: SigningKey,
    pub honoured_until: EpochMs,
}

/// `POST /api/token`'s body (Orkes' `GenerateTokenRequest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRequest {
    pub key_id: String,
    pub key_secret: String,
}

/// `POST /api/token`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenAnswer {
    pub token: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_covers_its_name_or_its_prefix() {
        let exact = Target {
            kind: TargetType::TaskDef,
            id: "encode".into(),
        };
        assert!(exact.covers(TargetType::TaskDef, "encode"));
        assert!(!exact.covers(TargetType::TaskDef, "encode_video"));
        let prefix = Target {
            id: "encode_*".into(),
            ..exact
        };
        assert!(prefix.covers(TargetType::TaskDef, "encode_video"));
        assert!(!prefix.covers(TargetType::TaskDef, "decode_video"));
        let json = serde_json::to_value(&prefix).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({"type": "TASK_DEF", "id": "encode_*"})
        );
        let orkes = Subject {
            kind: "USER".into(),
            id: "app:a1".into(),
        };
        assert_eq!(orkes.application(), Some("a1"));
    }

    #[test]
    fn roles_read_back_by_their_names() {
        for role in Role::ALL {
            let json = serde_json::to_value(role).expect("a role serializes");
            assert_eq!(json, role.name());
            assert_eq!(Role::parse(role.name()), Some(role));
        }
        assert_eq!(Role::parse("USER"), None);
    }
}
