//! The event consumers: on each partition's leader, one consumer of Baton's own queues held in
//! that partition and one consumer per external broker queue (`nats:`, `amqp_*:`) whose event
//! hashes to that partition: the queues of active handlers, and those of the DSL event bus
//! that registered documents listen on. They follow leadership (`service::follow`): a node runs exactly the
//! consumers of the partitions it leads, so a failover moves them with the partition.
//!
//! A message is acknowledged only after every action of every active handler of its event
//! reached a committed final execution record, or after it was set aside as a dead letter
//! (`dead_letters`: its handling failed too often); otherwise it is left for
//! redelivery, and the records make the repeat do nothing twice.

use super::Events;
use super::{Message, Verdict};
use crate::events::brokers::{Consumer, Delivery, Provider};
use crate::events::{eval, INTERNAL};
use crate::partition::keys;
use crate::service::follow::Followers;
use cluster::storage::Tree;
use engine::dsl::ANY_TYPE;
use futures::StreamExt;
use proto::limits::EVENT_INFLIGHT_MAX;
use proto::model::split_event;
use proto::record::{self, PartitionCommand, QueueMessage};
use proto::PartitionId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long a consumer of Baton's own queues waits for a wake-up before looking again.
const RESCAN_MS: u64 = 1_000;
/// The pause before a consumed message whose removal failed is handled again.
const RETRY_PAUSE_MS: u64 = 500;
/// The pause before reopening a broker consumer that failed.
const REOPEN_MS: u64 = 1_000;

/// What one consumer consumes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key {
    /// Baton's own queues held in this partition.
    Own(PartitionId),
    /// An external broker's queue: the event `provider:queue`.
    Broker(String),
}

impl Followers for Events {
    type Key = Key;

    /// The consumers this node should run now.
    async fn wanted(self: Arc<Self>) -> BTreeSet<Key> {
        let led = self.host.led_partitions().await;
        let mut out: BTreeSet<Key> = led.iter().map(|p| Key::Own(*p)).collect();
        let handled = self
            .host
            .defs
            .event_handlers()
            .into_iter()
            .filter(|h| h.active);
        let events = handled.map(|h| h.event).chain(self.listened_events());
        for event in events {
            let Some((provider, _)) = split_event(&event) else {
                continue;
            };
            if !INTERNAL.contains(&provider)
                && self.providers.check(provider).is_ok()
                && led.contains(&self.message_partition(&event))
            {
                out.insert(Key::Broker(event));
            }
        }
        out
    }

    fn start(events: Weak<Self>, key: &Key) -> JoinHandle<()> {
        match key {
            Key::Own(p) => tokio::spawn(own_queues(events, *p)),
            Key::Broker(event) => tokio::spawn(broker_queue(events, event.clone())),
        }
    }
}

/// The events of the providers Baton keeps itself that active handlers, or the `listen` tasks
/// of registered Serverless Workflow documents when their bus is Baton's own, wait for.
fn own_events_consumed(node: &Events) -> BTreeSet<String> {
    let mut events: BTreeSet<String> = node
        .host
        .defs
        .event_handlers()
        .into_iter()
        .filter(|h| h.active)
        .filter(|h| matches!(split_event(&h.event), Some((p, _)) if INTERNAL.contains(&p)))
        .map(|h| h.event)
        .collect();
    let listened = node.listened_events().into_iter();
    events.extend(
        listened.filter(|e| matches!(split_event(e), Some((p, _)) if INTERNAL.contains(&p))),
    );
    events
}

/// The own queues whose messages a partition's consumer takes: [`own_events_consumed`], and
/// when a registered document hears events of every type on Baton's own bus, every queue of
/// that bus the partition holds (its queue-length rows name them).
fn consumed_queues(node: &Events, state: &Tree) -> BTreeSet<String> {
    let mut queues = own_events_consumed(node);
    let every = node.providers.dsl_bus().event(ANY_TYPE);
    if queues.remove(&every) {
        let (provider, _) = split_event(&every).unwrap_or_default();
        let prefix = keys::queue_len(&format!("{provider}:"));
        let held = state.scan_prefix(&prefix).flatten();
        let names = held.filter_map(|(k, _)| keys::queue_of_len(&k).map(str::to_owned));
        queues.extend(names);
    }
    queues
}

/// Consumes the messages of Baton's own queues held in `partition`, oldest first, while this node
/// leads it, at most [`EVENT_INFLIGHT_MAX`] at once. Each message is handled and removed (in
/// its own committed command) on its own: a slow one holds up no other, and a free slot takes
/// the next message at once. A message that must be delivered again waits longer after each
/// failure (`dead_letters::retry_pause`).
async fn own_queues(inner: Weak<Events>, partition: PartitionId) {
    let wake = match inner.upgrade() {
        Some(node) => node.host.queue_waker(partition),
        None => return,
    };
    let mut inflight = futures::stream::FuturesUnordered::new();
    // The queue rows being handled, with their message ids: copies of one message (an EVENT
    // task's message is published again until its workflow records the publication) are
    // handled one at a time, so they do not count each other's attempts as failed ones.
    let mut busy: BTreeMap<(String, u64), String> = BTreeMap::new();
    let mut later: BTreeMap<(String, u64), Instant> = BTreeMap::new();
    loop {
        let Some(node) = inner.upgrade() else { return };
        let now = Instant::now();
        later.retain(|_, at| *at > now);
        let free = EVENT_INFLIGHT_MAX.saturating_sub(inflight.len());
        let skip = |queue: &str, seq: u64| {
            let key = (queue.to_owned(), seq);
            busy.contains_key(&key) || later.contains_key(&key)
        };
        for (queue, seq, message) in pending(&node, partition, free, skip) {
            let copy_in_hand = busy
                .iter()
                .any(|((q, _), id)| *q == queue && *id == message.id);
            if copy_in_hand {
                continue;
            }
            busy.insert((queue.clone(), seq), message.id.clone());
            inflight.push(consume_own(node.clone(), partition, queue, seq, message));
        }
        drop(node);
        let next_look = later
            .values()
            .min()
            .copied()
            .unwrap_or(now + Duration::from_millis(RESCAN_MS));
        tokio::select! {
            Some((key, retry)) = inflight.next(), if !inflight.is_empty() => {
                busy.remove(&key);
                if let Some(pause) = retry {
                    later.insert(key, Instant::now() + pause);
                }
            }
            () = wake.notified() => {}
            () = tokio::time::sleep_until(next_look) => {}
        }
    }
}

/// Handles one message of an own queue and removes it once done; answers its key and, if it
/// must be delivered again, after how long.
async fn consume_own(
    node: Arc<Events>,
    partition: PartitionId,
    queue: String,
    seq: u64,
    message: QueueMessage,
) -> ((String, u64), Option<Duration>) {
    let m = Message {
        trace_id: if message.trace_id.is_empty() {
            crate::events::derived_trace_id(&message.id)
        } else {
            message.trace_id
        },
        id: message.id,
        event: queue.clone(),
        subject: None,
        payload: message.payload,
    };
    let (verdict, pause) = node.consume_message(&m).await;
    let retry = match verdict {
        Verdict::Ack => {
            let ack = PartitionCommand::Ack {
                queue: queue.clone(),
                seq,
            };
            match node.host.partition_command(partition, ack).await {
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(%partition, error = %e, "could not remove a consumed message; it will be handled again (its records make that harmless)");
                    Some(Duration::from_millis(RETRY_PAUSE_MS))
                }
            }
        }
        Verdict::Retry(reason) => {
            tracing::debug!(message = %m.id, %reason, ?pause, "the message will be delivered again");
            Some(pause)
        }
    };
    ((queue, seq), retry)
}

/// Up to `limit` queued messages of `partition` that an active handler or a `listen` waits for (a queue
/// row is named by its whole event, `provider:queue`) and `skip` does not refuse: the gate's
/// priority first (webhooks), then oldest first.
fn pending(
    node: &Events,
    partition: PartitionId,
    limit: usize,
    skip: impl Fn(&str, u64) -> bool,
) -> Vec<(String, u64, QueueMessage)> {
    let Some(p) = node.host.partition(partition) else {
        return Vec::new();
    };
    if limit == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for queue in consumed_queues(node, p.state()) {
        let prefix = [keys::MESSAGE_PREFIX, queue.as_bytes(), b"\0"].concat();
        let mut taken = 0;
        for kv in p.state().scan_prefix(&prefix) {
            let Ok((key, value)) = kv else { break };
            let Some((q, seq)) = keys::parse_message(&key) else {
                continue;
            };
            if skip(&q, seq) {
                continue;
            }
            let Ok(m) = record::decode::<QueueMessage>(&value) else {
                continue;
            };
            out.push((q, seq, m));
            taken += 1;
            if taken >= limit {
                break;
            }
        }
    }
    out.sort_by(|a, b| b.2.priority.cmp(&a.2.priority).then(a.1.cmp(&b.1)));
    out.truncate(limit);
    out
}

/// Consumes one external broker queue while this node leads the partition its event hashes to.
async fn broker_queue(inner: Weak<Events>, event: String) {
    let Some((provider, queue)) = split_event(&event) else {
        return;
    };
    let Some(provider) = Provider::parse(provider) else {
        return;
    };
    loop {
        let Some(node) = inner.upgrade() else { return };
        let brokers = node.providers.brokers.clone();
        drop(node);
        match brokers.consume(provider, queue).await {
            Ok(consumer) => {
                tracing::info!(%event, "consuming");
                if let Err(e) = consume(&inner, &event, consumer).await {
                    tracing::warn!(%event, error = %e, "consumer failed; reopening");
                }
            }
            Err(e) => tracing::warn!(%event, error = %e, "cannot consume; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(REOPEN_MS)).await;
    }
}

/// Handles deliveries until the consumer fails, with at most [`EVENT_INFLIGHT_MAX`] at once.
async fn consume(
    inner: &Weak<Events>,
    event: &str,
    mut consumer: Consumer,
) -> Result<(), crate::events::brokers::BrokerError> {
    let mut inflight = futures::stream::FuturesUnordered::new();
    loop {
        tokio::select! {
            delivery = consumer.next(), if inflight.len() < EVENT_INFLIGHT_MAX => {
                let delivery = delivery?;
                let Some(node) = inner.upgrade() else { return Ok(()) };
                inflight.push(handle_delivery(node, event.to_owned(), delivery));
            }
            Some(()) = inflight.next(), if !inflight.is_empty() => {}
        }
    }
}

async fn handle_delivery(node: Arc<Events>, event: String, delivery: Delivery) {
    let message = Message {
        trace_id: crate::events::derived_trace_id(&delivery.message_id),
        id: delivery.message_id.clone(),
        event,
        subject: Some(delivery.subject.clone()),
        payload: eval::payload_of(&delivery.payload),
    };
    let (verdict, pause) = node.consume_message(&message).await;
    drop(node);
    let answer = match verdict {
        Verdict::Ack => delivery.ack().await,
        Verdict::Retry(_) => {
            // The broker delivers a nacked message again at once: the pause is taken here,
            // holding one of the consumer's slots, not the others.
            tokio::time::sleep(pause).await;
            delivery.nack().await
        }
    };
    if let Err(e) = answer {
        tracing::warn!(message = %message.id, error = %e, "could not answer the broker; it will deliver the message again");
    }
}
