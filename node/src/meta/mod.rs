//! The meta group: task definitions, workflow definitions, schemas, Serverless Workflow documents
//! and the cluster's members, replicated
//! through their own Raft group and read locally by every node. `MetaMachine` applies
//! [`MetaCommand`]s; `MetaState` reads them.

use cluster::storage::{Batch, Tree};
use engine::schema::Compiled;
use proto::limits::SCHEMAS_MAX;
use proto::model::{
    DslSchedule, DslWorkflow, EventHandler, SchemaDef, TaskDef, Webhook, WorkflowDef,
    WorkflowSchedule,
};
use proto::record::{self, MetaCommand, MetaOutcome, NodeEntry};
use proto::version::VersionRange;
use proto::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

mod access_rows;
mod audit_rows;
mod dsl_rows;
mod gather_rows;
mod secret_rows;
mod version_file;
mod version_rows;

pub use access_rows::AccessTable;
pub use gather_rows::Gathered;
pub use version_file::VersionFile;

fn task_key(name: &str) -> Vec<u8> {
    [b"td/".as_slice(), name.as_bytes()].concat()
}
const TASK_PREFIX: &[u8] = b"td/";

/// Versions sort numerically: zero-padded to ten digits.
fn workflow_key(name: &str, version: u32) -> Vec<u8> {
    format!("wd/{name}\0{version:010}").into_bytes()
}
fn workflow_prefix(name: &str) -> Vec<u8> {
    format!("wd/{name}\0").into_bytes()
}
const WORKFLOW_PREFIX: &[u8] = b"wd/";

/// Members sort by id: zero-padded to twenty digits.
fn node_key(id: NodeId) -> Vec<u8> {
    format!("nd/{:020}", id.0).into_bytes()
}
const NODE_PREFIX: &[u8] = b"nd/";

fn handler_key(name: &str) -> Vec<u8> {
    [HANDLER_PREFIX, name.as_bytes()].concat()
}
const HANDLER_PREFIX: &[u8] = b"eh/";

fn webhook_key(name: &str) -> Vec<u8> {
    [WEBHOOK_PREFIX, name.as_bytes()].concat()
}
const WEBHOOK_PREFIX: &[u8] = b"wh/";

fn schedule_key(name: &str) -> Vec<u8> {
    [SCHEDULE_PREFIX, name.as_bytes()].concat()
}
const SCHEDULE_PREFIX: &[u8] = b"sc/";

/// Versions sort numerically: zero-padded to ten digits.
fn schema_key(name: &str, version: u32) -> Vec<u8> {
    format!("sd/{name}\0{version:010}").into_bytes()
}
fn schema_prefix(name: &str) -> Vec<u8> {
    format!("sd/{name}\0").into_bytes()
}
const SCHEMA_PREFIX: &[u8] = b"sd/";

/// A DSL document's namespace, name and version (none of them holds a `/`: the DSL's schema
/// allows hostname-like names and semantic versions only).
fn dsl_key(namespace: &str, name: &str, version: &str) -> Vec<u8> {
    format!("dw/{namespace}/{name}/{version}").into_bytes()
}
fn dsl_prefix(namespace: &str, name: &str) -> Vec<u8> {
    format!("dw/{namespace}/{name}/").into_bytes()
}
const DSL_PREFIX: &[u8] = b"dw/";
/// The event types a DSL document's `listen` tasks wait for, beside the document (present when
/// it has some), so the event consumers read them without decoding documents.
fn dsl_listens_key(namespace: &str, name: &str, version: &str) -> Vec<u8> {
    format!("dwl/{namespace}/{name}/{version}").into_bytes()
}
const DSL_LISTENS_PREFIX: &[u8] = b"dwl/";
/// A DSL document's `schedule`, beside the document (present when it has one).
fn dsl_schedule_key(namespace: &str, name: &str, version: &str) -> Vec<u8> {
    format!("dws/{namespace}/{name}/{version}").into_bytes()
}
const DSL_SCHEDULES_PREFIX: &[u8] = b"dws/";

/// A big-endian `u64` counter row (0 while absent): generations and sequences.
fn counter(state: &Tree, key: &[u8]) -> u64 {
    let stored = state.get(key).ok().flatten();
    let bytes = stored.and_then(|b| <[u8; 8]>::try_from(b.as_ref()).ok());
    bytes.map_or(0, u64::from_be_bytes)
}

/// Writes the counter row `key` as `value` in `batch`.
fn set_counter(batch: &mut Batch, key: &[u8], value: u64) {
    batch.insert(key, value.to_be_bytes().to_vec());
}

/// Removes `key` if it exists.
fn remove_existing(state: &Tree, batch: &mut Batch, key: Vec<u8>) -> MetaOutcome {
    if matches!(state.contains_key(&key), Ok(true)) {
        batch.remove(key);
        MetaOutcome::Applied
    } else {
        MetaOutcome::NotFound
    }
}

/// The meta group's state machine.
#[derive(Debug)]
pub struct MetaMachine {
    /// The data directory's copy of the active version, written as an activation applies (none
    /// for storage that is not in a data directory).
    pub(crate) version_file: Option<VersionFile>,
    /// The cluster versions whose commands this replica reads: the build's, or fewer for a node
    /// run as an older binary (`Options::supports`), which then reads what that binary would.
    pub(crate) reads: VersionRange,
}

impl Default for MetaMachine {
    fn default() -> Self {
        Self {
            version_file: None,
            reads: VersionRange::BUILD,
        }
    }
}

impl cluster::StateMachine for MetaMachine {
    fn apply(&self, state: &Tree, batch: &mut Batch, command: &[u8]) -> Vec<u8> {
        let outcome = match self.decode(command) {
            Ok(command) => {
                let activates = command.activates();
                let outcome = apply(state, batch, command);
                if let (Some(version), MetaOutcome::Applied) = (activates, &outcome) {
                    self.keep_version(version);
                }
                outcome
            }
            Err(e) => {
                // Only a format newer than this binary reads gets here: the cluster-version gate
                // keeps it from being written while a member cannot read it.
                tracing::error!(error = %e, "undecodable meta command; skipped");
                crate::metrics::undecodable_command("meta");
                MetaOutcome::Undecodable
            }
        };
        record::encode(&outcome)
    }
}

impl MetaMachine {
    /// A command, if this replica reads its format.
    fn decode(&self, bytes: &[u8]) -> Result<MetaCommand, String> {
        let command = record::decode::<MetaCommand>(bytes).map_err(|e| e.to_string())?;
        let written_in = command.written_in();
        if written_in > self.reads.max {
            return Err(format!(
                "a command of cluster version {written_in}; this binary reads {}",
                self.reads
            ));
        }
        Ok(command)
    }
}

impl MetaMachine {
    /// Copies a newly active version into the data directory. The apply goes on if the file
    /// cannot be written: the meta row is the truth, and start-up checks it too.
    fn keep_version(&self, version: proto::version::ClusterVersion) {
        tracing::info!(%version, "cluster version activated");
        if let Some(file) = &self.version_file {
            if let Err(e) = file.write(version) {
                tracing::error!(error = %e, "could not keep the cluster version in the data directory");
            }
        }
    }
}

/// Writes one command's changes into `batch`.
fn apply(state: &Tree, batch: &mut Batch, command: MetaCommand) -> MetaOutcome {
    match command {
        MetaCommand::PutTaskDefs(defs) => {
            for def in defs {
                batch.insert(task_key(&def.name), record::encode(&def));
            }
            MetaOutcome::Applied
        }
        MetaCommand::DeleteTaskDef { name } => remove_existing(state, batch, task_key(&name)),
        MetaCommand::PutWorkflowDef(def) => {
            batch.insert(workflow_key(&def.name, def.version), record::encode(&def));
            MetaOutcome::Applied
        }
        MetaCommand::PutWorkflowDefs(defs) => {
            for def in defs {
                batch.insert(workflow_key(&def.name, def.version), record::encode(&def));
            }
            MetaOutcome::Applied
        }
        MetaCommand::DeleteWorkflowDef { name, version } => {
            remove_existing(state, batch, workflow_key(&name, version))
        }
        MetaCommand::PutNode(entry) => put_node(state, batch, entry),
        MetaCommand::SetDraining { id, draining } => set_draining(state, batch, id, draining),
        MetaCommand::RemoveNode { id } => remove_existing(state, batch, node_key(id)),
        MetaCommand::PutEventHandler { handler, create } => {
            put_event_handler(state, batch, &handler, create)
        }
        MetaCommand::DeleteEventHandler { name } => {
            remove_existing(state, batch, handler_key(&name))
        }
        MetaCommand::PutWebhook(w) => {
            batch.insert(webhook_key(&w.name), record::encode(&w));
            MetaOutcome::Applied
        }
        MetaCommand::DeleteWebhook { name } => remove_existing(state, batch, webhook_key(&name)),
        MetaCommand::PutSchedule(s) => {
            batch.insert(schedule_key(&s.name), record::encode(&s));
            MetaOutcome::Applied
        }
        MetaCommand::DeleteSchedule { name } => remove_existing(state, batch, schedule_key(&name)),
        MetaCommand::PutSchemas(defs) => put_schemas(state, batch, defs),
        MetaCommand::DeleteSchema { name, version } => delete_schema(state, batch, &name, version),
        MetaCommand::PutDslWorkflow { def, overwrite } => {
            dsl_rows::put(state, batch, &def, overwrite)
        }
        MetaCommand::DeleteDslWorkflow {
            namespace,
            name,
            version,
        } => dsl_rows::delete(state, batch, &namespace, &name, &version),
        MetaCommand::SetUpAccess {
            signing,
            admin,
            key,
        } => access_rows::set_up(state, batch, &signing, &admin, &key),
        MetaCommand::PutApplication { app, create } => {
            access_rows::put_application(state, batch, *app, create)
        }
        MetaCommand::DeleteApplication { id } => access_rows::delete_application(state, batch, &id),
        MetaCommand::SetRole {
            application,
            role,
            granted,
        } => access_rows::set_role(state, batch, &application, role, granted),
        MetaCommand::SetGrant {
            application,
            target,
            access,
            granted,
        } => access_rows::set_grant(state, batch, &application, target, &access, granted),
        MetaCommand::PutAccessKey(key) => access_rows::put_key(state, batch, key),
        MetaCommand::SetAccessKeyStatus {
            application,
            id,
            status,
        } => access_rows::set_key_status(state, batch, &application, &id, status),
        MetaCommand::DeleteAccessKey { application, id } => {
            access_rows::delete_key(state, batch, &application, &id)
        }
        MetaCommand::PutSecret(secret) => secret_rows::put(state, batch, secret),
        MetaCommand::DeleteSecret { name } => secret_rows::delete(state, batch, &name),
        MetaCommand::RecordOperation { .. } => MetaOutcome::Applied,
        MetaCommand::RotateSigningKey {
            signing,
            retire_now,
        } => access_rows::rotate_signing_key(state, batch, signing, retire_now),
        MetaCommand::GatherEvent {
            key,
            message_id,
            event,
        } => gather_rows::gather(state, batch, &key, &message_id, &event),
        MetaCommand::GatheredStarted { key, seq } => gather_rows::started(state, batch, &key, seq),
        MetaCommand::ActivateVersion { version } => version_rows::activate(state, batch, version),
        MetaCommand::Audited { by, at, command } => {
            let (action, target) = command.summary();
            let outcome = apply(state, batch, *command);
            if outcome == MetaOutcome::Applied {
                audit_rows::append(state, batch, by, at, &action, target);
            }
            outcome
        }
    }
}

/// Stores schemas, each replacing its name and version, unless the registry would then hold
/// more than [`SCHEMAS_MAX`] versions (`Full`: nothing is written). Counted here, in the
/// replicated apply, so registrations racing through other nodes cannot pass the bound.
fn put_schemas(state: &Tree, batch: &mut Batch, defs: Vec<SchemaDef>) -> MetaOutcome {
    let held = state.scan_prefix(SCHEMA_PREFIX).count();
    let keys: std::collections::BTreeSet<Vec<u8>> = defs
        .iter()
        .map(|d| schema_key(&d.name, d.version))
        .collect();
    let new = keys
        .iter()
        .filter(|k| !matches!(state.contains_key(k), Ok(true)))
        .count();
    if held + new > SCHEMAS_MAX {
        return MetaOutcome::Full;
    }
    for def in defs {
        batch.insert(schema_key(&def.name, def.version), record::encode(&def));
    }
    MetaOutcome::Applied
}

/// Removes one version of a schema, or all of them.
fn delete_schema(state: &Tree, batch: &mut Batch, name: &str, version: Option<u32>) -> MetaOutcome {
    if let Some(v) = version {
        return remove_existing(state, batch, schema_key(name, v));
    }
    let keys: Vec<Vec<u8>> = state
        .scan_prefix(schema_prefix(name))
        .filter_map(|kv| kv.ok())
        .map(|(k, _)| k.to_vec())
        .collect();
    if keys.is_empty() {
        return MetaOutcome::NotFound;
    }
    for key in keys {
        batch.remove(key);
    }
    MetaOutcome::Applied
}

/// Marks a member draining, or not.
fn set_draining(state: &Tree, batch: &mut Batch, id: NodeId, draining: bool) -> MetaOutcome {
    let key = node_key(id);
    let Some(mut entry) = read::<NodeEntry>(state, &key) else {
        return MetaOutcome::NotFound;
    };
    entry.draining = draining;
    batch.insert(key, record::encode(&entry));
    MetaOutcome::Applied
}

/// Stores an event handler: a new one (`create`) unless its name is taken, else an update of
/// one that exists.
fn put_event_handler(
    state: &Tree,
    batch: &mut Batch,
    handler: &EventHandler,
    create: bool,
) -> MetaOutcome {
    let key = handler_key(&handler.name);
    match (matches!(state.contains_key(&key), Ok(true)), create) {
        (true, true) => MetaOutcome::Exists,
        (false, false) => MetaOutcome::NotFound,
        _ => {
            batch.insert(key, record::encode(handler));
            MetaOutcome::Applied
        }
    }
}

/// Records a member; one recorded already keeps whether it is draining, and its binary unless
/// `entry` names one. A member whose binary does not serve the active version is refused.
fn put_node(state: &Tree, batch: &mut Batch, mut entry: NodeEntry) -> MetaOutcome {
    if let Some(refused) = version_rows::admits(state, &entry) {
        return refused;
    }
    let key = node_key(entry.id);
    if let Some(old) = read::<NodeEntry>(state, &key) {
        entry.draining = old.draining;
        entry.binary = entry.binary.or(old.binary);
    }
    batch.insert(key, record::encode(&entry));
    MetaOutcome::Applied
}

fn read<T: serde::de::DeserializeOwned>(state: &Tree, key: &[u8]) -> Option<T> {
    record::decode(&state.get(key).ok()??).ok()
}

/// Compiled schemas by name and version, each with the stored bytes it was compiled from.
type SchemaCache = BTreeMap<(String, u32), (Vec<u8>, Arc<Compiled>)>;

/// Reads definitions and members from the local replica of the meta group.
#[derive(Clone)]
pub struct MetaState {
    state: Tree,
    /// Schemas compiled once: an entry is used only while the stored schema has the bytes it
    /// was compiled from, so a replaced schema is compiled again and a lookup always answers
    /// what the replica holds. At most [`SCHEMAS_MAX`] entries (emptied when full).
    schemas: Arc<Mutex<SchemaCache>>,
    /// The DSL rows the event consumers read, decoded at a generation (see [`dsl_rows`]).
    dsl_rows: Arc<Mutex<dsl_rows::Decoded>>,
    /// Access control's rows the API's guard reads, decoded at a generation.
    access: Arc<Mutex<Arc<AccessTable>>>,
}

impl engine::Catalog for MetaState {
    fn task_def(&self, name: &str) -> Option<TaskDef> {
        MetaState::task_def(self, name)
    }

    fn schema(&self, name: &str, version: Option<u32>) -> Option<Arc<Compiled>> {
        self.compiled_schema(name, version)
    }

    fn dsl_document(
        &self,
        namespace: &str,
        name: &str,
        version: &str,
    ) -> Option<serde_json::Value> {
        self.dsl_workflow(namespace, name, version)
            .map(|d| d.document)
    }

    fn cluster_version(&self) -> proto::version::ClusterVersion {
        MetaState::cluster_version(self)
    }
}

impl MetaState {
    pub fn new(state: Tree) -> Self {
        Self {
            state,
            schemas: Arc::default(),
            dsl_rows: Arc::default(),
            access: Arc::default(),
        }
    }

    /// The stored bytes of a schema version, or of its latest version.
    fn schema_bytes(&self, name: &str, version: Option<u32>) -> Option<Vec<u8>> {
        match version {
            Some(v) => self
                .state
                .get(schema_key(name, v))
                .ok()?
                .map(|b| b.to_vec()),
            None => self
                .state
                .scan_prefix(schema_prefix(name))
                .filter_map(|kv| kv.ok())
                .map(|(_, v)| v.to_vec())
                .last(),
        }
    }

    /// A version of a schema (the latest when `None`).
    pub fn schema(&self, name: &str, version: Option<u32>) -> Option<SchemaDef> {
        record::decode(&self.schema_bytes(name, version)?).ok()
    }

    /// Every version of every schema, by name then version.
    pub fn schemas(&self) -> Vec<SchemaDef> {
        self.scan(SCHEMA_PREFIX)
    }

    /// [`MetaState::schema`] compiled, from the cache while the stored schema is unchanged.
    fn compiled_schema(&self, name: &str, version: Option<u32>) -> Option<Arc<Compiled>> {
        let bytes = self.schema_bytes(name, version)?;
        let def: SchemaDef = record::decode(&bytes).ok()?;
        let key = (def.name.clone(), def.version);
        let mut cache = self.schemas.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((held, compiled)) = cache.get(&key) {
            if *held == bytes {
                return Some(compiled.clone());
            }
        }
        let compiled = Arc::new(Compiled::new(&def));
        if cache.len() >= SCHEMAS_MAX {
            cache.clear();
        }
        cache.insert(key, (bytes, compiled.clone()));
        Some(compiled)
    }

    pub fn task_def(&self, name: &str) -> Option<TaskDef> {
        let bytes = self.state.get(task_key(name)).ok()??;
        record::decode(&bytes).ok()
    }

    pub fn task_defs(&self) -> Vec<TaskDef> {
        self.state
            .scan_prefix(TASK_PREFIX)
            .filter_map(|kv| kv.ok())
            .filter_map(|(_, v)| record::decode(&v).ok())
            .collect()
    }

    /// A given version, or the latest.
    pub fn workflow_def(&self, name: &str, version: Option<u32>) -> Option<WorkflowDef> {
        let bytes = match version {
            Some(v) => self.state.get(workflow_key(name, v)).ok()??,
            None => self
                .state
                .scan_prefix(workflow_prefix(name))
                .filter_map(|kv| kv.ok())
                .map(|(_, v)| v)
                .last()?,
        };
        record::decode(&bytes).ok()
    }

    pub fn workflow_defs(&self) -> Vec<WorkflowDef> {
        self.state
            .scan_prefix(WORKFLOW_PREFIX)
            .filter_map(|kv| kv.ok())
            .filter_map(|(_, v)| record::decode(&v).ok())
            .collect()
    }

    /// The cluster's recorded members, by id.
    pub fn nodes(&self) -> Vec<NodeEntry> {
        self.state
            .scan_prefix(NODE_PREFIX)
            .filter_map(|kv| kv.ok())
            .filter_map(|(_, v)| record::decode(&v).ok())
            .collect()
    }

    /// Every event handler, by name.
    pub fn event_handlers(&self) -> Vec<EventHandler> {
        self.state
            .scan_prefix(HANDLER_PREFIX)
            .filter_map(|kv| kv.ok())
            .filter_map(|(_, v)| record::decode(&v).ok())
            .collect()
    }

    pub fn webhook(&self, name: &str) -> Option<Webhook> {
        read(&self.state, &webhook_key(name))
    }

    pub fn webhooks(&self) -> Vec<Webhook> {
        self.scan(WEBHOOK_PREFIX)
    }

    pub fn schedule(&self, name: &str) -> Option<WorkflowSchedule> {
        read(&self.state, &schedule_key(name))
    }

    pub fn schedules(&self) -> Vec<WorkflowSchedule> {
        self.scan(SCHEDULE_PREFIX)
    }

    fn scan<T: serde::de::DeserializeOwned>(&self, prefix: &[u8]) -> Vec<T> {
        self.state
            .scan_prefix(prefix)
            .filter_map(|kv| kv.ok())
            .filter_map(|(_, v)| record::decode(&v).ok())
            .collect()
    }

    /// One version of a registered DSL document.
    pub fn dsl_workflow(&self, namespace: &str, name: &str, version: &str) -> Option<DslWorkflow> {
        read(&self.state, &dsl_key(namespace, name, version))
    }

    /// Every version of one DSL document, or of every document (`None`), in key order.
    pub fn dsl_workflows(&self, of: Option<(&str, &str)>) -> Vec<DslWorkflow> {
        match of {
            Some((namespace, name)) => self.scan(&dsl_prefix(namespace, name)),
            None => self.scan(DSL_PREFIX),
        }
    }

    /// The schedule of the registered DSL version `key` (`namespace/name/version`), if it has one.
    pub fn dsl_schedule(&self, key: &str) -> Option<DslSchedule> {
        read(
            &self.state,
            &[DSL_SCHEDULES_PREFIX, key.as_bytes()].concat(),
        )
    }

    /// The schedules of the registered DSL documents that have one, in key order.
    pub fn dsl_schedules(&self) -> Arc<Vec<DslSchedule>> {
        self.dsl_rows().schedules
    }

    /// The groups the gathering `schedule.on` of version `key` completed and whose instances
    /// have not started yet, oldest first.
    pub fn gathered(&self, key: &str) -> Vec<Gathered> {
        gather_rows::ready(&self.state, key)
    }

    /// What the gathering `schedule.on` of version `key` holds between events.
    #[cfg(test)]
    pub fn gathering(&self, key: &str) -> proto::model::dsl::Gathering {
        gather_rows::gathering(&self.state, key)
    }

    /// The event types the registered DSL documents consume (`listen` and `schedule.on`).
    pub fn dsl_listened_types(&self) -> Arc<BTreeSet<String>> {
        self.dsl_rows().types
    }

    /// The DSL rows as the replica holds them: the kept copy, or decoded again when a
    /// document was written since.
    fn dsl_rows(&self) -> dsl_rows::Decoded {
        let generation = dsl_rows::generation(&self.state);
        let mut kept = self.dsl_rows.lock().unwrap_or_else(|e| e.into_inner());
        if kept.generation != generation || generation == 0 {
            let lists: Vec<Vec<String>> = self.scan(DSL_LISTENS_PREFIX);
            *kept = dsl_rows::Decoded {
                generation,
                types: Arc::new(lists.into_iter().flatten().collect()),
                schedules: Arc::new(self.scan(DSL_SCHEDULES_PREFIX)),
            };
        }
        kept.clone()
    }

    /// Access control's rows as the replica holds them: the kept copy, or decoded again when
    /// one was written since (an empty table before access control is set up).
    pub fn access(&self) -> Arc<AccessTable> {
        let generation = access_rows::generation(&self.state);
        let mut kept = self.access.lock().unwrap_or_else(|e| e.into_inner());
        if kept.generation != generation {
            *kept = Arc::new(AccessTable::decode(&self.state, generation));
        }
        kept.clone()
    }

    /// The sealed secret `name`, as the replica holds it.
    pub fn secret(&self, name: &str) -> Option<proto::model::secret::SealedSecret> {
        secret_rows::get(&self.state, name)
    }

    /// The names of the replicated store's secrets, sorted.
    pub fn secret_names(&self) -> Vec<String> {
        secret_rows::names(&self.state)
    }

    /// The audit log's entries below sequence `before` (the newest when `None`), newest first.
    pub fn audit(
        &self,
        before: Option<u64>,
        limit: usize,
    ) -> Vec<proto::record::audit::AuditEntry> {
        audit_rows::read(&self.state, before, limit)
    }

    pub fn node(&self, id: NodeId) -> Option<NodeEntry> {
        read(&self.state, &node_key(id))
    }

    /// The cluster's active version (`proto::version`).
    pub fn cluster_version(&self) -> proto::version::ClusterVersion {
        version_rows::active(&self.state)
    }

    /// Fills in each task's `taskDefinition` from the registered task definitions, so the
    /// decider needs no lookups: a worker task without one gets Conductor's defaults, a system
    /// task none (an HTTP task is retried only under a registered definition, as in Conductor).
    pub fn resolve(&self, def: &mut WorkflowDef) {
        fn walk(defs: &MetaState, list: &mut [proto::model::WorkflowTask]) {
            for t in list {
                if t.task_definition.is_none() {
                    t.task_definition = if t.task_type == proto::model::task_type::SIMPLE {
                        Some(
                            defs.task_def(&t.name)
                                .unwrap_or_else(|| TaskDef::named(&t.name)),
                        )
                    } else {
                        defs.task_def(&t.name)
                    };
                }
                for branch in &mut t.fork_tasks {
                    walk(defs, branch);
                }
                for case in t.decision_cases.values_mut() {
                    walk(defs, case);
                }
                walk(defs, &mut t.default_case);
                walk(defs, &mut t.loop_over);
            }
        }
        walk(self, &mut def.tasks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::Catalog;
    use proto::limits::DSL_WORKFLOWS_MAX;
    use serde_json::json;

    fn schema(name: &str, version: u32, data: serde_json::Value) -> SchemaDef {
        SchemaDef {
            name: name.into(),
            version,
            data: data.as_object().cloned().unwrap_or_default(),
            ..Default::default()
        }
    }

    /// An empty meta replica in a temporary directory (kept while the first is held).
    pub(super) fn replica() -> (tempfile::TempDir, Tree, MetaState) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("db");
        let state = db.open_tree("meta").expect("tree");
        (dir, state.clone(), MetaState::new(state))
    }

    pub(super) fn apply_one(state: &Tree, command: MetaCommand) -> MetaOutcome {
        let mut batch = Batch::default();
        let outcome = apply(state, &mut batch, command);
        state.apply_batch(batch).expect("applies");
        outcome
    }

    #[test]
    fn a_replica_skips_a_command_newer_than_the_versions_it_reads() {
        use cluster::StateMachine;
        let (_dir, state, meta) = replica();
        let defs = MetaCommand::PutWorkflowDefs(vec![WorkflowDef {
            name: "w".into(),
            version: 1,
            ..Default::default()
        }]);
        let bytes = record::encode(&defs);
        let apply = |machine: &MetaMachine| {
            let mut batch = Batch::default();
            let outcome = machine.apply(&state, &mut batch, &bytes);
            state.apply_batch(batch).expect("applies");
            record::decode::<MetaOutcome>(&outcome).expect("an outcome")
        };
        let old = MetaMachine {
            version_file: None,
            reads: VersionRange {
                min: proto::version::ClusterVersion::FIRST,
                max: proto::version::ClusterVersion::FIRST,
            },
        };
        assert_eq!(apply(&old), MetaOutcome::Undecodable);
        assert!(meta.workflow_def("w", Some(1)).is_none());
        assert_eq!(apply(&MetaMachine::default()), MetaOutcome::Applied);
        assert!(meta.workflow_def("w", Some(1)).is_some());
    }

    #[test]
    fn secrets_are_kept_sealed_by_name_and_bounded() {
        let (_dir, state, meta) = replica();
        let sealed = |name: String| proto::model::secret::SealedSecret {
            name,
            key_id: "k".into(),
            sealed: vec![1, 2, 3],
            update_time: 1,
            updated_by: "t".into(),
        };
        for i in 0..proto::limits::SECRETS_MAX {
            let put = MetaCommand::PutSecret(sealed(format!("s{i:04}")));
            assert_eq!(apply_one(&state, put), MetaOutcome::Applied);
        }
        let past = MetaCommand::PutSecret(sealed("one_more".into()));
        assert_eq!(apply_one(&state, past), MetaOutcome::Full);
        let again = MetaCommand::PutSecret(sealed("s0001".into()));
        assert_eq!(
            apply_one(&state, again),
            MetaOutcome::Applied,
            "a replacement"
        );
        assert_eq!(meta.secret_names().len(), proto::limits::SECRETS_MAX);
        assert_eq!(meta.secret("s0001").map(|s| s.sealed), Some(vec![1, 2, 3]));
        let delete = |name: &str| MetaCommand::DeleteSecret { name: name.into() };
        assert_eq!(apply_one(&state, delete("s0001")), MetaOutcome::Applied);
        assert_eq!(apply_one(&state, delete("s0001")), MetaOutcome::NotFound);
        assert!(meta.secret("s0001").is_none());
    }

    #[test]
    fn schemas_are_stored_by_version_compiled_once_and_bounded() {
        let (_dir, state, meta) = replica();
        let object = json!({"type": "object"});
        let put = |defs| apply_one(&state, MetaCommand::PutSchemas(defs));
        assert_eq!(
            put(vec![schema("s", 1, object), schema("s", 2, json!({}))]),
            MetaOutcome::Applied
        );
        assert_eq!(meta.schema("s", None).map(|s| s.version), Some(2));

        let first = meta
            .schema("s", Some(1))
            .and_then(|_| Catalog::schema(&meta, "s", Some(1)));
        let again = Catalog::schema(&meta, "s", Some(1));
        assert!(
            matches!((&first, &again), (Some(a), Some(b)) if Arc::ptr_eq(a, b)),
            "compiled once"
        );
        let value: proto::model::Json = [("v".to_owned(), json!("x"))].into_iter().collect();
        let nested = json!({"type": "object", "properties": {"v": {"type": "integer"}}});
        assert!(again.is_some_and(|c| c.errors(&value).is_empty()));
        put(vec![schema("s", 1, nested)]);
        let replaced = Catalog::schema(&meta, "s", Some(1)).expect("registered");
        assert_eq!(
            replaced.errors(&value).len(),
            1,
            "a replaced schema is compiled again"
        );

        let many: Vec<SchemaDef> = (3..=SCHEMAS_MAX as u32)
            .map(|v| schema("s", v, json!({})))
            .collect();
        assert_eq!(put(many), MetaOutcome::Applied);
        assert_eq!(put(vec![schema("t", 1, json!({}))]), MetaOutcome::Full);
        assert_eq!(
            put(vec![schema("s", 7, json!({}))]),
            MetaOutcome::Applied,
            "a replacement fits"
        );
        assert!(meta.schema("t", None).is_none());

        let delete = |version| {
            apply_one(
                &state,
                MetaCommand::DeleteSchema {
                    name: "s".into(),
                    version,
                },
            )
        };
        assert_eq!(delete(Some(2)), MetaOutcome::Applied);
        assert_eq!(delete(Some(2)), MetaOutcome::NotFound);
        assert_eq!(delete(None), MetaOutcome::Applied);
        assert!(meta.schemas().is_empty());
        assert_eq!(delete(None), MetaOutcome::NotFound);
    }

    fn dsl(namespace: &str, name: &str, version: &str) -> DslWorkflow {
        DslWorkflow {
            namespace: namespace.into(),
            name: name.into(),
            version: version.into(),
            document: json!({"document": {"name": name}}),
            ..Default::default()
        }
    }

    /// Stores `def`, replacing the version if it is held.
    fn put_dsl(state: &Tree, def: DslWorkflow) -> MetaOutcome {
        let def = Box::new(def);
        let command = MetaCommand::PutDslWorkflow {
            def,
            overwrite: true,
        };
        apply_one(state, command)
    }

    #[test]
    fn the_listened_types_and_schedules_follow_every_document_write() {
        let (_dir, state, meta) = replica();
        let put = |listens: &[&str], schedule: bool| {
            let mut def = dsl("ns", "a", "1.0.0");
            def.listens = listens.iter().map(|t| t.to_string()).collect();
            if schedule {
                def.document["schedule"] = json!({"on": {"one": {"with": {"type": "go"}}}});
            }
            put_dsl(&state, def)
        };
        assert!(meta.dsl_listened_types().is_empty());
        assert_eq!(put(&["x"], false), MetaOutcome::Applied);
        assert_eq!(*meta.dsl_listened_types(), BTreeSet::from(["x".to_owned()]));
        assert!(meta.dsl_schedules().is_empty());
        assert_eq!(put(&["y", "go"], true), MetaOutcome::Applied);
        let types = meta.dsl_listened_types();
        assert_eq!(*types, BTreeSet::from(["go".to_owned(), "y".to_owned()]));
        assert_eq!(meta.dsl_schedules().len(), 1);
        assert!(
            Arc::ptr_eq(&types, &meta.dsl_listened_types()),
            "kept, not decoded again"
        );
        let delete = MetaCommand::DeleteDslWorkflow {
            namespace: "ns".into(),
            name: "a".into(),
            version: "1.0.0".into(),
        };
        assert_eq!(apply_one(&state, delete), MetaOutcome::Applied);
        assert!(meta.dsl_listened_types().is_empty());
        assert!(meta.dsl_schedules().is_empty());
    }

    #[test]
    fn a_gathering_schedule_keeps_its_groups_until_they_start_and_its_version_goes() {
        let (_dir, state, meta) = replica();
        let put = |on: serde_json::Value| {
            let mut def = dsl("ns", "a", "1.0.0");
            def.document["schedule"] = json!({ "on": on });
            put_dsl(&state, def)
        };
        let all = json!({"all": [{"with": {"type": "a"}}, {"with": {"type": "b"}}]});
        assert_eq!(put(all.clone()), MetaOutcome::Applied);
        let key = "ns/a/1.0.0";
        let offer = |id: &str, kind: &str| {
            let event = json!({"id": id, "type": kind});
            let command = MetaCommand::GatherEvent {
                key: key.into(),
                message_id: id.into(),
                event,
            };
            apply_one(&state, command)
        };
        assert_eq!(offer("1", "a"), MetaOutcome::Applied);
        assert_eq!(offer("2", "a"), MetaOutcome::Applied);
        assert!(meta.gathered(key).is_empty());
        assert_eq!(meta.gathering(key).groups.len(), 2);
        let group_rows = || state.scan_prefix(gather_rows::GROUP_PREFIX).count();
        assert_eq!(group_rows(), 2, "a row per group");
        let head: proto::model::dsl::Gathering = read(
            &state,
            &[gather_rows::STATE_PREFIX, key.as_bytes()].concat(),
        )
        .expect("held");
        assert!(head.groups.is_empty(), "the groups are not in the head row");
        assert_eq!(offer("3", "b"), MetaOutcome::Applied);
        let ready = meta.gathered(key);
        assert_eq!(ready.len(), 1);
        assert_eq!((ready[0].seq, ready[0].events.len()), (1, 2));
        assert_eq!(group_rows(), 1, "the completed group's row goes");
        assert_eq!(meta.gathering(key).groups.keys().collect::<Vec<_>>(), [&2]);

        let started = |seq| {
            apply_one(
                &state,
                MetaCommand::GatheredStarted {
                    key: key.into(),
                    seq,
                },
            )
        };
        assert_eq!(started(1), MetaOutcome::Applied);
        assert_eq!(started(1), MetaOutcome::NotFound);
        assert!(meta.gathered(key).is_empty());

        // Another strategy starts afresh, counting on.
        assert_eq!(
            put(json!({"all": [{"with": {"type": "a"}}]})),
            MetaOutcome::Applied
        );
        assert!(meta.gathering(key).groups.is_empty());
        assert_eq!(group_rows(), 0);
        assert_eq!(offer("4", "a"), MetaOutcome::Applied);
        assert_eq!(meta.gathered(key)[0].seq, 2);

        let delete = MetaCommand::DeleteDslWorkflow {
            namespace: "ns".into(),
            name: "a".into(),
            version: "1.0.0".into(),
        };
        assert_eq!(apply_one(&state, delete), MetaOutcome::Applied);
        assert!(meta.gathered(key).is_empty());
        assert_eq!(meta.gathering(key), Default::default());
        assert_eq!(offer("5", "b"), MetaOutcome::NotFound, "no such version");
    }

    #[test]
    fn every_kind_of_row_has_keys_of_its_own() {
        let keys: [&[u8]; 22] = [
            TASK_PREFIX,
            WORKFLOW_PREFIX,
            NODE_PREFIX,
            HANDLER_PREFIX,
            WEBHOOK_PREFIX,
            SCHEDULE_PREFIX,
            SCHEMA_PREFIX,
            DSL_PREFIX,
            DSL_LISTENS_PREFIX,
            DSL_SCHEDULES_PREFIX,
            dsl_rows::GENERATION_KEY,
            gather_rows::STATE_PREFIX,
            gather_rows::GROUP_PREFIX,
            gather_rows::READY_PREFIX,
            secret_rows::PREFIX,
            access_rows::SIGNING_KEY,
            access_rows::RETIRED_SIGNING_KEY,
            access_rows::APPLICATION_PREFIX,
            access_rows::KEY_PREFIX,
            access_rows::GENERATION_KEY,
            audit_rows::ENTRY_PREFIX,
            audit_rows::NEXT_KEY,
        ];
        for (i, p) in keys.iter().enumerate() {
            for (j, k) in keys.iter().enumerate() {
                let under = p.ends_with(b"/") && k.starts_with(p);
                let (p, k) = (String::from_utf8_lossy(p), String::from_utf8_lossy(k));
                assert!(i == j || (p != k && !under), "{k:?} is among {p:?}'s rows");
            }
        }
    }

    #[test]
    fn dsl_documents_are_stored_by_version_listed_by_name_and_bounded() {
        let (_dir, state, meta) = replica();
        let put = |d| {
            let def = Box::new(d);
            apply_one(
                &state,
                MetaCommand::PutDslWorkflow {
                    def,
                    overwrite: false,
                },
            )
        };
        assert_eq!(put(dsl("ns", "a", "1.0.0")), MetaOutcome::Applied);
        assert_eq!(put(dsl("ns", "a", "1.1.0")), MetaOutcome::Applied);
        assert_eq!(put(dsl("ns", "ab", "1.0.0")), MetaOutcome::Applied);
        let versions: Vec<String> = meta
            .dsl_workflows(Some(("ns", "a")))
            .into_iter()
            .map(|d| d.version)
            .collect();
        assert_eq!(versions, ["1.0.0", "1.1.0"], "not ns/ab's");
        assert_eq!(meta.dsl_workflows(None).len(), 3);
        assert!(meta.dsl_workflow("ns", "a", "1.1.0").is_some());

        for i in 3..DSL_WORKFLOWS_MAX {
            assert_eq!(
                put(dsl("ns", "many", &format!("0.0.{i}"))),
                MetaOutcome::Applied
            );
        }
        assert_eq!(put(dsl("ns", "b", "1.0.0")), MetaOutcome::Full);
        assert_eq!(
            put(dsl("ns", "a", "1.0.0")),
            MetaOutcome::Applied,
            "a replacement fits"
        );
        let mut other = dsl("ns", "a", "1.0.0");
        other.document = json!({"document": {"name": "a"}, "do": []});
        let other_put = |overwrite| {
            let def = Box::new(other.clone());
            apply_one(&state, MetaCommand::PutDslWorkflow { def, overwrite })
        };
        assert_eq!(other_put(false), MetaOutcome::Exists, "another document");
        assert_eq!(other_put(true), MetaOutcome::Applied);
        assert_eq!(
            meta.dsl_workflow("ns", "a", "1.0.0").map(|d| d.document),
            Some(other.document.clone())
        );

        let delete = |version: &str| {
            apply_one(
                &state,
                MetaCommand::DeleteDslWorkflow {
                    namespace: "ns".into(),
                    name: "a".into(),
                    version: version.into(),
                },
            )
        };
        assert_eq!(delete("1.0.0"), MetaOutcome::Applied);
        assert_eq!(delete("1.0.0"), MetaOutcome::NotFound);
        assert!(meta.dsl_workflow("ns", "a", "1.0.0").is_none());
    }
}
