//! Versioned records: what partitions replicate and store. Every encoded record starts with a two-byte
//! little-endian format version, [`FORMAT_VERSION`]; a node decodes that version only.
//!
//! The body is JSON for now: workflow inputs and outputs are arbitrary JSON (`serde_json::Value`), which
//! non-self-describing formats such as bincode cannot carry through serde. A denser body is a later
//! format version, not a silent change.

use crate::ids::{NodeId, WorkflowId};
use crate::model::{EventExecution, TaskDef, TaskExecLog, Workflow, WorkflowDef};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod audit;
pub mod compact;
pub mod dead_letter;
mod lifecycle;
pub use lifecycle::{LifecycleEvent, LifecycleOutbox};
pub mod patch;
pub mod quarantine;
pub mod write;

/// The format version of every record, the only one read. A workflow record leaves out each
/// task's `workflowTask` that its workflow definition holds (see [`compact`]).
pub const FORMAT_VERSION: u16 = 1;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("record too short to carry a format version")]
    Truncated,
    #[error("record format version {0} is not readable by this build (reads {FORMAT_VERSION})")]
    Version(u16),
    #[error("record body is malformed: {0}")]
    Body(#[from] serde_json::Error),
    #[error("workflow write head is malformed: {0}")]
    Head(String),
}

/// Encodes a record with the current format version.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = FORMAT_VERSION.to_le_bytes().to_vec();
    // Serialising plain data structs into a Vec cannot fail: every map key is a string.
    serde_json::to_writer(&mut out, value).expect("records serialise to JSON");
    out
}

/// Decodes a record written with [`FORMAT_VERSION`].
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    Ok(serde_json::from_slice(body(bytes)?)?)
}

/// A record's body after checking its format version.
fn body(bytes: &[u8]) -> Result<&[u8], CodecError> {
    if bytes.len() < 2 {
        return Err(CodecError::Truncated);
    }
    let version = u16::from_le_bytes([bytes[0], bytes[1]]);
    if version != FORMAT_VERSION {
        return Err(CodecError::Version(version));
    }
    Ok(&bytes[2..])
}

/// A workflow as a partition stores it: the Conductor view plus Baton's bookkeeping. Its encoding
/// leaves out what its workflow definition already holds (see [`compact`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "compact::Stored")]
pub struct WorkflowRecord {
    /// Strictly increases with every write of this workflow; 1 for the first.
    pub version: u64,
    pub workflow: Workflow,
    /// Worker log lines per task id.
    pub task_logs: BTreeMap<String, Vec<TaskExecLog>>,
    /// Keys of the latest outside changes applied (event actions), so a repeat of one is a
    /// no-op; at most [`APPLIED_KEYS_MAX`], oldest first.
    pub applied: Vec<String>,
    /// The publication of the workflow's end to its definition's status listener sink, once
    /// begun (see [`WorkflowRecord::owes_status_notice`]); `None` while the workflow runs.
    pub status_notice: Option<StatusNotice>,
    /// A Serverless Workflow instance's lifecycle CloudEvents not yet published to the
    /// operator's sink; `None` when it never had any.
    pub lifecycle: Option<LifecycleOutbox>,
}

/// How a terminal workflow's publication of its end to `workflowStatusListenerSink` went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct StatusNotice {
    /// Publications begun again after the first (by the workflow's `StatusPublish` timer).
    pub attempts: u32,
    /// When the last of them was begun (0: none yet; the first begins at the workflow's end).
    pub last_attempt_ms: i64,
    /// Why the last publication failed, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Published, or given up after [`STATUS_NOTICE_ATTEMPTS_MAX`] attempts (then `error` says
    /// why): nothing more is owed for this end.
    pub done: bool,
}

/// How many times a workflow's end is published to its status listener sink before Baton
/// gives up on it.
pub const STATUS_NOTICE_ATTEMPTS_MAX: u32 = 10;

impl WorkflowRecord {
    /// Whether the workflow owes its status listener sink the publication of its end: it is
    /// terminal, its definition enables the listener and names a sink, and the publication is
    /// not done. Such a workflow still has work for its partition's leader.
    pub fn owes_status_notice(&self) -> bool {
        owes_status_notice(&self.workflow, self.status_notice.as_ref())
    }

    /// Whether a terminal workflow still owes a publication: its end to its status listener,
    /// or lifecycle events to the operator's sink. The partition keeps a row its next
    /// leader's recovery finds such a workflow by.
    pub fn owes_publication(&self) -> bool {
        let lifecycle = self
            .lifecycle
            .as_ref()
            .is_some_and(|l| !l.pending.is_empty());
        self.owes_status_notice() || (self.workflow.status.is_terminal() && lifecycle)
    }
}

/// [`WorkflowRecord::owes_status_notice`] for a workflow and its publication so far.
pub fn owes_status_notice(wf: &Workflow, notice: Option<&StatusNotice>) -> bool {
    let def = &wf.workflow_definition;
    let sink = def.workflow_status_listener_sink.as_deref().map(str::trim);
    wf.status.is_terminal()
        && def.workflow_status_listener_enabled
        && sink.is_some_and(|s| !s.is_empty())
        && !notice.is_some_and(|n| n.done)
}

/// How many applied keys a workflow record remembers.
pub const APPLIED_KEYS_MAX: usize = 64;

/// A command in a workflow partition's Raft log, other than a workflow's write (see [`write`]).
/// Applying one never reads a clock or runs the decider: it checks versions and writes what it
/// carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PartitionCommand {
    /// Removes a workflow and its index rows.
    RemoveWorkflow { workflow_id: WorkflowId },
    /// Writes the execution record of one event-handler action. `create`: only if none is
    /// stored (the first delivery claims it); otherwise it replaces a stored IN_PROGRESS record
    /// (a final record absorbs). Answers [`PartitionOutcome::Execution`] with what is stored.
    PutExecution {
        handler: String,
        execution: Box<EventExecution>,
        create: bool,
    },
    /// Appends a message to one of Baton's own event queues (the `conductor` provider).
    Publish {
        queue: String,
        message: Box<QueueMessage>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dedup: Option<Dedup>,
    },
    /// Removes a consumed message from its queue.
    Ack { queue: String, seq: u64 },
    /// Records that a schedule fired for `time` (epoch ms); a mark never moves back.
    MarkSchedule { name: String, time: i64 },
    /// Sets a workflow whose stored row cannot be decoded aside: the row moves, unchanged, to
    /// the quarantine (see [`quarantine`]) with `reason`, and so do its running row (`name`,
    /// when the caller found it) so that nothing reads it as a workflow any more.
    Quarantine {
        workflow_id: WorkflowId,
        name: Option<String>,
        reason: String,
        time: crate::model::EpochMs,
    },
    /// Deletes a quarantined row for good.
    DropQuarantined { workflow_id: WorkflowId },
    /// Counts one more handling of a message begun (before it runs); `last_error` is why the
    /// one before failed, if known. Answers [`PartitionOutcome::Attempts`].
    BeginAttempt {
        event: String,
        message_id: String,
        now: crate::model::EpochMs,
        last_error: Option<String>,
    },
    /// Forgets a message's attempts (it was handled).
    EndAttempts { event: String, message_id: String },
    /// Sets a message aside as a dead letter (and forgets its attempts).
    PutDeadLetter {
        letter: Box<dead_letter::DeadLetter>,
    },
    /// Removes a dead letter; [`PartitionOutcome::NotFound`] if there is none.
    RemoveDeadLetter { event: String, message_id: String },
}

/// The event gate's deduplication of a published message by content: a message with the same
/// fingerprint published within `window_ms` before `now` is dropped. `now` is the publisher's
/// clock, carried in the command so that every replica decides alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dedup {
    pub fingerprint: u64,
    pub now: crate::model::EpochMs,
    pub window_ms: i64,
}

/// Where an event entered Baton (the event gate's `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventSource {
    /// `POST /api/webhook/{name}`: a sender waits on the answer, so it goes first.
    Webhook,
    /// `POST /api/event/publish/{queue}`, or a broker.
    #[default]
    Queue,
    /// An EVENT task, or a workflow's status listener publishing its end.
    Task,
    /// A cron schedule.
    Schedule,
}

impl EventSource {
    /// Its name, as metrics label it.
    pub fn name(self) -> &'static str {
        match self {
            EventSource::Webhook => "webhook",
            EventSource::Queue => "queue",
            EventSource::Task => "task",
            EventSource::Schedule => "schedule",
        }
    }

    /// The gate's priority: higher is consumed first.
    pub fn priority(self) -> u8 {
        match self {
            EventSource::Webhook => 2,
            _ => 1,
        }
    }
}

/// A message in one of Baton's own event queues: an event as the gate admitted it (source, type
/// = the queue's `provider:queue`, payload, timestamp, trace id, priority).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueMessage {
    /// Stable across redelivery: execution records are named after it.
    pub id: String,
    pub payload: serde_json::Value,
    pub published: crate::model::EpochMs,
    #[serde(default)]
    pub source: EventSource,
    /// W3C trace id (32 hex digits): the sender's `traceparent`, else derived from the id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trace_id: String,
    /// Higher is consumed first.
    #[serde(default)]
    pub priority: u8,
}

/// The result of applying a [`PartitionCommand`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionOutcome {
    Applied,
    /// The stored version was not the expected one; nothing was written.
    VersionConflict {
        stored: u64,
    },
    /// The workflow to remove did not exist.
    NotFound,
    /// The execution record as stored after the command.
    Execution(Box<EventExecution>),
    /// The message was queued with this sequence number.
    Published {
        seq: u64,
    },
    /// The queue holds [`crate::limits::EVENT_QUEUE_MAX`] messages in this partition.
    QueueFull,
    /// The same content was published within the dedup window; nothing was queued.
    Duplicate,
    /// The command could not be decoded by the replica (a newer format, or damage); nothing
    /// was written.
    Undecodable,
    /// A message's attempts after [`PartitionCommand::BeginAttempt`].
    Attempts(Box<dead_letter::Attempts>),
}

/// A command in the meta group's log: definitions shared by every partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetaCommand {
    PutTaskDefs(Vec<TaskDef>),
    DeleteTaskDef {
        name: String,
    },
    PutWorkflowDef(Box<WorkflowDef>),
    DeleteWorkflowDef {
        name: String,
        version: u32,
    },
    /// Records a cluster member (or its new address); keeps a recorded member's draining flag.
    PutNode(NodeEntry),
    /// Marks a member as draining (its replicas and leaderships move off) or active again.
    SetDraining {
        id: NodeId,
        draining: bool,
    },
    /// Forgets a member that holds nothing any more.
    RemoveNode {
        id: NodeId,
    },
    /// Adds an event handler (`create`: refused when the name is taken) or replaces one
    /// (`!create`: refused when it does not exist).
    PutEventHandler {
        handler: Box<crate::model::EventHandler>,
        create: bool,
    },
    DeleteEventHandler {
        name: String,
    },
    PutWebhook(Box<crate::model::Webhook>),
    DeleteWebhook {
        name: String,
    },
    PutSchedule(Box<crate::model::WorkflowSchedule>),
    DeleteSchedule {
        name: String,
    },
    /// Registers schemas (Orkes' schema registry), each replacing its name and version.
    PutSchemas(Vec<crate::model::SchemaDef>),
    /// Removes one version of a schema, or every version when `version` is `None`.
    DeleteSchema {
        name: String,
        version: Option<u32>,
    },
    /// Registers a Serverless Workflow document under its namespace, name and version. A
    /// version that holds another document is replaced only when `overwrite` (else `Exists`:
    /// decided in the apply, so registrations racing through different nodes cannot both win).
    PutDslWorkflow {
        def: Box<crate::model::DslWorkflow>,
        overwrite: bool,
    },
    /// Removes one version of a registered Serverless Workflow document.
    DeleteDslWorkflow {
        namespace: String,
        name: String,
        version: String,
    },
    /// Sets access control up: the token-signing key and the first application (an
    /// administrator) with its key. `Exists` when it was set up already (nothing is written),
    /// so nodes racing to set it up agree on one outcome.
    SetUpAccess {
        signing: crate::model::access::SigningKey,
        admin: Box<crate::model::access::Application>,
        key: crate::model::access::AccessKey,
    },
    /// Adds an application (`create`: `Exists` when its id is taken; `Full` past
    /// `limits::APPLICATIONS_MAX`) or renames one (`!create`: `NotFound` when it is absent;
    /// its roles and times of creation are kept).
    PutApplication {
        app: Box<crate::model::access::Application>,
        create: bool,
    },
    /// Removes an application and its keys.
    DeleteApplication {
        id: String,
    },
    /// Grants (`granted`) or withdraws a role of an application.
    SetRole {
        application: String,
        role: crate::model::access::Role,
        granted: bool,
    },
    /// Adds (`granted`) or takes away `access` on `target` for an application (`Full` past
    /// `limits::GRANTS_PER_APPLICATION_MAX` targets).
    SetGrant {
        application: String,
        target: crate::model::access::Target,
        access: std::collections::BTreeSet<crate::model::access::AccessType>,
        granted: bool,
    },
    /// Adds a key to an application (`NotFound` when it is absent, `Full` past
    /// `limits::ACCESS_KEYS_PER_APPLICATION_MAX`).
    PutAccessKey(crate::model::access::AccessKey),
    /// Activates or deactivates a key of an application.
    SetAccessKeyStatus {
        application: String,
        id: String,
        status: crate::model::access::KeyStatus,
    },
    /// Removes a key of an application.
    DeleteAccessKey {
        application: String,
        id: String,
    },
    /// `command`, recorded in the audit log with who proposed it and when, if it changed
    /// something (see [`audit`]).
    Audited {
        by: String,
        at: crate::model::EpochMs,
        command: Box<MetaCommand>,
    },
    /// Stores a sealed secret under its name (`Full` past `limits::SECRETS_MAX` names).
    PutSecret(crate::model::secret::SealedSecret),
    /// Removes a secret.
    DeleteSecret {
        name: String,
    },
    /// Makes `signing` the key tokens are signed with (`NotFound` before access control is set
    /// up). The key it replaces still verifies the tokens it signed for `limits::TOKEN_TTL_SECS`
    /// after `signing.created_at`, unless `retire_now`: then they are refused at once.
    RotateSigningKey {
        signing: crate::model::access::SigningKey,
        retire_now: bool,
    },
    /// Changes nothing; recorded in the audit log (inside [`MetaCommand::Audited`]): an
    /// operation made on workflows through the API, `action` on `target` (see `audit`).
    RecordOperation {
        action: String,
        target: String,
    },
    /// Offers a CloudEvent, carried by the message `message_id`, to the gathering
    /// `schedule.on` of the DSL version `key` (`namespace/name/version`); a group it completes
    /// is kept ready to start (`NotFound` when the version has no `schedule.on`).
    GatherEvent {
        key: String,
        message_id: String,
        event: serde_json::Value,
    },
    /// Forgets group `seq` of version `key` gathered by a `schedule.on`: its instance started.
    GatheredStarted {
        key: String,
        seq: u64,
    },
    /// Raises the cluster's active version to `version` (`crate::version`): refused with
    /// [`MetaOutcome::Unserved`] while a recorded member's binary does not serve it, and
    /// [`MetaOutcome::Exists`] when the cluster is at `version` or above already.
    ActivateVersion {
        version: crate::version::ClusterVersion,
    },
    /// Creates or replaces each workflow definition, all in one apply (a bulk update). Written
    /// from [`crate::version::PUT_WORKFLOW_DEFS`] on; before it, one `PutWorkflowDef` each.
    PutWorkflowDefs(Vec<WorkflowDef>),
}

/// A cluster member as the meta group records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEntry {
    pub id: NodeId,
    /// Its peer (QUIC) address, `ip:port`.
    pub addr: String,
    /// Being drained: nothing new is placed on it and what it holds moves off.
    pub draining: bool,
    /// The binary it runs and the cluster versions that binary serves, as it reported them
    /// (none until it has: a member an operator added before it started).
    pub binary: Option<crate::version::Binary>,
}

/// The result of applying a [`MetaCommand`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaOutcome {
    Applied,
    NotFound,
    /// A create found the name taken.
    Exists,
    /// A bound of what the meta group holds was reached (see `limits::SCHEMAS_MAX`); nothing
    /// was written.
    Full,
    /// The command could not be decoded by the replica (a newer format, or damage); nothing
    /// was written.
    Undecodable,
    /// A member's binary does not serve the cluster version the command needs: activating a
    /// version some member cannot serve, or recording a member that cannot serve the active
    /// one. Nothing was written.
    Unserved {
        node: NodeId,
        /// What its binary serves; none when it has not reported its binary yet.
        supports: Option<crate::version::VersionRange>,
        active: crate::version::ClusterVersion,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_carry_their_version() {
        let bytes = encode(&MetaCommand::DeleteTaskDef { name: "a".into() });
        assert_eq!(&bytes[..2], &FORMAT_VERSION.to_le_bytes());
        let back: MetaCommand = decode(&bytes).expect("decodes");
        assert_eq!(back, MetaCommand::DeleteTaskDef { name: "a".into() });
        let mut future = bytes.clone();
        future[0] = 99;
        assert!(matches!(
            decode::<MetaCommand>(&future),
            Err(CodecError::Version(99))
        ));
    }

    /// A number keeps its exact value through storage: JSON's shortest form of a float must
    /// parse back to the same float (serde_json's `float_roundtrip`), or a stored input drifts
    /// by one unit in the last place on every write.
    #[test]
    fn floats_survive_storage_exactly() {
        let text = r#"{"a":111111.1111111111111111111111111111111160,"b":0.1,"c":1e308}"#;
        let value: serde_json::Value = serde_json::from_str(text).expect("parses");
        assert_eq!(value["a"].as_f64(), Some(111_111.111_111_111_11));
        let back: serde_json::Value = decode(&encode(&value)).expect("decodes");
        assert_eq!(back, value);
    }
}
