//! `run: workflow`: an instance of another registered document as a child, through the engine's
//! SUB_WORKFLOW machinery: a SUB_WORKFLOW task carrying the child's definition (looked up in the
//! replicated registry when the task starts), started once under an id derived from the task,
//! its end reported back to the parent. The task's output is the child's output. A `run` of a
//! shell command or a script is `process.rs`'s.

use super::call::external;
use super::{errors, Runner};
use proto::model::dsl::Frame;
use proto::model::task_type;
use serde_json::{json, Value};
use std::collections::BTreeMap;

impl Runner<'_, '_> {
    /// Starts a `run`: of a workflow here, of a shell command or a script as a process
    /// (`process.rs`); a container is refused at registration.
    pub(super) fn start_run(
        &mut self,
        at: &str,
        name: &str,
        def: &Value,
        input: Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Frame, Value> {
        if def.pointer("/run/workflow").is_none() {
            return self.start_process(at, name, def, input, vars);
        }
        let workflow = def.pointer("/run/workflow").cloned().unwrap_or_default();
        let at_workflow = format!("{at}/run/workflow");
        let text = |k: &str| workflow.get(k).and_then(Value::as_str).unwrap_or_default();
        let (namespace, child, version) = (text("namespace"), text("name"), text("version"));
        let Some(document) = self.ctx.catalog.dsl_document(namespace, child, version) else {
            let detail = format!("no document {namespace}/{child}/{version} is registered");
            return Err(errors::runtime_error(&at_workflow, &detail));
        };
        let child_def = crate::dsl::Document::from_stored(document)
            .map(|doc| crate::dsl::workflow_def(&doc))
            .map_err(|e| errors::runtime_error(&at_workflow, &e.to_string()))?;
        let args = match workflow.get("input") {
            Some(given) => self
                .scope(vars, &input, None)
                .deep(given, &input)
                .map_err(|e| errors::expression_error(&format!("{at_workflow}/input"), &e))?,
            None => input.clone(),
        };
        let args = crate::dsl::stored_input(args)
            .map_err(|e| errors::runtime_error(&format!("{at_workflow}/input"), &e))?;
        let task_input = json!({
            "subWorkflowName": child_def.name,
            "subWorkflowDefinition": child_def,
            "workflowInput": args,
        });
        let task_id = self.open_task(at, name, task_type::SUB_WORKFLOW, "", &task_input);
        Ok(external(at, name, task_id, input))
    }
}
