//! A2A: the node as an agent of the Agent2Agent protocol, whose skills are workflows.
//!
//! A workflow definition whose metadata holds `"a2a": {"skill": {...}}` is a skill (its latest
//! version); a message sent to a skill starts a run of that workflow, and the run is the A2A task:
//! the task id is the workflow id and the context id its correlation id, so every task lives in
//! the replicated workflow store (it survives restarts and failovers) and nothing is kept only in
//! this node's memory. Which definitions are skills is asked of [`SkillSource`]s; this file holds
//! the Conductor one ([`ConductorSkills`]). The wire format (JSON-RPC, both protocol versions) is
//! `crate::api::a2a`'s.

mod follow_up;

pub use follow_up::FollowUp;

use super::{Definitions, Workflows};
use crate::error::Error;
use crate::watch::Until;
use proto::model::{Json, StartWorkflowRequest, Workflow, WorkflowDef, WorkflowStatus};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Longest a blocking `message/send` waits for its workflow to end; then it answers the task as it
/// stands (still working), and the client reads it again later.
pub const SEND_WAIT_MAX: Duration = Duration::from_secs(60);
/// Longest one stream (`message/stream`, `tasks/resubscribe`) follows a task; then it ends without
/// a final event, and the client resubscribes.
pub const STREAM_FOLLOW_MAX: Duration = Duration::from_secs(600);
/// Most streams this node serves at once (each holds a connection while its workflow runs).
pub const STREAMS_MAX: usize = 256;
/// Most tasks one `tasks/list` page holds.
pub const LIST_PAGE_MAX: usize = 100;
/// The reason a canceled task's workflow is terminated with.
pub const CANCEL_REASON: &str = "canceled through A2A (tasks/cancel)";

/// One skill of the agent: a workflow a message can start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    /// The workflow definition a message to this skill starts, and its version.
    pub workflow: String,
    pub version: u32,
    /// The registered Serverless Workflow document (namespace, name, version) a message
    /// starts an instance of, for a skill that is one.
    pub document: Option<(String, String, String)>,
}

/// Where skills come from. Each source marks some workflow definitions as skills; the agent's
/// skills are every source's, the first source's winning when two name the same skill id.
pub trait SkillSource: Send + Sync {
    /// The skills this source exposes now, one per workflow (its latest version).
    fn skills(&self) -> Vec<Skill>;
    /// Whether a run of `def` is a task of this agent: `def` (the definition the run started
    /// with) was marked as a skill.
    fn marks(&self, def: &WorkflowDef) -> bool;
}

/// Conductor definitions marked in their (Orkes-style) `metadata`: `{"a2a": {"skill": {"id"?,
/// "name"?, "description"?, "tags"?}}}`, kept in the definition's unknown fields.
pub struct ConductorSkills {
    definitions: Arc<Definitions>,
}

impl SkillSource for ConductorSkills {
    fn skills(&self) -> Vec<Skill> {
        let mut latest: BTreeMap<String, WorkflowDef> = BTreeMap::new();
        for def in self.definitions.workflow_defs() {
            if latest
                .get(&def.name)
                .is_none_or(|have| have.version < def.version)
            {
                latest.insert(def.name.clone(), def);
            }
        }
        latest.values().filter_map(conductor_skill).collect()
    }

    fn marks(&self, def: &WorkflowDef) -> bool {
        skill_mark(&def.extra).is_some()
    }
}

/// The skill mark of a Conductor definition's unknown fields: `metadata.a2a.skill`, an object.
pub fn skill_mark(extra: &Json) -> Option<&Json> {
    extra.get("metadata")?.get("a2a")?.get("skill")?.as_object()
}

/// The skill a Conductor definition exposes, if it is marked.
pub fn conductor_skill(def: &WorkflowDef) -> Option<Skill> {
    let mark = skill_mark(&def.extra)?;
    let description = def.description.clone().unwrap_or_default();
    Some(skill_of_mark(mark, &def.name, def.version, &description))
}

/// A skill from its mark (`id` defaults to the workflow's name, `name` to the id, `description`
/// to the definition's); fields of another type than the protocol's are left at their default.
pub fn skill_of_mark(mark: &Json, workflow: &str, version: u32, description: &str) -> Skill {
    let text = |field: &str| mark.get(field).and_then(Value::as_str).map(str::to_owned);
    let id = text("id").unwrap_or_else(|| workflow.to_owned());
    let tags = mark
        .get("tags")
        .and_then(Value::as_array)
        .map(|tags| {
            tags.iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Skill {
        name: text("name").unwrap_or_else(|| id.clone()),
        description: text("description").unwrap_or_else(|| description.to_owned()),
        id,
        tags,
        workflow: workflow.to_owned(),
        version,
        document: None,
    }
}

/// Serverless Workflow documents marked in their header: `document.metadata.a2a.skill`.
pub struct DslSkills {
    definitions: Arc<Definitions>,
}

/// The skill mark of a document: `document.metadata.a2a.skill`, an object.
fn dsl_mark(document: &Value) -> Option<&Json> {
    document
        .pointer("/document/metadata/a2a/skill")?
        .as_object()
}

impl SkillSource for DslSkills {
    fn skills(&self) -> Vec<Skill> {
        // Listed by namespace and name, then oldest version first: the last of each wins.
        let mut latest: BTreeMap<(String, String), Skill> = BTreeMap::new();
        for def in self.definitions.dsl_list(None) {
            let Some(mark) = dsl_mark(&def.document) else {
                continue;
            };
            let header = def.document.get("document");
            let text = |k: &str| header.and_then(|h| h.get(k)).and_then(Value::as_str);
            let description = text("summary").or(text("title")).unwrap_or_default();
            let mut skill = skill_of_mark(mark, &def.name, 1, description);
            skill.document = Some((def.namespace.clone(), def.name.clone(), def.version.clone()));
            latest.insert((def.namespace, def.name), skill);
        }
        latest.into_values().collect()
    }

    fn marks(&self, def: &WorkflowDef) -> bool {
        def.dsl.as_deref().and_then(dsl_mark).is_some()
    }
}

/// Why an A2A operation failed; each kind is one A2A error code (`crate::api::a2a`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum A2aError {
    #[error("{0}")]
    TaskNotFound(String),
    #[error("{0}")]
    NotCancelable(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    InvalidParams(String),
    /// Every stream slot is taken; the client may retry.
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Node(Error),
}

/// A message that starts a task.
#[derive(Debug, Clone)]
pub struct SendRequest {
    pub skill: Skill,
    pub input: Json,
    pub context_id: String,
    /// The message's id: the start's idempotency key, so a message sent again answers the
    /// task the first one started instead of starting another.
    pub message_id: String,
    /// How long to wait for the workflow to end before answering (none: answer at once).
    pub wait: Option<Duration>,
}

/// Which tasks `tasks/list` answers.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub context_id: Option<String>,
    /// Any of these statuses; empty means any.
    pub statuses: Vec<WorkflowStatus>,
    pub start: usize,
    pub size: usize,
}

/// The A2A service: skills from its sources, tasks as workflows.
pub struct A2a {
    workflows: Arc<Workflows>,
    /// The node's HTTP address (the agent card's URL when a request names no host).
    pub http: std::net::SocketAddr,
    sources: Vec<Box<dyn SkillSource>>,
    streams: Arc<Semaphore>,
}

impl A2a {
    /// The service over the node's definitions. Another kind of definition that can be a skill
    /// adds its [`SkillSource`] to `sources` here.
    pub(crate) fn new(
        definitions: Arc<Definitions>,
        workflows: Arc<Workflows>,
        http: std::net::SocketAddr,
    ) -> Arc<Self> {
        let sources: Vec<Box<dyn SkillSource>> = vec![
            Box::new(ConductorSkills {
                definitions: definitions.clone(),
            }),
            Box::new(DslSkills { definitions }),
        ];
        Arc::new(Self {
            workflows,
            http,
            sources,
            streams: Arc::new(Semaphore::new(STREAMS_MAX)),
        })
    }

    /// Every skill, by id (the first source's wins a shared id).
    pub fn skills(&self) -> Vec<Skill> {
        let mut by_id: BTreeMap<String, Skill> = BTreeMap::new();
        for skill in self.sources.iter().flat_map(|s| s.skills()) {
            by_id.entry(skill.id.clone()).or_insert(skill);
        }
        by_id.into_values().collect()
    }

    /// The skill a message names, or the only one when it names none.
    pub fn skill(&self, id: Option<&str>) -> Result<Skill, A2aError> {
        pick_skill(self.skills(), id)
    }

    /// Starts the skill's workflow; answers it as it stands once it ended or asks for input, or
    /// the wait is over (at once without a wait).
    pub async fn send(&self, send: SendRequest) -> Result<Workflow, A2aError> {
        let request = StartWorkflowRequest {
            name: send.skill.workflow.clone(),
            version: Some(send.skill.version),
            correlation_id: Some(send.context_id),
            input: send.input,
            idempotency_key: Some(send.message_id),
            ..StartWorkflowRequest::default()
        };
        let wait = send.wait.unwrap_or_default().min(SEND_WAIT_MAX);
        let deadline = Instant::now() + wait;
        let prepared = match &send.skill.document {
            Some((namespace, name, version)) => {
                let key = (namespace.as_str(), name.as_str(), version.as_str());
                self.workflows.prepare_dsl(key, request).await
            }
            None => self.workflows.prepare_start(request, None).await,
        };
        let until = Until {
            listening: true,
            ..Until::default()
        };
        let started = async {
            self.workflows
                .execute_prepared(prepared?, &until, deadline)
                .await
        };
        started.await.map_err(invalid_or_node)
    }

    /// The task `id`: a run of a workflow that was a skill when it started.
    pub async fn task(&self, id: &str) -> Result<Workflow, A2aError> {
        let not_found = || A2aError::TaskNotFound(format!("no task {id}"));
        let wf = match self.workflows.workflow(id, false).await {
            Ok(wf) => wf,
            Err(Error::NotFound(_) | Error::Invalid(_)) => return Err(not_found()),
            Err(e) => return Err(A2aError::Node(e)),
        };
        if self.marked(&wf) {
            Ok(wf)
        } else {
            Err(not_found())
        }
    }

    /// Whether `wf` is a task: it started from a definition marked as a skill.
    fn marked(&self, wf: &Workflow) -> bool {
        self.sources
            .iter()
            .any(|s| s.marks(&wf.workflow_definition))
    }

    /// Cancels the task `id` (terminates its workflow); answers it as it stands then.
    pub async fn cancel(&self, id: &str) -> Result<Workflow, A2aError> {
        let wf = self.task(id).await?;
        let not_cancelable = || A2aError::NotCancelable(format!("task {id} has ended"));
        if wf.status.is_terminal() {
            return Err(not_cancelable());
        }
        match self
            .workflows
            .terminate(id, Some(CANCEL_REASON.to_owned()))
            .await
        {
            Ok(()) => self.task(id).await,
            Err(Error::Conflict(_)) => Err(not_cancelable()),
            Err(e) => Err(A2aError::Node(e)),
        }
    }

    /// Waits until `deadline` for the task `id` to end or ask for input; answers it as it
    /// stands then.
    pub async fn wait_settled(&self, id: &str, deadline: Instant) -> Result<Workflow, A2aError> {
        let wid = super::workflows::parse_workflow_id(id).map_err(A2aError::Node)?;
        let until = Until {
            listening: true,
            ..Until::default()
        };
        let record = self.workflows.wait_hops(&wid, &until, deadline, 0, None);
        Ok(record.await.map_err(A2aError::Node)?.workflow)
    }

    /// A slot for one stream, held while it lasts.
    pub fn stream_slot(&self) -> Result<OwnedSemaphorePermit, A2aError> {
        self.streams.clone().try_acquire_owned().map_err(|_| {
            A2aError::Busy(format!(
                "this node serves {STREAMS_MAX} streams already; retry"
            ))
        })
    }

    /// A page of the skills' tasks, newest first, and how many match in all: a search per
    /// skill's workflow (and status), merged.
    pub async fn list(&self, query: &ListQuery) -> Result<(Vec<Workflow>, usize), A2aError> {
        let size = query.size.clamp(1, LIST_PAGE_MAX);
        let statuses: Vec<Option<WorkflowStatus>> = match query.statuses.as_slice() {
            [] => vec![None],
            some => some.iter().copied().map(Some).collect(),
        };
        let (mut total, mut hits) = (0, Vec::new());
        for workflow in self.skills().into_iter().map(|s| s.workflow) {
            for status in &statuses {
                let search = super::SearchQuery {
                    workflow_name: Some(workflow.clone()),
                    correlation_id: query.context_id.clone(),
                    status: *status,
                    free_text: None,
                    start: 0,
                    size: query.start + size,
                };
                let found = self
                    .workflows
                    .search(search)
                    .await
                    .map_err(A2aError::Node)?;
                total += usize::try_from(found.total_hits).unwrap_or(usize::MAX);
                hits.extend(found.results);
            }
        }
        hits.sort_by(|a, b| b.start_time.cmp(&a.start_time));
        let ids = hits.into_iter().skip(query.start).take(size);
        let wfs = self
            .workflows
            .read_all(ids.map(|h| h.workflow_id).collect(), false);
        let wfs = wfs.await.map_err(A2aError::Node)?.into_iter();
        Ok((wfs.filter(|wf| self.marked(wf)).collect(), total))
    }
}

/// The skill named `id` among `skills`, or the only one when `id` is none.
pub fn pick_skill(skills: Vec<Skill>, id: Option<&str>) -> Result<Skill, A2aError> {
    let names = || {
        skills
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match id {
        Some(id) => match skills.iter().find(|s| s.id == id) {
            Some(skill) => Ok(skill.clone()),
            None => Err(A2aError::InvalidParams(format!(
                "no skill '{id}'; skills: [{}]",
                names()
            ))),
        },
        None if skills.len() == 1 => Ok(skills.into_iter().next().expect("one skill")),
        None => Err(A2aError::InvalidParams(format!(
            "name a skill in the message's metadata (\"skill\"); skills: [{}]",
            names()
        ))),
    }
}

/// A start's refusal of what the message carried (its input, its context id) is the caller's
/// mistake; anything else is the node's.
fn invalid_or_node(e: Error) -> A2aError {
    match e {
        Error::Invalid(m) | Error::TooLarge(m) => A2aError::InvalidParams(m),
        e => A2aError::Node(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(name: &str, extra: Value) -> WorkflowDef {
        WorkflowDef {
            name: name.into(),
            version: 3,
            description: Some("adds".into()),
            extra: extra.as_object().cloned().expect("an object"),
            ..WorkflowDef::default()
        }
    }

    #[test]
    fn a_definition_is_a_skill_only_when_marked() {
        assert_eq!(conductor_skill(&def("w", json!({}))), None);
        let plain = json!({"metadata": {"owner": "x"}});
        assert_eq!(conductor_skill(&def("w", plain)), None);
        let not_object = json!({"metadata": {"a2a": {"skill": true}}});
        assert_eq!(conductor_skill(&def("w", not_object)), None);
        let bare = conductor_skill(&def("w", json!({"metadata": {"a2a": {"skill": {}}}})));
        let bare = bare.expect("marked");
        assert_eq!((bare.id.as_str(), bare.name.as_str()), ("w", "w"));
        assert_eq!((bare.description.as_str(), bare.version), ("adds", 3));
    }

    #[test]
    fn a_mark_names_the_skill() {
        let mark = json!({"metadata": {"a2a": {"skill": {
            "id": "sum", "name": "Sum", "description": "sums", "tags": ["math", 7, "x"]
        }}}});
        let skill = conductor_skill(&def("w", mark)).expect("marked");
        assert_eq!(skill.id, "sum");
        assert_eq!(skill.name, "Sum");
        assert_eq!(skill.description, "sums");
        assert_eq!(skill.tags, vec!["math".to_owned(), "x".to_owned()]);
        assert_eq!(skill.workflow, "w");
    }

    #[test]
    fn a_message_picks_its_skill() {
        let one = |id: &str| Skill {
            id: id.into(),
            name: id.into(),
            description: String::new(),
            tags: vec![],
            workflow: id.into(),
            version: 1,
            document: None,
        };
        assert_eq!(pick_skill(vec![one("a")], None), Ok(one("a")));
        assert_eq!(
            pick_skill(vec![one("a"), one("b")], Some("b")),
            Ok(one("b"))
        );
        let none = pick_skill(vec![one("a"), one("b")], None);
        assert!(matches!(none, Err(A2aError::InvalidParams(m)) if m.contains("[a, b]")));
        let unknown = pick_skill(vec![one("a")], Some("z"));
        assert!(matches!(unknown, Err(A2aError::InvalidParams(_))));
        assert!(pick_skill(vec![], None).is_err());
    }
}
