//! The parameters the computing and dynamic system tasks read, checked when a definition is
//! registered, so that a definition that cannot work is refused with a message naming the task
//! instead of failing every workflow that reaches it. A parameter given as a `${…}` expression
//! is only known at run time; what it resolves to is checked then, and a bad value fails the task.

use super::Error;
use proto::model::{task_type, WorkflowTask};
use serde_json::Value;

/// Checks `t`, a FORK_JOIN_DYNAMIC, DYNAMIC, INLINE, LAMBDA, JSON_JQ_TRANSFORM, START_WORKFLOW
/// or HTTP task.
pub(crate) fn check(t: &WorkflowTask) -> Result<(), Error> {
    let r = &t.task_reference_name;
    let ty = t.task_type.as_str();
    let problem = match ty {
        task_type::FORK_JOIN_DYNAMIC => dynamic_fork(t),
        task_type::DYNAMIC => blank(t.dynamic_task_name_param.as_deref())
            .then(|| "has no dynamicTaskNameParam".to_owned()),
        task_type::INLINE => inline(t),
        task_type::LAMBDA => {
            missing_text(t, "scriptExpression").then(|| "has no scriptExpression".to_owned())
        }
        task_type::JSON_JQ_TRANSFORM => jq(t),
        task_type::START_WORKFLOW => start_workflow(t),
        task_type::HTTP => http(t),
        task_type::SUB_WORKFLOW => sub_workflow(t),
        _ => None,
    };
    match problem {
        Some(p) => Err(Error::Invalid(format!("{ty} task '{r}' {p}"))),
        None => Ok(()),
    }
}

fn blank(s: Option<&str>) -> bool {
    s.is_none_or(|s| s.trim().is_empty())
}

/// True when input parameter `key` is absent, not a string, or blank.
fn missing_text(t: &WorkflowTask, key: &str) -> bool {
    blank(t.input_parameters.get(key).and_then(Value::as_str))
}

/// A literal string parameter, `None` when absent or a `${…}` expression.
fn literal<'a>(t: &'a WorkflowTask, key: &str) -> Option<&'a str> {
    let s = t.input_parameters.get(key)?.as_str()?;
    (!s.contains("${")).then_some(s)
}

fn dynamic_fork(t: &WorkflowTask) -> Option<String> {
    let simple = t.input_parameters.contains_key("forkTaskInputs");
    let tasks = !blank(t.dynamic_fork_tasks_param.as_deref());
    let legacy = !blank(t.dynamic_fork_join_tasks_param.as_deref());
    if !(simple || tasks || legacy) {
        return Some(
            "has no dynamicForkTasksParam and no forkTaskName/forkTaskInputs inputs".into(),
        );
    }
    if tasks && !simple && blank(t.dynamic_fork_tasks_input_param_name.as_deref()) {
        return Some("has dynamicForkTasksParam but no dynamicForkTasksInputParamName".into());
    }
    None
}

fn inline(t: &WorkflowTask) -> Option<String> {
    if missing_text(t, "expression") {
        return Some("has no expression in its inputParameters".into());
    }
    match t
        .input_parameters
        .get("evaluatorType")
        .and_then(Value::as_str)
    {
        None => Some("has no evaluatorType in its inputParameters".into()),
        Some("javascript" | "graaljs" | "value-param") => None,
        Some(e) if e.contains("${") => None,
        Some(other) => Some(format!(
            "has evaluatorType '{other}'; use 'javascript', 'graaljs' or 'value-param'"
        )),
    }
}

fn jq(t: &WorkflowTask) -> Option<String> {
    if missing_text(t, "queryExpression") {
        return Some("has no queryExpression in its inputParameters".into());
    }
    let query = literal(t, "queryExpression")?;
    super::jq::compile(query).err()
}

fn start_workflow(t: &WorkflowTask) -> Option<String> {
    match t.input_parameters.get("startWorkflow") {
        None => Some("has no startWorkflow in its inputParameters".into()),
        Some(Value::Object(spec)) => {
            let name = spec.get("name").and_then(Value::as_str);
            blank(name).then(|| "names no workflow (startWorkflow.name)".into())
        }
        Some(Value::String(s)) if s.contains("${") => None,
        Some(_) => Some("has a startWorkflow that is not an object".into()),
    }
}

/// An HTTP task names its `uri` in `http_request` or directly in its input (a `${…}`
/// `http_request` is checked when it is resolved).
fn http(t: &WorkflowTask) -> Option<String> {
    let params = &t.input_parameters;
    let uri = match params.get("http_request") {
        Some(Value::Object(spec)) => spec.get("uri"),
        Some(Value::String(s)) if s.contains("${") => return None,
        Some(_) => return Some("has an http_request that is not an object".into()),
        None => params.get("uri"),
    };
    match uri {
        Some(Value::String(s)) if !s.trim().is_empty() => None,
        _ => Some("has no uri (in http_request or its inputParameters)".into()),
    }
}

/// A SUB_WORKFLOW names its child, or holds its definition inline (a valid one).
fn sub_workflow(t: &WorkflowTask) -> Option<String> {
    let Some(p) = &t.sub_workflow_param else {
        return Some("has no subWorkflowParam".into());
    };
    match &p.workflow_definition {
        Some(Value::Object(_)) => {
            let def = p.workflow_definition.clone().unwrap_or_default();
            match serde_json::from_value::<proto::model::WorkflowDef>(def) {
                Ok(def) => super::validate_workflow_def(&def)
                    .err()
                    .map(|e| format!("has an inline workflowDefinition that is not valid: {e}")),
                Err(e) => Some(format!(
                    "has an inline workflowDefinition that does not parse: {e}"
                )),
            }
        }
        Some(_) => None,
        None => {
            blank(Some(p.name.as_str())).then(|| "names no workflow (subWorkflowParam.name)".into())
        }
    }
}
