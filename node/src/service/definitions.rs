//! Definitions: task and workflow definitions, validated here and replicated through the meta group
//! (the schema registry is in `schemas.rs`).

use crate::error::{Error, Result};
use crate::events::Providers;
use crate::host::Host;
use proto::model::{split_event, task_type, TaskDef, WorkflowDef, WorkflowTask};
use proto::record::{MetaCommand, MetaOutcome};
use proto::version::PUT_WORKFLOW_DEFS;
use std::sync::Arc;

/// Conductor's doors (registering a definition, starting one given inline) do not take a
/// Serverless Workflow document: documents are registered and started through their own API,
/// which checks them once.
fn refuse_dsl_def(def: &WorkflowDef) -> Result<()> {
    match def.dsl {
        Some(_) => Err(Error::Invalid(format!(
            "workflow {} carries a Serverless Workflow document: register it with \
             POST /api/dsl/workflows and start it at /api/dsl/workflows/{{namespace}}/{{name}}/{{version}}/instances",
            def.name
        ))),
        None => Ok(()),
    }
}

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

/// Checks that every EVENT task of `def`, and of the definitions inlined in it (a
/// SUB_WORKFLOW's or START_WORKFLOW's child, at any depth), sinks into a provider this node
/// has enabled; `within` says where `def` is inlined, for the errors.
fn check_sinks(providers: &Providers, def: &WorkflowDef, within: &str) -> Result<()> {
    for task in def.all_tasks() {
        let sink = task.sink.as_deref().map(str::trim);
        if task.task_type == task_type::EVENT && sink != Some("conductor") {
            if let Some((provider, queue)) = sink.and_then(split_event) {
                let what = format!("EVENT task '{}'{within}", task.task_reference_name);
                super::events::check_event_target(providers, &what, provider, queue)?;
            }
        }
        if let Some(child) = inline_child(task) {
            let within = format!(
                " (in the workflow inlined by task '{}'{within})",
                task.task_reference_name
            );
            check_sinks(providers, &child, &within)?;
        }
    }
    Ok(())
}

/// Checks `workflowStatusListenerSink`: `provider:queue` into a provider this node has enabled,
/// as an EVENT task's sink. Without a sink an enabled listener publishes nothing (Orkes
/// publishes status events "to sink if configured").
fn check_listener_sink(providers: &Providers, def: &WorkflowDef) -> Result<()> {
    let sink = def.workflow_status_listener_sink.as_deref().map(str::trim);
    let Some(sink) = sink.filter(|s| !s.is_empty()) else {
        return Ok(());
    };
    let what = format!("workflow '{}': workflowStatusListenerSink", def.name);
    let Some((provider, queue)) = split_event(sink) else {
        return Err(Error::Invalid(format!(
            "{what} '{sink}' is not provider:queue (e.g. conductor:my_queue, nats:subject)"
        )));
    };
    super::events::check_event_target(providers, &what, provider, queue)
}

/// The workflow definition a SUB_WORKFLOW or START_WORKFLOW task holds inline, if it holds
/// one as an object that parses (an expression is resolved, and checked, when the task runs).
fn inline_child(task: &WorkflowTask) -> Option<WorkflowDef> {
    let inline = match task.task_type.as_str() {
        task_type::SUB_WORKFLOW => task
            .sub_workflow_param
            .as_ref()?
            .workflow_definition
            .as_ref(),
        task_type::START_WORKFLOW => task
            .input_parameters
            .get("startWorkflow")?
            .get("workflowDefinition"),
        _ => None,
    };
    inline
        .filter(|d| d.is_object())
        .and_then(|d| serde_json::from_value(d.clone()).ok())
}

/// The definitions service.
pub struct Definitions {
    pub(crate) host: Arc<Host>,
    /// The event providers this node has (EVENT tasks' sinks are checked against them).
    pub(super) providers: Providers,
    /// The operator's secrets (a document's `use.secrets` must name some of them).
    pub(super) secrets: crate::secrets::SecretFiles,
    /// The DSL `run` processes this node runs (`--dsl-run`): a document that runs another
    /// kind is refused.
    pub(super) processes: crate::events::process::ProcessOptions,
}

impl Definitions {
    pub(crate) fn new(
        host: Arc<Host>,
        providers: Providers,
        secrets: crate::secrets::SecretFiles,
        processes: crate::events::process::ProcessOptions,
    ) -> Self {
        Self {
            host,
            providers,
            secrets,
            processes,
        }
    }

    /// Checks a workflow definition before it is stored or started inline: the door's limits,
    /// the engine's rules, and that every EVENT task's sink is a provider this node has.
    pub(crate) fn check_workflow_def(&self, def: &WorkflowDef) -> Result<()> {
        proto::check::workflow_def(def)?;
        refuse_dsl_def(def)?;
        engine::validate_workflow_def(def)?;
        check_listener_sink(&self.providers, def)?;
        self.check_workflow_schema_refs(def)?;
        check_sinks(&self.providers, def, "")
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
            self.check_schema_refs(&format!("TaskDef {}", def.name), &*def)?;
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

    pub async fn put_workflow_def(&self, def: WorkflowDef, overwrite: bool) -> Result<()> {
        let def = self.prepare_workflow_def(def, overwrite)?;
        self.host
            .propose_meta(MetaCommand::PutWorkflowDef(Box::new(def)))
            .await
            .map(|_| ())
    }

    /// Creates or replaces each of `defs`, checked by [`Definitions::prepare_workflow_def`]:
    /// in one command once the cluster writes [`PUT_WORKFLOW_DEFS`], else one command each.
    pub async fn put_workflow_defs(&self, defs: Vec<WorkflowDef>) -> Result<()> {
        if defs.is_empty() {
            return Ok(());
        }
        if self.host.writes(PUT_WORKFLOW_DEFS) {
            return self
                .host
                .propose_meta(MetaCommand::PutWorkflowDefs(defs))
                .await
                .map(|_| ());
        }
        for def in defs {
            self.host
                .propose_meta(MetaCommand::PutWorkflowDef(Box::new(def)))
                .await?;
        }
        Ok(())
    }

    /// A definition ready to store: inline task definitions named, checked, its times set. An
    /// existing (name, version) is a conflict unless `overwrite`.
    pub fn prepare_workflow_def(
        &self,
        mut def: WorkflowDef,
        overwrite: bool,
    ) -> Result<WorkflowDef> {
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
        Ok(def)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventOptions;
    use serde_json::json;

    fn def(tasks: serde_json::Value) -> WorkflowDef {
        serde_json::from_value(json!({ "name": "w", "tasks": tasks })).expect("a definition")
    }

    fn event(sink: &str) -> serde_json::Value {
        json!({ "name": "e", "taskReferenceName": "e", "type": "EVENT", "sink": sink })
    }

    #[test]
    fn sinks_name_enabled_providers_also_in_inlined_children() {
        let nats = Providers::new(EventOptions {
            nats_url: Some("nats://127.0.0.1:4222".into()),
            ..Default::default()
        });
        let plain = Providers::new(EventOptions::default());
        let child = json!({ "name": "inner", "tasks": [event("sqs:queue")] });
        let sub = json!({ "name": "s", "taskReferenceName": "s", "type": "SUB_WORKFLOW",
            "subWorkflowParam": { "name": "inner", "workflowDefinition": child } });
        let start = json!({ "name": "st", "taskReferenceName": "st", "type": "START_WORKFLOW",
            "inputParameters": { "startWorkflow": { "workflowDefinition": child } } });
        for (tasks, providers, want) in [
            (
                json!([event("sqs:queue")]),
                &nats,
                "EVENT task 'e': unknown event provider 'sqs'",
            ),
            (json!([event("nats:x")]), &plain, "--nats"),
            (
                json!([sub]),
                &nats,
                "EVENT task 'e' (in the workflow inlined by task 's')",
            ),
            (json!([start]), &nats, "inlined by task 'st'"),
        ] {
            let e = check_sinks(providers, &def(tasks), "").expect_err(want);
            assert!(e.to_string().contains(want), "{e}");
        }
        assert!(check_sinks(
            &nats,
            &def(json!([event("nats:x"), event("conductor")])),
            ""
        )
        .is_ok());
    }

    fn dsl_document() -> serde_json::Value {
        json!({"document": {"dsl": "1.0.0", "namespace": "ns", "name": "n", "version": "1.0.0"},
            "do": [{"pause": {"wait": {"seconds": 1}}}]})
    }

    #[test]
    fn conductors_doors_refuse_a_definition_carrying_a_document() {
        let doc = engine::dsl::load(&dsl_document().to_string()).expect("valid");
        let def = engine::dsl::workflow_def(&doc);
        let refused = refuse_dsl_def(&def).expect_err("refused");
        assert!(
            refused.to_string().contains("/api/dsl/workflows"),
            "{refused}"
        );
        assert_eq!(refuse_dsl_def(&WorkflowDef::default()), Ok(()));
    }
}
