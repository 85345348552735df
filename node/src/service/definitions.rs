//! Definitions: task and workflow definitions, validated here and replicated through the meta group.

use crate::error::{Error, Result};
use crate::events::Providers;
use crate::host::Host;
use proto::model::{split_event, task_type, TaskDef, WorkflowDef};
use proto::record::{MetaCommand, MetaOutcome};
use std::sync::Arc;

fn check_task_def(def: &TaskDef) -> Result<()> {
    if def.name.trim().is_empty() {
        return Err(Error::Invalid(
            "TaskDef name cannot be null or empty".into(),
        ));
    }
    proto::check::task_def(def)?;
    if def.response_timeout_seconds == 0 {
        return Err(Error::Invalid(format!(
            "TaskDef {}: responseTimeoutSeconds must be at least 1",
            def.name
        )));
    }
    if def.timeout_seconds > 0 && def.response_timeout_seconds > def.timeout_seconds {
        return Err(Error::Invalid(format!(
            "TaskDef: {} responseTimeoutSeconds: {} must be less than timeoutSeconds: {}",
            def.name, def.response_timeout_seconds, def.timeout_seconds
        )));
    }
    Ok(())
}

/// The definitions service.
pub struct Definitions {
    pub(crate) host: Arc<Host>,
    /// The event providers this node has (EVENT tasks' sinks are checked against them).
    providers: Providers,
}

impl Definitions {
    pub(crate) fn new(host: Arc<Host>, providers: Providers) -> Self {
        Self { host, providers }
    }

    /// Checks a workflow definition before it is stored or started inline: the door's limits,
    /// the engine's rules, and that every EVENT task's sink is a provider this node has.
    pub(crate) fn check_workflow_def(&self, def: &WorkflowDef) -> Result<()> {
        proto::check::workflow_def(def)?;
        engine::validate_workflow_def(def)?;
        for task in def.all_tasks() {
            let sink = task.sink.as_deref().map(str::trim);
            if task.task_type != task_type::EVENT || sink == Some("conductor") {
                continue;
            }
            if let Some((provider, queue)) = sink.and_then(split_event) {
                let what = format!("EVENT task '{}'", task.task_reference_name);
                super::events::check_event_target(&self.providers, &what, provider, queue)?;
            }
        }
        Ok(())
    }

    pub async fn put_task_defs(&self, mut defs: Vec<TaskDef>) -> Result<()> {
        if defs.is_empty() {
            return Err(Error::Invalid(
                "the list of task definitions is empty".into(),
            ));
        }
        let now = self.host.clock.now_ms();
        for def in &mut defs {
            check_task_def(def)?;
            def.create_time = self
                .host
                .defs
                .task_def(&def.name)
                .map_or(now, |old| old.create_time);
            def.update_time = now;
        }
        self.host
            .propose_meta(MetaCommand::PutTaskDefs(defs))
            .await
            .map(|_| ())
    }

    pub fn task_def(&self, name: &str) -> Result<TaskDef> {
        self.host
            .defs
            .task_def(name)
            .ok_or_else(|| Error::NotFound(format!("No such taskType found by name: {name}")))
    }

    pub fn task_defs(&self) -> Vec<TaskDef> {
        self.host.defs.task_defs()
    }

    pub async fn delete_task_def(&self, name: &str) -> Result<()> {
        match self
            .host
            .propose_meta(MetaCommand::DeleteTaskDef {
                name: name.to_owned(),
            })
            .await?
        {
            MetaOutcome::Applied => Ok(()),
            _ => Err(Error::NotFound(format!(
                "No such taskType found by name: {name}"
            ))),
        }
    }

    pub async fn put_workflow_def(&self, mut def: WorkflowDef, overwrite: bool) -> Result<()> {
        def.name_inline_task_defs();
        self.check_workflow_def(&def)?;
        let existing = self.host.defs.workflow_def(&def.name, Some(def.version));
        if existing.is_some() && !overwrite {
            return Err(Error::Conflict(format!(
                "Workflow {}.{} already exists!",
                def.name, def.version
            )));
        }
        let now = self.host.clock.now_ms();
        def.create_time = existing.map_or(now, |old| old.create_time);
        def.update_time = now;
        self.host
            .propose_meta(MetaCommand::PutWorkflowDef(Box::new(def)))
            .await
            .map(|_| ())
    }

    pub fn workflow_def(&self, name: &str, version: Option<u32>) -> Result<WorkflowDef> {
        self.host
            .defs
            .workflow_def(name, version)
            .ok_or_else(|| match version {
                Some(v) => Error::NotFound(format!(
                    "No such workflow found by name: {name}, version: {v}"
                )),
                None => Error::NotFound(format!("No such workflow found by name: {name}")),
            })
    }

    pub fn workflow_defs(&self) -> Vec<WorkflowDef> {
        self.host.defs.workflow_defs()
    }

    pub async fn delete_workflow_def(&self, name: &str, version: u32) -> Result<()> {
        match self
            .host
            .propose_meta(MetaCommand::DeleteWorkflowDef {
                name: name.to_owned(),
                version,
            })
            .await?
        {
            MetaOutcome::Applied => Ok(()),
            _ => Err(Error::NotFound(format!(
                "No such workflow found by name: {name}, version: {version}"
            ))),
        }
    }
}
