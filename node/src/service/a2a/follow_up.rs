//! A message that continues a task (`taskId`): the event a Serverless Workflow instance waits
//! for in a `listen` (the task is `input-required`). The message's data is the event when it is
//! a CloudEvent (it names its `specversion` and `type`); otherwise it is the data of a
//! CloudEvent of the one type the instance waits for. It is delivered under the message's id,
//! so a message sent again is not consumed twice.

use super::{invalid_or_node, A2a, A2aError};
use crate::watch::{listens, Until};
use engine::dsl::ANY_TYPE;
use engine::Input;
use proto::model::{Json, Workflow};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::Instant;

/// A message continuing a task.
#[derive(Debug, Clone)]
pub struct FollowUp {
    pub task_id: String,
    pub message_id: String,
    pub input: Json,
    /// How long to wait for the task to end or ask for input again (none: answer at once).
    pub wait: Option<Duration>,
}

impl A2a {
    /// Delivers a follow-up to the `listen` its task waits in; answers the task as it stands
    /// once it ended or asks for input again, or the wait is over.
    pub async fn follow_up(&self, follow_up: FollowUp) -> Result<Workflow, A2aError> {
        let id = follow_up.task_id.as_str();
        let wf = self.task(id).await?;
        if !listens(&wf) {
            return Err(A2aError::Unsupported(format!(
                "task {id} is not waiting for input (its workflow is {:?}); it takes no \
                 further messages (send a new one)",
                wf.status
            )));
        }
        let event = event_of(&wf, &follow_up)?;
        let input = Input::Listened {
            message_id: follow_up.message_id.clone(),
            event,
        };
        self.workflows
            .command(id, input)
            .await
            .map_err(invalid_or_node)?;
        let deadline = Instant::now() + follow_up.wait.unwrap_or_default();
        let until = Until {
            listening: true,
            ..Until::default()
        };
        let wid = wf.workflow_id;
        let record = self.workflows.wait_hops(&wid, &until, deadline, 0, None);
        Ok(record.await.map_err(A2aError::Node)?.workflow)
    }
}

/// The CloudEvent a follow-up delivers.
fn event_of(wf: &Workflow, follow_up: &FollowUp) -> Result<Value, A2aError> {
    let data = Value::Object(follow_up.input.clone());
    let named = data.get("type").and_then(Value::as_str).is_some();
    if named && data.get("specversion").is_some_and(Value::is_string) {
        return Ok(data);
    }
    let types = wf
        .dsl
        .as_ref()
        .map(|run| run.listening())
        .unwrap_or_default();
    if types.contains(&ANY_TYPE) {
        return Err(A2aError::InvalidParams(format!(
            "task {} waits for events it does not name the type of: send the CloudEvent itself \
             (with its specversion and type) as the message's data",
            wf.workflow_id
        )));
    }
    let [event_type] = types.as_slice() else {
        return Err(A2aError::InvalidParams(format!(
            "task {} waits for events of several types ({}): send the CloudEvent itself \
             (with its specversion and type) as the message's data",
            wf.workflow_id,
            types.join(", ")
        )));
    };
    Ok(json!({
        "specversion": "1.0",
        "id": follow_up.message_id,
        "source": "a2a",
        "type": event_type,
        "datacontenttype": "application/json",
        "data": data,
    }))
}
