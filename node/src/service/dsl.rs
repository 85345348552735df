//! Serverless Workflow (DSL 1.0) documents and their instances. A document is registered under
//! its header's namespace, name and version, replicated through the meta group; an instance is a
//! workflow started through the usual start path under the definition that carries the document
//! (`engine::dsl::workflow_def`), read in the DSL's terms (`engine::dsl::view`) and operated on
//! as any workflow (suspend = pause, cancel = terminate).

use super::workflows::PreparedStart;
use super::{Definitions, Workflows};
use crate::error::{Error, Result};
use engine::dsl::{Document, Header};
use engine::Input;
use proto::limits::DSL_WORKFLOWS_MAX;
use proto::model::{DslWorkflow, StartWorkflowRequest};
use proto::record::{MetaCommand, MetaOutcome};
use serde::Serialize;
use serde_json::Value;

/// Why a document could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum PutDslError {
    /// The document is not valid (its problems carry their JSON pointers); nothing was stored.
    #[error(transparent)]
    Document(#[from] engine::dsl::Error),
    /// Anything else: a conflict, a full registry, an unavailable meta group.
    #[error(transparent)]
    Node(#[from] Error),
}

/// Which versions a listing shows: every document's, or one namespace and name's.
pub type DslListing<'a> = Option<(&'a str, &'a str)>;

/// Semantic versions in order: major, minor and patch as numbers, then the rest as text.
fn version_order(version: &str) -> (Vec<u64>, String) {
    let (core, rest) = version
        .find(['-', '+'])
        .map_or((version, ""), |at| version.split_at(at));
    let numbers = core.split('.').map(|n| n.parse().unwrap_or(0)).collect();
    (numbers, rest.to_owned())
}

/// A `schedule.cron` that this runtime's cron parser reads (five fields, or six with seconds
/// first); else the rule it breaks, at its pointer.
fn check_cron(doc: &Document) -> Result<(), engine::dsl::Error> {
    let Some(expression) = doc.json().pointer("/schedule/cron").and_then(Value::as_str) else {
        return Ok(());
    };
    match super::triggers::Cron::pattern("the cron expression", expression, chrono_tz::UTC) {
        Ok(_) => Ok(()),
        Err(e) => {
            let problem = engine::dsl::Problem::new("/schedule/cron", e.to_string());
            Err(engine::dsl::Error::Rules(engine::dsl::Problems::new(vec![
                problem,
            ])))
        }
    }
}

/// The literal event types under `value` (`.../with/type`, not an expression), with their
/// pointers below `at`.
fn event_types(value: &Value, at: String, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            let literal = map.get("with").and_then(|w| w.get("type")?.as_str());
            if let Some(t) = literal.filter(|t| !t.trim_start().starts_with("${")) {
                found.push((format!("{at}/with/type"), t.to_owned()));
            }
            for (key, v) in map {
                let token = key.replace('~', "~0").replace('/', "~1");
                event_types(v, format!("{at}/{token}"), found);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                event_types(v, format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}

/// The refusal of another document under a registered version.
fn conflict(header: &Header) -> Error {
    Error::Conflict(format!(
        "workflow {}/{}/{} is registered with another document; \
         register it with overwrite=true to replace it",
        header.namespace, header.name, header.version
    ))
}

/// A document's check without registering it.
#[derive(Debug, Serialize)]
pub struct Validated {
    pub document: Header,
    /// Whether this runtime runs everything the document asks; `unsupported` says what not.
    pub supported: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unsupported: Vec<engine::dsl::Problem>,
}

impl Definitions {
    /// The secrets the document declares (`use.secrets`) that this node's store lacks, each at
    /// its pointer.
    fn missing_secrets(&self, doc: &Document) -> Vec<engine::dsl::Problem> {
        let declared = doc.json().pointer("/use/secrets").and_then(Value::as_array);
        declared
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, name)| Some((i, name.as_str()?)))
            .filter(|(_, name)| !self.secrets.contains(name))
            .map(|(i, name)| {
                let detail = format!(
                    "the secret '{name}' is not in the node's secrets store (--secrets-dir)"
                );
                engine::dsl::Problem::new(format!("/use/secrets/{i}"), detail)
            })
            .collect()
    }

    /// The event types the document names (an `emit`'s, a `listen` filter's, a schedule's)
    /// that cannot travel on this node's event bus (`--dsl-events`), each at its pointer.
    /// A filter that names no event type, on a bus that cannot offer it every type (NATS), is
    /// one too.
    fn untravelled_types(&self, doc: &Document) -> Vec<engine::dsl::Problem> {
        let bus = self.providers.dsl_bus();
        let mut found = Vec::new();
        event_types(doc.json(), String::new(), &mut found);
        let mut refused: Vec<_> = found
            .into_iter()
            .filter_map(|(at, t)| {
                let why = bus.check_type(&t).err()?;
                let detail = format!("events of type '{t}' cannot travel on the event bus: {why}");
                Some(engine::dsl::Problem::new(at, detail))
            })
            .collect();
        if !bus.hears_every_type() {
            let detail = "a filter that names no event type hears events of every type, which \
                          NATS cannot offer (it keeps each subject in a stream of its own); name \
                          the type, or choose --dsl-events conductor or amqp_exchange:NAME";
            let unheard = engine::dsl::any_type_filters(doc).into_iter();
            refused.extend(unheard.map(|at| engine::dsl::Problem::new(at, detail.to_owned())));
        }
        refused
    }

    /// The `run`s of the document that start a process of a kind this node does not run
    /// (`--dsl-run`), each at its pointer.
    fn refused_processes(&self, doc: &Document) -> Vec<engine::dsl::Problem> {
        use crate::events::process::ProcessOptions;
        engine::dsl::processes(doc)
            .into_iter()
            .filter(|run| !self.processes.allows(run.kind))
            .map(|run| {
                let word = ProcessOptions::word(run.kind);
                let detail = format!(
                    "this node does not run {word} processes; its operator allows them with `baton server --dsl-run {word}`"
                );
                engine::dsl::Problem::new(run.at, detail)
            })
            .collect()
    }

    /// What the node itself refuses in a document: secrets its store lacks, processes its
    /// operator did not allow, event types its event bus cannot carry.
    fn refused_here(&self, doc: &Document) -> Vec<engine::dsl::Problem> {
        let mut refused = self.missing_secrets(doc);
        refused.extend(self.refused_processes(doc));
        refused.extend(self.untravelled_types(doc));
        refused
    }

    /// Checks a document as registering it would, and stores nothing; a document that is
    /// valid but asks for what this runtime does not do is answered with what that is.
    pub async fn validate_dsl(&self, text: &str) -> Result<Validated, PutDslError> {
        self.host.catch_up_meta().await?;
        let doc = engine::dsl::load_with(text, &self.host.defs)?;
        check_cron(&doc)?;
        let mut unsupported = match engine::dsl::check_supported(&doc) {
            Ok(()) => Vec::new(),
            Err(e) => e.problems(),
        };
        unsupported.extend(self.refused_here(&doc));
        Ok(Validated {
            document: doc.header().clone(),
            supported: unsupported.is_empty(),
            unsupported,
        })
    }

    /// Registers a document (YAML or JSON text) after checking it. A version registered with
    /// another document is refused unless `overwrite`; registering the same document again
    /// changes nothing. Answers the document's header.
    pub async fn put_dsl(&self, text: &str, overwrite: bool) -> Result<Header, PutDslError> {
        self.host.catch_up_meta().await?;
        // A function that is a registered task type is a worker's: its name needs no
        // declaration.
        let doc = engine::dsl::load_with(text, &self.host.defs)?;
        engine::dsl::check_supported(&doc)?;
        check_cron(&doc)?;
        let refused = self.refused_here(&doc);
        if !refused.is_empty() {
            let problems = engine::dsl::Problems::new(refused);
            return Err(engine::dsl::Error::Unsupported(problems).into());
        }
        let header = doc.header().clone();
        let existing =
            self.host
                .defs
                .dsl_workflow(&header.namespace, &header.name, &header.version);
        match &existing {
            Some(old) if old.document == *doc.json() => return Ok(header),
            Some(_) if !overwrite => return Err(conflict(&header).into()),
            _ => {}
        }
        let now = self.host.clock.now_ms();
        let def = DslWorkflow {
            namespace: header.namespace.clone(),
            name: header.name.clone(),
            version: header.version.clone(),
            document: doc.json().clone(),
            listens: engine::dsl::listened_types(&doc),
            create_time: existing.map_or(now, |old| old.create_time),
            update_time: now,
        };
        match self
            .host
            .propose_meta(MetaCommand::PutDslWorkflow {
                def: Box::new(def),
                overwrite,
            })
            .await?
        {
            MetaOutcome::Exists => Err(conflict(&header).into()),
            MetaOutcome::Full => Err(Error::TooLarge(format!(
                "at most {DSL_WORKFLOWS_MAX} workflow document versions are registered; \
                 delete some first"
            ))
            .into()),
            _ => Ok(header),
        }
    }

    /// One registered version.
    pub fn dsl(&self, namespace: &str, name: &str, version: &str) -> Result<DslWorkflow> {
        self.host
            .defs
            .dsl_workflow(namespace, name, version)
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "No such workflow document: {namespace}/{name}/{version}"
                ))
            })
    }

    /// The registered versions (of one namespace and name, or all), each by namespace and name
    /// then in semantic-version order.
    pub fn dsl_list(&self, of: DslListing<'_>) -> Vec<DslWorkflow> {
        let mut all = self.host.defs.dsl_workflows(of);
        all.sort_by(|a, b| {
            (&a.namespace, &a.name, version_order(&a.version)).cmp(&(
                &b.namespace,
                &b.name,
                version_order(&b.version),
            ))
        });
        all
    }

    /// Removes one version. Instances running it keep their copy of the document.
    pub async fn delete_dsl(&self, namespace: &str, name: &str, version: &str) -> Result<()> {
        let command = MetaCommand::DeleteDslWorkflow {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            version: version.to_owned(),
        };
        match self.host.propose_meta(command).await? {
            MetaOutcome::Applied => Ok(()),
            _ => Err(Error::NotFound(format!(
                "No such workflow document: {namespace}/{name}/{version}"
            ))),
        }
    }
}

impl Workflows {
    /// Starts an instance of a registered version with `input` (a JSON object); answers its id.
    pub async fn start_dsl(&self, key: (&str, &str, &str), input: Value) -> Result<String> {
        let request = StartWorkflowRequest {
            input: engine::dsl::stored_input(input).map_err(Error::Invalid)?,
            ..StartWorkflowRequest::default()
        };
        self.start_dsl_with(key, request).await
    }

    /// [`Workflows::start_dsl`] with what a Conductor start may set besides the input
    /// (correlation id, idempotency key).
    pub async fn start_dsl_with(
        &self,
        key: (&str, &str, &str),
        request: StartWorkflowRequest,
    ) -> Result<String> {
        let prepared = self.prepare_dsl(key, request).await?;
        self.submit_start(prepared).await
    }

    /// A start of the registered version `key`, checked, not yet submitted: `request` gives the
    /// input and what a Conductor start may set besides (correlation id, idempotency key); its
    /// definition is the document's.
    pub(crate) async fn prepare_dsl(
        &self,
        (namespace, name, version): (&str, &str, &str),
        mut request: StartWorkflowRequest,
    ) -> Result<PreparedStart> {
        self.host.catch_up_meta().await?;
        let stored = self.definitions.dsl(namespace, name, version)?;
        let doc = Document::from_stored(stored.document).map_err(|e| {
            Error::Internal(format!("stored document {namespace}/{name}/{version}: {e}"))
        })?;
        let def = engine::dsl::workflow_def(&doc);
        request.name = def.name.clone();
        request.version = Some(def.version);
        request.workflow_def = Some(def);
        proto::check::start_request(&request)?;
        let def = request.workflow_def.take().unwrap_or_default();
        self.prepare_with(request, def, None)
    }

    /// An instance in the DSL's terms; `NotFound` when `id` is not a DSL instance.
    pub async fn dsl_instance(&self, id: &str) -> Result<Value> {
        let record = self
            .host
            .record(&super::workflows::parse_workflow_id(id)?)
            .await?;
        let mut view = engine::dsl::view(&record.workflow).ok_or_else(|| not_an_instance(id))?;
        if let Some(outbox) = &record.lifecycle {
            let counts =
                serde_json::json!({"pending": outbox.pending.len(), "dropped": outbox.dropped});
            view["lifecycle"] = counts;
        }
        Ok(view)
    }

    /// Suspends an instance (Conductor's pause).
    pub async fn suspend_dsl(&self, id: &str) -> Result<()> {
        self.dsl_only(id).await?;
        self.pause(id).await
    }

    /// Resumes a suspended instance.
    pub async fn resume_dsl(&self, id: &str) -> Result<()> {
        self.dsl_only(id).await?;
        self.resume(id).await
    }

    /// Cancels an instance (Conductor's terminate).
    pub async fn cancel_dsl(&self, id: &str) -> Result<()> {
        self.dsl_only(id).await?;
        self.terminate(id, Some("cancelled".into())).await
    }

    /// Offers a CloudEvent to the instance's running `listen` tasks (see `engine::dsl::run`),
    /// named by its `source` and `id`: the same event sent again is not consumed twice.
    pub async fn deliver_dsl_event(&self, id: &str, event: Value) -> Result<()> {
        let text = |key: &str| {
            event
                .get(key)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
        };
        let (Some(event_id), Some(_)) = (text("id"), text("type")) else {
            return Err(Error::Invalid(
                "an event is a CloudEvent: a JSON object with its 'id' and 'type' (strings)".into(),
            ));
        };
        let message_id = format!("{}/{event_id}", text("source").unwrap_or_default());
        self.dsl_only(id).await?;
        self.command(id, Input::Listened { message_id, event })
            .await
    }

    /// `NotFound` unless `id` is a DSL instance.
    async fn dsl_only(&self, id: &str) -> Result<()> {
        if engine::dsl::is_dsl(&self.workflow(id, false).await?) {
            Ok(())
        } else {
            Err(not_an_instance(id))
        }
    }
}

fn not_an_instance(id: &str) -> Error {
    Error::NotFound(format!(
        "workflow {id} is not a Serverless Workflow instance"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_semantic_versions() {
        let mut v = ["1.10.0", "1.2.0", "1.2.0-rc.1", "0.9.9", "2.0.0"];
        v.sort_by_key(|s| version_order(s));
        assert_eq!(v, ["0.9.9", "1.2.0", "1.2.0-rc.1", "1.10.0", "2.0.0"]);
    }
}
