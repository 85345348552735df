//! The audit log's vocabulary: what a meta command did, said without its contents (no secret,
//! hash, signing key or document ever reaches an entry), and the entry the meta group keeps.

use super::MetaCommand;
use crate::model::EpochMs;
use serde::{Deserialize, Serialize};

/// One recorded change: who made it, when, what it did to what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Increasing with every entry the cluster records.
    pub seq: u64,
    /// When the change was proposed (the proposing node's clock).
    pub at: EpochMs,
    /// The application whose token the request carried (`name (id)`), `anonymous` while
    /// access control is off, or `baton` for the cluster's own changes (members, placement).
    pub by: String,
    /// The change, as the command's name (`PutWorkflowDef`, `SetAccessKeyStatus`, ...).
    pub action: String,
    /// What it changed (names, versions, ids; never contents).
    pub target: String,
}

impl MetaCommand {
    /// Whether the audit log records the command: not what the runtime does by itself on
    /// events (gathering them for a `schedule.on`), which no one asked for.
    pub fn is_audited(&self) -> bool {
        !matches!(
            self,
            MetaCommand::GatherEvent { .. } | MetaCommand::GatheredStarted { .. }
        )
    }

    /// The version this command activates, audited or not.
    pub fn activates(&self) -> Option<crate::version::ClusterVersion> {
        match self {
            MetaCommand::ActivateVersion { version } => Some(*version),
            MetaCommand::Audited { command, .. } => command.activates(),
            _ => None,
        }
    }

    /// The cluster version whose format the command is (see `crate::version::FEATURES`).
    pub fn written_in(&self) -> crate::version::ClusterVersion {
        match self {
            MetaCommand::PutWorkflowDefs(_) => crate::version::PUT_WORKFLOW_DEFS.since,
            MetaCommand::Audited { command, .. } => command.written_in(),
            _ => crate::version::ClusterVersion::FIRST,
        }
    }

    /// The command's name and what it changes, for the audit log.
    pub fn summary(&self) -> (std::borrow::Cow<'static, str>, String) {
        use MetaCommand::RecordOperation;
        match self {
            RecordOperation { action, target } => (action.clone().into(), target.clone()),
            MetaCommand::Audited { command, .. } => command.summary(),
            other => {
                let (action, target) = other.change();
                (action.into(), target)
            }
        }
    }

    /// What a command that changes rows does, and to what.
    fn change(&self) -> (&'static str, String) {
        use MetaCommand::*;
        match self {
            PutTaskDefs(defs) => ("PutTaskDefs", names(defs.iter().map(|d| d.name.as_str()))),
            DeleteTaskDef { name } => ("DeleteTaskDef", name.clone()),
            PutWorkflowDef(def) => ("PutWorkflowDef", format!("{} v{}", def.name, def.version)),
            PutWorkflowDefs(defs) => (
                "PutWorkflowDefs",
                names(defs.iter().map(|d| format!("{} v{}", d.name, d.version))),
            ),
            DeleteWorkflowDef { name, version } => {
                ("DeleteWorkflowDef", format!("{name} v{version}"))
            }
            PutNode(entry) => ("PutNode", format!("node {} at {}", entry.id.0, entry.addr)),
            SetDraining { id, draining } => {
                ("SetDraining", format!("node {} draining {draining}", id.0))
            }
            RemoveNode { id } => ("RemoveNode", format!("node {}", id.0)),
            PutEventHandler { handler, create } => (
                if *create {
                    "AddEventHandler"
                } else {
                    "UpdateEventHandler"
                },
                handler.name.clone(),
            ),
            DeleteEventHandler { name } => ("DeleteEventHandler", name.clone()),
            PutWebhook(w) => ("PutWebhook", w.name.clone()),
            DeleteWebhook { name } => ("DeleteWebhook", name.clone()),
            PutSchedule(s) => ("PutSchedule", s.name.clone()),
            DeleteSchedule { name } => ("DeleteSchedule", name.clone()),
            PutSchemas(defs) => ("PutSchemas", names(defs.iter().map(|d| d.name.as_str()))),
            DeleteSchema { name, version } => match version {
                Some(v) => ("DeleteSchema", format!("{name} v{v}")),
                None => ("DeleteSchema", name.clone()),
            },
            PutDslWorkflow { def, .. } => (
                "PutDslWorkflow",
                format!("{}/{} {}", def.namespace, def.name, def.version),
            ),
            DeleteDslWorkflow {
                namespace,
                name,
                version,
            } => ("DeleteDslWorkflow", format!("{namespace}/{name} {version}")),
            SetUpAccess { admin, key, .. } => (
                "SetUpAccess",
                format!("application {} key {}", admin.id, key.id),
            ),
            PutApplication { app, create } => (
                if *create {
                    "CreateApplication"
                } else {
                    "RenameApplication"
                },
                format!("{} ({})", app.name, app.id),
            ),
            DeleteApplication { id } => ("DeleteApplication", id.clone()),
            GatherEvent {
                key, message_id, ..
            } => ("GatherEvent", format!("{key} message {message_id}")),
            GatheredStarted { key, seq } => ("GatheredStarted", format!("{key} group {seq}")),
            ActivateVersion { version } => {
                ("ActivateVersion", format!("cluster version {version}"))
            }
            SetRole {
                application,
                role,
                granted,
            } => (
                if *granted {
                    "GrantRole"
                } else {
                    "WithdrawRole"
                },
                format!("{application} {}", role.name()),
            ),
            SetGrant {
                application,
                target,
                access,
                granted,
            } => (
                if *granted {
                    "GrantAccess"
                } else {
                    "RemoveAccess"
                },
                format!("{application} {:?} {} {access:?}", target.kind, target.id),
            ),
            PutAccessKey(key) => (
                "CreateAccessKey",
                format!("{} key {}", key.application_id, key.id),
            ),
            SetAccessKeyStatus {
                application,
                id,
                status,
            } => (
                "SetAccessKeyStatus",
                format!("{application} key {id} {status:?}"),
            ),
            DeleteAccessKey { application, id } => {
                ("DeleteAccessKey", format!("{application} key {id}"))
            }
            Audited { .. } | RecordOperation { .. } => ("", String::new()),
            PutSecret(secret) => ("PutSecret", secret.name.clone()),
            DeleteSecret { name } => ("DeleteSecret", name.clone()),
            RotateSigningKey {
                signing,
                retire_now,
            } => (
                "RotateSigningKey",
                format!("key {} (old key retired now: {retire_now})", signing.id),
            ),
        }
    }
}

/// At most a few names, then how many more.
fn names<S: AsRef<str>>(all: impl Iterator<Item = S>) -> String {
    let all: Vec<S> = all.collect();
    let shown: Vec<&str> = all.iter().take(5).map(AsRef::as_ref).collect();
    let shown = shown.join(", ");
    match all.len() {
        n if n > 5 => format!("{shown} and {} more", n - 5),
        _ => shown,
    }
}
