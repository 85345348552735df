//! Serverless Workflow `listen` tasks fed from the event bus (`events::bus`: Baton's own
//! queues, NATS JetStream or a RabbitMQ exchange, as the operator chose). The registered
//! documents say which event types their `listen` tasks wait for
//! (`MetaState::dsl_listened_types`); a message of the bus's event for such a type is consumed
//! like a handler's, and offered, as a CloudEvent, to every instance whose running `listen`
//! waits for that type (the partitions' listening rows name them) with `Input::Listened` under
//! the message's id: the instance's decider consumes it if a filter matches, and remembers the
//! id, so a message delivered again is not consumed twice. The message is acknowledged once
//! every such instance took the offer; an offer that could not be made (no leader for the
//! instance's partition) has the message delivered again. A message that comes while no
//! instance waits for it is consumed by none: a `listen` sees the events published after it
//! started. A filter that names no type (`engine::dsl::ANY_TYPE`) waits for every type: on
//! Baton's own bus every queue is then consumed (`consumers::consumed_queues`) and each
//! message offered to it.
//!
//! A registered version whose `schedule.on` accepts the event starts an instance with the list
//! of that event as its input, once per message (its idempotency key names the version and the
//! message). A `schedule.on` that gathers events (`all`, `until`, `correlate`) is offered the
//! event through the meta group, which keeps its groups (`engine::dsl::gather`); a group it
//! completes starts one instance with the group's events (its idempotency key names the
//! version and the group), before the message is acknowledged.

use super::{Events, Message, Verdict};
use crate::error::Error;
use engine::dsl::{Schedule, ANY_TYPE};
use engine::Input;
use proto::model::{DslSchedule, StartWorkflowRequest};
use proto::record::MetaCommand;
use serde_json::{json, Value};
use std::collections::BTreeSet;

impl Events {
    /// The bus's events (`provider:queue`) that registered documents' `listen` tasks and
    /// `schedule.on` wait for.
    pub(super) fn listened_events(&self) -> BTreeSet<String> {
        let bus = self.providers.dsl_bus();
        self.host
            .defs
            .dsl_listened_types()
            .iter()
            .filter(|t| *t != ANY_TYPE || bus.hears_every_type())
            .filter(|t| bus.check_type(t).is_ok())
            .map(|t| bus.event(t))
            .collect()
    }

    /// Offers `message` to the instances listening for its event type (none: nothing to do).
    /// A message heard through the bus's consumer of every type (an AMQP `#` binding) is of
    /// the type it was routed by, and offered to the instances that listen for every type
    /// only: the others hear it through their type's own consumer.
    pub(super) async fn offer_to_listeners(&self, message: &Message) -> Verdict {
        let Some(queue_type) = self.providers.dsl_bus().event_type(&message.event) else {
            return Verdict::Ack;
        };
        let (event_type, listening_for) = match queue_type {
            ANY_TYPE => match message.subject.as_deref() {
                Some(routed) if !routed.is_empty() => (routed, ANY_TYPE),
                _ => return Verdict::Ack,
            },
            typed => (typed, typed),
        };
        let listened = self.host.defs.dsl_listened_types();
        if !listened.contains(event_type) && !listened.contains(ANY_TYPE) {
            return Verdict::Ack;
        }
        let listeners = match self.workflows.listening(listening_for).await {
            Ok(ids) => ids,
            Err(e) => {
                return Verdict::Retry(format!("the listening instances could not be read: {e}"))
            }
        };
        tracing::debug!(message = %message.id, event_type, listeners = ?listeners, "offering an event to the instances listening for it");
        let event = cloud_event(event_type, message);
        let every = listening_for == ANY_TYPE;
        let mut verdict = self
            .start_on_event((event_type, every), &event, &message.id)
            .await;
        for id in listeners {
            let input = Input::Listened {
                message_id: message.id.clone(),
                event: event.clone(),
            };
            match self.workflows.command(&id, input).await {
                // Ended or removed since: it listens no more.
                Ok(()) | Err(Error::NotFound(_) | Error::Conflict(_)) => {}
                Err(e) => {
                    tracing::debug!(workflow = %id, message = %message.id, error = %e, "a listening instance was not reached; the message will be delivered again");
                    verdict = Verdict::Retry(format!("instance {id} was not reached: {e}"));
                }
            }
        }
        verdict
    }

    /// Starts an instance of every registered version whose `schedule.on` accepts `event`,
    /// with the list of that one event as its input, once per version and message (the
    /// start's idempotency key names both). An event heard through the bus's consumer of
    /// `every` type goes only to the strategies that hear every type: the others hear it
    /// through their type's own consumer.
    async fn start_on_event(
        &self,
        (event_type, every): (&str, bool),
        event: &Value,
        message_id: &str,
    ) -> Verdict {
        let mut verdict = Verdict::Ack;
        for s in self.host.defs.dsl_schedules().iter() {
            let Some(Schedule::On(to)) = engine::dsl::schedule(&s.schedule) else {
                continue;
            };
            if every && !engine::dsl::names_type(&to, ANY_TYPE) {
                continue;
            }
            let key = s.key();
            if engine::dsl::gathers(&to) {
                if engine::dsl::names_type(&to, event_type) {
                    if let Verdict::Retry(why) = self.gather(s, event, message_id).await {
                        verdict = Verdict::Retry(why);
                    }
                }
                continue;
            }
            match engine::dsl::starts_on(&to, event) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(workflow = %key, error = %e, "a schedule's event filter failed; no instance started");
                    continue;
                }
            }
            let request = StartWorkflowRequest {
                input: engine::dsl::stored_input(json!([event])).unwrap_or_default(),
                idempotency_key: Some(on_event_key(&key, message_id)),
                ..StartWorkflowRequest::default()
            };
            let version = (s.namespace.as_str(), s.name.as_str(), s.version.as_str());
            match self.workflows.start_dsl_with(version, request).await {
                Ok(id) => {
                    tracing::debug!(workflow = %key, instance = %id, event_type, "an event started an instance")
                }
                // Deleted since.
                Err(Error::NotFound(_)) => {}
                Err(e) => {
                    verdict = Verdict::Retry(format!("{key} was not started: {e}"));
                }
            }
        }
        verdict
    }
}

impl Events {
    /// Offers `event` to the gathering `schedule.on` of `s`, then starts every group of it
    /// gathered and not started yet (one a crash left behind among them), each once.
    async fn gather(&self, s: &DslSchedule, event: &Value, message_id: &str) -> Verdict {
        let key = s.key();
        let offer = MetaCommand::GatherEvent {
            key: key.clone(),
            message_id: message_id.to_owned(),
            event: event.clone(),
        };
        let held = match self.host.propose_meta(offer).await {
            Ok(_) => self.host.catch_up_meta().await,
            Err(e) => Err(e),
        };
        if let Err(e) = held {
            return Verdict::Retry(format!("{key} did not gather the event: {e}"));
        }
        for group in self.host.defs.gathered(&key) {
            let request = StartWorkflowRequest {
                input: engine::dsl::stored_input(Value::Array(group.events)).unwrap_or_default(),
                idempotency_key: Some(gathered_key(s, group.seq)),
                ..StartWorkflowRequest::default()
            };
            let version = (s.namespace.as_str(), s.name.as_str(), s.version.as_str());
            match self.workflows.start_dsl_with(version, request).await {
                Ok(id) => {
                    tracing::debug!(workflow = %key, instance = %id, group = group.seq, "gathered events started an instance")
                }
                // Deleted since.
                Err(Error::NotFound(_)) => {}
                Err(e) => return Verdict::Retry(format!("{key} was not started: {e}")),
            }
            let started = MetaCommand::GatheredStarted {
                key: key.clone(),
                seq: group.seq,
            };
            if let Err(e) = self.host.propose_meta(started).await {
                return Verdict::Retry(format!("{key}'s group {} stays to start: {e}", group.seq));
            }
        }
        Verdict::Ack
    }
}

/// The idempotency key of the start of version `key` by message `message_id`: both named, the
/// message's id by a hash when it is long (an idempotency key holds at most 256 bytes).
fn on_event_key(key: &str, message_id: &str) -> String {
    const SPELLED_MAX: usize = 64;
    if message_id.len() <= SPELLED_MAX {
        return format!("on:{key}:{message_id}");
    }
    let hi = proto::hash::fnv1a(proto::hash::FNV_OFFSET, message_id.as_bytes());
    let lo = proto::hash::fnv1a(hi ^ 0x9e37_79b9_7f4a_7c15, message_id.as_bytes());
    format!("on:{key}:#{hi:016x}{lo:016x}")
}

/// The idempotency key of the start of group `seq` of the gathering `schedule.on` of `s`: the
/// version's registration time tells a version registered again from the one deleted.
fn gathered_key(s: &DslSchedule, seq: u64) -> String {
    on_event_key(&s.key(), &format!("{}.group.{seq}", s.create_time))
}

/// The CloudEvent a message is to a `listen`: its payload when that is one (it names its
/// `specversion` and `type`), else a CloudEvent of the queue's type carrying the payload as its
/// data.
pub(crate) fn cloud_event(event_type: &str, message: &Message) -> Value {
    let payload = &message.payload;
    let is_cloud_event = payload.get("specversion").is_some_and(Value::is_string)
        && payload.get("type").and_then(Value::as_str) == Some(event_type);
    if is_cloud_event {
        return payload.clone();
    }
    json!({
        "specversion": "1.0",
        "id": message.id,
        "source": "baton",
        "type": event_type,
        "datacontenttype": "application/json",
        "data": payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(payload: Value) -> Message {
        Message {
            id: "m-1".into(),
            event: "conductor:com.example.ready".into(),
            subject: None,
            payload,
            trace_id: String::new(),
        }
    }

    #[test]
    fn a_payload_that_is_a_cloud_event_is_offered_as_it_is() {
        let event = json!({"specversion": "1.0", "id": "e", "source": "s",
            "type": "com.example.ready", "data": {"a": 1}});
        assert_eq!(
            cloud_event("com.example.ready", &message(event.clone())),
            event
        );
    }

    #[test]
    fn another_payload_is_the_data_of_a_cloud_event_of_the_queues_type() {
        let made = cloud_event("com.example.ready", &message(json!({"a": 1})));
        assert_eq!(made["type"], "com.example.ready");
        assert_eq!(made["id"], "m-1");
        assert_eq!(made["data"], json!({"a": 1}));
    }
}
