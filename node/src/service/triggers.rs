//! Triggers that are not brokers: webhooks (signed deliveries become messages on
//! `webhook:{name}`, through the event gate) and cron schedules (a runner on the leader of the
//! schedule's partition starts the workflow once per scheduled time; the workflow id derives
//! from the schedule and the time, so a time fired twice across a failover starts once). The
//! same runners fire Serverless Workflow documents' timed schedules (`dsl_schedule`).

use super::follow::{follow, Followers};
use super::{Definitions, Events, Loops, Workflows};
use crate::error::{Error, Result};
use crate::events::{GateEvent, WEBHOOK};
use crate::host::Host;
use crate::partition::keys;
use chrono::{DateTime, TimeZone, Utc};
use hmac::{Hmac, KeyInit, Mac};
use proto::model::{EpochMs, StartWorkflowRequest, Webhook, WorkflowSchedule};
use proto::record::{EventSource, MetaCommand, MetaOutcome, PartitionCommand};
use proto::PartitionId;
use std::collections::BTreeSet;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::task::JoinHandle;

/// The header carrying a delivery's Unix time in seconds (signed with the body).
pub const TIMESTAMP_HEADER: &str = "x-baton-timestamp";
/// The header carrying `sha256=<hex HMAC-SHA256(secret, "{timestamp}.{delivery}.{body}")>`,
/// `delivery` being the delivery header's value or empty.
pub const SIGNATURE_HEADER: &str = "x-baton-signature";
/// An optional sender-chosen delivery id (the message id; else timestamp and signature). It is
/// signed, so a replay cannot pass for a new delivery by changing it.
pub const DELIVERY_HEADER: &str = "x-baton-delivery";
/// Most secrets a webhook holds: the current one, and during a rotation the next and the old.
pub const WEBHOOK_SECRETS_MAX: usize = 3;
/// Shortest and longest secret accepted, in bytes.
const SECRET_LEN_MIN: usize = 16;
const SECRET_LEN_MAX: usize = 256;
/// Largest clock difference a webhook may accept: a delivery is deduplicated by content for
/// at least this long, so the bound also bounds what the gate keeps.
pub const WEBHOOK_TOLERANCE_SECONDS_MAX: u64 = 3_600;
/// Most missed times one pass of a schedule starts (catch-up after a long outage continues on
/// the next pass).
const CATCH_UP_MAX: usize = 100;
/// How late a time may start without catch-up (a failover's delay, not an outage or a pause).
pub(super) const LATE_GRACE_MS: i64 = 30_000;
/// What the runner of a Serverless Workflow document's schedule is named after (then the
/// version's key; `dsl_schedule`). A Conductor schedule's name cannot hold the `:`.
pub(super) const DSL_SCHEDULE_PREFIX: &str = "dsl:";
/// Longest a schedule runner sleeps before looking at its schedule again.
pub(super) const SCHEDULE_RECHECK_MS: i64 = 1_000;

fn check_name(kind: &str, name: &str) -> Result<()> {
    proto::check::name(&format!("{kind} name"), name)?;
    if name.contains(':') {
        return Err(Error::Invalid(format!(
            "{kind} name '{name}' holds ':'; it names the event {kind}s publish on"
        )));
    }
    Ok(())
}

fn check_webhook(webhook: &Webhook) -> Result<()> {
    check_name("webhook", &webhook.name)?;
    let n = webhook.secrets.len();
    let lengths_ok = webhook
        .secrets
        .iter()
        .all(|s| (SECRET_LEN_MIN..=SECRET_LEN_MAX).contains(&s.len()));
    if n == 0 || n > WEBHOOK_SECRETS_MAX || !lengths_ok {
        return Err(Error::Invalid(format!(
            "webhook {}: give 1 to {WEBHOOK_SECRETS_MAX} secrets of {SECRET_LEN_MIN} to {SECRET_LEN_MAX} characters (got {n})",
            webhook.name
        )));
    }
    if webhook.tolerance_seconds > WEBHOOK_TOLERANCE_SECONDS_MAX {
        return Err(Error::Invalid(format!(
            "webhook {}: toleranceSeconds is {}, over the limit of {WEBHOOK_TOLERANCE_SECONDS_MAX}",
            webhook.name, webhook.tolerance_seconds
        )));
    }
    Ok(())
}

/// A parsed schedule: its cron pattern (seconds optional) and time zone.
pub struct Cron {
    pattern: croner::Cron,
    zone: chrono_tz::Tz,
}

impl Cron {
    pub fn parse(s: &WorkflowSchedule) -> Result<Self> {
        let zone = match s.zone_id.as_deref().filter(|z| !z.is_empty()) {
            None => chrono_tz::UTC,
            Some(z) => z.parse().map_err(|_| {
                Error::Invalid(format!(
                    "schedule {}: zoneId '{z}' is not an IANA time zone",
                    s.name
                ))
            })?,
        };
        let field = format!("schedule {}: cronExpression", s.name);
        Self::pattern(&field, &s.cron_expression, zone)
    }

    /// `expression` in `zone`; an error names the expression as `field`.
    pub fn pattern(field: &str, expression: &str, zone: chrono_tz::Tz) -> Result<Self> {
        // A field with an empty list item (`,` or `1,,2`) parses to no values at all, and the
        // search for its next time then walks up to the year 5000 (seconds per call).
        if let Some(item) = expression
            .split_whitespace()
            .find(|f| f.split(',').any(str::is_empty))
        {
            return Err(Error::Invalid(format!(
                "{field} field '{item}' has an empty list item"
            )));
        }
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .build();
        let pattern = parser
            .parse(expression)
            .map_err(|e| Error::Invalid(format!("{field} '{expression}' is invalid: {e}")))?;
        Ok(Self { pattern, zone })
    }

    /// The first scheduled time strictly after `after` (epoch ms).
    pub fn next_after(&self, after: EpochMs) -> Option<EpochMs> {
        let at = Utc
            .timestamp_millis_opt(after)
            .single()?
            .with_timezone(&self.zone);
        let next: DateTime<chrono_tz::Tz> = self.pattern.find_next_occurrence(&at, false).ok()?;
        Some(next.timestamp_millis())
    }
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// HMAC-SHA256 under `secret` of what a delivery signs: `{timestamp}.{delivery}.{body}`.
fn mac_of(secret: &str, timestamp: &str, delivery: &str, body: &[u8]) -> Hmac<sha2::Sha256> {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes keys of any length");
    for part in [timestamp.as_bytes(), b".", delivery.as_bytes(), b".", body] {
        mac.update(part);
    }
    mac
}

/// Whether `signature` is the delivery's HMAC under one of the secrets; the comparison is
/// constant-time (`Mac::verify_slice`). CPU-bound over the whole body: callers on the async
/// runtime run it on the blocking pool.
fn signed_by_any(
    secrets: &[String],
    timestamp: &str,
    delivery: &str,
    body: &[u8],
    signature: &[u8],
) -> bool {
    secrets.iter().any(|secret| {
        mac_of(secret, timestamp, delivery, body)
            .verify_slice(signature)
            .is_ok()
    })
}

/// The signature header a sender computes (for tests and clients): `sha256=<hex>`; `delivery`
/// is the delivery header's value, or empty when the sender sends none.
pub fn sign(secret: &str, timestamp: &str, delivery: &str, body: &[u8]) -> String {
    let mac = mac_of(secret, timestamp, delivery, body);
    format!("sha256={}", hex(&mac.finalize().into_bytes()))
}

/// The pause before a schedule that could not fire tries again.
const SCHEDULE_RETRY_MS: u64 = 500;

/// The triggers service: webhooks and cron schedules.
pub struct Triggers {
    pub(crate) host: Arc<Host>,
    definitions: Arc<Definitions>,
    pub(super) workflows: Arc<Workflows>,
    events: Arc<Events>,
    pub(crate) loops: Loops,
}

/// What the triggers service calls.
pub(crate) struct Parts {
    pub host: Arc<Host>,
    pub definitions: Arc<Definitions>,
    pub workflows: Arc<Workflows>,
    pub events: Arc<Events>,
}

impl Triggers {
    /// The service; it starts the runners of the schedules whose partitions this node leads
    /// (following leadership).
    pub(crate) fn start(parts: Parts) -> Arc<Self> {
        let triggers = Arc::new(Self {
            host: parts.host,
            definitions: parts.definitions,
            workflows: parts.workflows,
            events: parts.events,
            loops: Loops::default(),
        });
        let weak = Arc::downgrade(&triggers);
        triggers.loops.add(tokio::spawn(follow(weak)));
        triggers
    }

    // ---- webhooks ----

    pub async fn put_webhook(&self, mut webhook: Webhook) -> Result<()> {
        check_webhook(&webhook)?;
        webhook.create_time = self
            .host
            .defs
            .webhook(&webhook.name)
            .map_or(self.host.clock.now_ms(), |w| w.create_time);
        self.host
            .propose_meta(MetaCommand::PutWebhook(Box::new(webhook)))
            .await
            .map(|_| ())
    }

    /// Whether a webhook of that name is defined, on a caught-up replica.
    pub async fn webhook_exists(&self, name: &str) -> Result<bool> {
        self.host.catch_up_meta().await?;
        Ok(self.host.defs.webhook(name).is_some())
    }

    pub async fn webhooks(&self) -> Result<Vec<Webhook>> {
        self.host.catch_up_meta().await?;
        Ok(self
            .host
            .defs
            .webhooks()
            .iter()
            .map(Webhook::redacted)
            .collect())
    }

    pub async fn delete_webhook(&self, name: &str) -> Result<()> {
        match self
            .host
            .propose_meta(MetaCommand::DeleteWebhook {
                name: name.to_owned(),
            })
            .await?
        {
            MetaOutcome::Applied => Ok(()),
            _ => Err(Error::NotFound(format!("No such webhook: {name}"))),
        }
    }

    /// A delivery to `POST /api/webhook/{name}`: checked (signature over timestamp and raw body,
    /// timestamp within the tolerance), then queued durably on `webhook:{name}` through the event
    /// gate. Answers the message id and whether it was new (a replay within the gate's window is
    /// not queued again; a replay after it finds the execution records and acts no more).
    pub async fn receive_webhook(
        &self,
        name: &str,
        timestamp: Option<&str>,
        signature: Option<&str>,
        delivery: Option<&str>,
        traceparent: Option<&str>,
        body: &[u8],
    ) -> Result<(String, bool)> {
        self.host.catch_up_meta().await?;
        let webhook = self
            .host
            .defs
            .webhook(name)
            .ok_or_else(|| Error::NotFound(format!("No such webhook: {name}")))?;
        let unauthorized = |m: &str| Err(Error::Unauthorized(format!("webhook {name}: {m}")));
        let Some(timestamp) = timestamp.map(str::trim) else {
            return unauthorized(&format!("the {TIMESTAMP_HEADER} header is missing"));
        };
        let Ok(seconds) = timestamp.parse::<i64>() else {
            return unauthorized(&format!("{TIMESTAMP_HEADER} is not Unix seconds"));
        };
        let skew = self
            .host
            .clock
            .now_ms()
            .saturating_sub(seconds.saturating_mul(1000));
        if skew.abs() > webhook.tolerance_ms() {
            return unauthorized(&format!(
                "the timestamp is {} s away from this node's clock (at most {} s are accepted)",
                skew.abs() / 1000,
                webhook.tolerance_ms() / 1000
            ));
        }
        let Some(sig) = signature
            .and_then(|s| s.trim().strip_prefix("sha256="))
            .and_then(unhex)
        else {
            return unauthorized(&format!(
                "the {SIGNATURE_HEADER} header is missing or not sha256=<hex>"
            ));
        };
        let delivery = delivery.map(str::trim).unwrap_or_default();
        if !self
            .verify_off_runtime(&webhook, timestamp, delivery, body, &sig)
            .await?
        {
            return unauthorized("the signature does not match");
        }
        let payload = crate::events::eval::payload_of(body);
        let id = match delivery {
            "" => format!("{timestamp}.{}", hex(&sig)),
            d => d.to_owned(),
        };
        let event = GateEvent {
            source: EventSource::Webhook,
            event: format!("{WEBHOOK}:{name}"),
            id: Some(id),
            payload,
            trace_id: traceparent.and_then(crate::events::trace_id_of),
            // Content seen within the tolerance is a replay, whatever the configured window.
            dedup_window_ms: Some(self.events.dedup_window_ms().max(webhook.tolerance_ms())),
        };
        self.events.admit(event).await
    }

    /// Checks a delivery's signature on the blocking pool: an HMAC over a body of up to 4 MiB
    /// under each secret must not hold up the async runtime (health checks, other requests).
    async fn verify_off_runtime(
        &self,
        webhook: &Webhook,
        timestamp: &str,
        delivery: &str,
        body: &[u8],
        sig: &[u8],
    ) -> Result<bool> {
        let (secrets, timestamp, delivery) = (
            webhook.secrets.clone(),
            timestamp.to_owned(),
            delivery.to_owned(),
        );
        let (body, sig) = (body.to_vec(), sig.to_vec());
        tokio::task::spawn_blocking(move || {
            signed_by_any(&secrets, &timestamp, &delivery, &body, &sig)
        })
        .await
        .map_err(|e| Error::Internal(format!("signature check: {e}")))
    }

    // ---- schedules ----

    pub async fn put_schedule(&self, mut schedule: WorkflowSchedule) -> Result<()> {
        check_name("schedule", &schedule.name)?;
        let cron = Cron::parse(&schedule)?;
        let now = self.host.clock.now_ms();
        let from = schedule.schedule_start_time.unwrap_or(now).max(now);
        if next_off_runtime(std::sync::Arc::new(cron), from)
            .await?
            .is_none()
        {
            return Err(Error::Invalid(format!(
                "schedule {}: cronExpression '{}' never fires",
                schedule.name, schedule.cron_expression
            )));
        }
        let request = &schedule.start_workflow_request;
        proto::check::start_request(request)?;
        if request.name.trim().is_empty() {
            return Err(Error::Invalid(format!(
                "schedule {}: startWorkflowRequest names no workflow",
                schedule.name
            )));
        }
        self.host.catch_up_meta().await?;
        self.definitions
            .workflow_def(&request.name, request.version)?;
        if let (Some(a), Some(b)) = (schedule.schedule_start_time, schedule.schedule_end_time) {
            if b <= a {
                return Err(Error::Invalid(format!(
                    "schedule {}: scheduleEndTime is not after scheduleStartTime",
                    schedule.name
                )));
            }
        }
        let now = self.host.clock.now_ms();
        schedule.create_time = self
            .host
            .defs
            .schedule(&schedule.name)
            .map_or(now, |s| s.create_time);
        schedule.updated_time = now;
        self.host
            .propose_meta(MetaCommand::PutSchedule(Box::new(schedule)))
            .await
            .map(|_| ())
    }

    pub async fn schedules(&self) -> Result<Vec<WorkflowSchedule>> {
        self.host.catch_up_meta().await?;
        Ok(self.host.defs.schedules())
    }

    /// Whether a schedule of that name is defined, on a caught-up replica.
    pub async fn schedule_exists(&self, name: &str) -> Result<bool> {
        self.host.catch_up_meta().await?;
        Ok(self.host.defs.schedule(name).is_some())
    }

    pub async fn schedule(&self, name: &str) -> Result<WorkflowSchedule> {
        self.host.catch_up_meta().await?;
        self.host
            .defs
            .schedule(name)
            .ok_or_else(|| Error::NotFound(format!("No such schedule: {name}")))
    }

    pub async fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<()> {
        let mut s = self.schedule(name).await?;
        s.paused = paused;
        s.updated_time = self.host.clock.now_ms();
        self.host
            .propose_meta(MetaCommand::PutSchedule(Box::new(s)))
            .await
            .map(|_| ())
    }

    pub async fn delete_schedule(&self, name: &str) -> Result<()> {
        match self
            .host
            .propose_meta(MetaCommand::DeleteSchedule {
                name: name.to_owned(),
            })
            .await?
        {
            MetaOutcome::Applied => Ok(()),
            _ => Err(Error::NotFound(format!("No such schedule: {name}"))),
        }
    }

    /// The partition whose leader runs a schedule (and keeps its mark).
    pub(crate) fn schedule_partition(&self, name: &str) -> PartitionId {
        self.host.key_partition(proto::hash::stable_hash(
            format!("schedule:{name}").as_bytes(),
        ))
    }

    /// One pass of a schedule's runner: starts the workflow for every due time since the last
    /// one fired (only the latest without catch-up), marks it, and answers how long to sleep.
    pub(crate) async fn run_schedule(&self, name: &str) -> Result<Duration> {
        if let Some(key) = name.strip_prefix(DSL_SCHEDULE_PREFIX) {
            return self.run_dsl_schedule(key).await;
        }
        let recheck = Duration::from_millis(SCHEDULE_RECHECK_MS.unsigned_abs());
        let Some(s) = self.host.defs.schedule(name) else {
            return Ok(recheck);
        };
        let cron = std::sync::Arc::new(Cron::parse(&s)?);
        let partition = self.schedule_partition(name);
        let p = self.host.partition(partition).ok_or_else(|| {
            Error::Unavailable(format!("partition {partition} is not hosted here"))
        })?;
        let now = self.host.clock.now_ms();
        let mark = read_i64(p.state(), &keys::schedule_mark(name));
        // Never fired: from its creation (a time due while the runner was starting still fires).
        let base = [
            mark,
            s.create_time - 1,
            s.schedule_start_time.unwrap_or(0) - 1,
        ]
        .into_iter()
        .max()
        .unwrap_or(mark);
        let due = if s.paused {
            Vec::new()
        } else {
            // Searching the pattern is CPU work of the cron library's choosing: off the runtime.
            let (c, end, catch_up) = (
                cron.clone(),
                s.schedule_end_time,
                s.run_catchup_schedule_instances,
            );
            tokio::task::spawn_blocking(move || due_times(&c, base, now, end, catch_up))
                .await
                .map_err(|e| Error::Internal(format!("schedule {name}: {e}")))?
        };
        let at = due.last().copied().unwrap_or(base);
        for t in due {
            let mut request: StartWorkflowRequest = s.start_workflow_request.clone();
            request.input.insert("_scheduledTime".into(), t.into());
            request.input.insert("_executedTime".into(), now.into());
            request.idempotency_key = Some(format!("schedule:{name}:{t}"));
            self.workflows
                .start_workflow_from(request, Some(&format!("schedule:{name}")))
                .await?;
            let label = crate::metrics::label(crate::metrics::Names::Schedule, name);
            metrics::counter!(crate::metrics::SCHEDULES_FIRED, "schedule" => label).increment(1);
            self.host
                .partition_command(
                    partition,
                    PartitionCommand::MarkSchedule {
                        name: name.to_owned(),
                        time: t,
                    },
                )
                .await?;
            tracing::debug!(schedule = name, time = t, "schedule fired");
        }
        let next = next_off_runtime(cron, self.host.clock.now_ms().max(at)).await?;
        let wait = next.map_or(SCHEDULE_RECHECK_MS, |n| {
            (n - self.host.clock.now_ms()).clamp(1, SCHEDULE_RECHECK_MS)
        });
        Ok(Duration::from_millis(wait.unsigned_abs()))
    }
}

/// Each schedule runs on the leader of its partition.
impl Followers for Triggers {
    type Key = String;

    async fn wanted(self: Arc<Self>) -> BTreeSet<String> {
        let led = self.host.led_partitions().await;
        let conductor = self.host.defs.schedules().into_iter().map(|s| s.name);
        conductor
            .chain(self.dsl_schedule_names())
            .filter(|name| led.contains(&self.schedule_partition(name)))
            .collect()
    }

    fn start(triggers: Weak<Self>, name: &String) -> JoinHandle<()> {
        tokio::spawn(run_schedule_while_led(triggers, name.clone()))
    }
}

/// Fires a schedule at its times while this node leads the schedule's partition.
async fn run_schedule_while_led(triggers: Weak<Triggers>, name: String) {
    loop {
        let Some(t) = triggers.upgrade() else { return };
        let wait = match t.run_schedule(&name).await {
            Ok(wait) => wait,
            Err(e) => {
                tracing::warn!(schedule = %name, error = %e, "schedule could not fire; retrying");
                Duration::from_millis(SCHEDULE_RETRY_MS)
            }
        };
        drop(t);
        tokio::time::sleep(wait).await;
    }
}

/// The first time of `cron` after `after`, searched on the blocking pool.
pub(super) async fn next_off_runtime(
    cron: std::sync::Arc<Cron>,
    after: EpochMs,
) -> Result<Option<EpochMs>> {
    tokio::task::spawn_blocking(move || cron.next_after(after))
        .await
        .map_err(|e| Error::Internal(format!("cron search: {e}")))
}

/// The times a schedule starts now: those after `base` (the last one fired) up to `now` (and its
/// end time), at most [`CATCH_UP_MAX`] (the next pass goes on from the last). Without catch-up,
/// only the times missed by less than [`LATE_GRACE_MS`] (a failover, not an outage or a pause).
pub(super) fn due_times(
    cron: &Cron,
    base: EpochMs,
    now: EpochMs,
    end: Option<EpochMs>,
    catch_up: bool,
) -> Vec<EpochMs> {
    let from = if catch_up {
        base
    } else {
        base.max(now - LATE_GRACE_MS)
    };
    let end = end.unwrap_or(EpochMs::MAX);
    let mut due = Vec::new();
    let mut at = from;
    while let Some(t) = cron.next_after(at).filter(|t| *t <= now && *t <= end) {
        due.push(t);
        at = t;
        if due.len() >= CATCH_UP_MAX {
            break;
        }
    }
    due
}

pub(super) fn read_i64(state: &cluster::storage::Tree, key: &[u8]) -> i64 {
    match state.get(key) {
        Ok(Some(v)) if v.len() == 8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&v);
            i64::from_be_bytes(b)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_under_any_secret_and_nothing_else() {
        let body = br#"{"a":1}"#;
        let header = sign("secret-number-one", "1700000000", "d-1", body);
        let sig = unhex(header.strip_prefix("sha256=").expect("prefix")).expect("hex");
        let secrets = vec![
            "another-secret-xx".to_owned(),
            "secret-number-one".to_owned(),
        ];
        assert!(signed_by_any(&secrets, "1700000000", "d-1", body, &sig));
        assert!(!signed_by_any(&secrets, "1700000001", "d-1", body, &sig));
        // The delivery id is signed: a replay under another id does not verify.
        assert!(!signed_by_any(&secrets, "1700000000", "d-2", body, &sig));
        assert!(!signed_by_any(&secrets, "1700000000", "", body, &sig));
        assert!(!signed_by_any(
            &secrets,
            "1700000000",
            "d-1",
            br#"{"a":2}"#,
            &sig
        ));
        assert!(!signed_by_any(
            &secrets[..1],
            "1700000000",
            "d-1",
            body,
            &sig
        ));
        assert_eq!(unhex("0g"), None);
        assert_eq!(unhex("abc"), None);
    }

    #[test]
    fn cron_times_follow_the_pattern_and_zone() {
        let s = |expr: &str, zone: Option<&str>| WorkflowSchedule {
            name: "s".into(),
            cron_expression: expr.into(),
            zone_id: zone.map(str::to_owned),
            ..Default::default()
        };
        let every2 = Cron::parse(&s("*/2 * * * * *", None)).expect("parses");
        assert_eq!(every2.next_after(1_000), Some(2_000));
        assert_eq!(every2.next_after(2_000), Some(4_000));
        assert_eq!(every2.next_after(2_500), Some(4_000));
        // Five fields: second 0 of every minute.
        let minutely = Cron::parse(&s("* * * * *", None)).expect("parses");
        assert_eq!(minutely.next_after(1_000), Some(60_000));
        // 09:00 in Berlin is 08:00 UTC in winter.
        let berlin = Cron::parse(&s("0 0 9 * * *", Some("Europe/Berlin"))).expect("parses");
        assert_eq!(berlin.next_after(0), Some(8 * 3_600_000));
        assert!(Cron::parse(&s("not a cron", None)).is_err());
        // An empty list item would leave a field with no values (a search to the year 5000).
        for empty in [", * 9 * * MON-FRI", "0 1,,2 * * *", "0 0 9, * * *"] {
            assert!(Cron::parse(&s(empty, None)).is_err(), "{empty}");
        }
        // Due times: all since the last one with catch-up (at most CATCH_UP_MAX per pass); only
        // the last 30 s without (an hour-long pause starts nothing stale).
        let hour = 3_600_000;
        let all = due_times(&every2, 0, hour, None, true);
        assert_eq!(all.len(), CATCH_UP_MAX);
        assert_eq!(all[0], 2_000);
        let recent = due_times(&every2, 0, hour, None, false);
        assert_eq!(recent.first(), Some(&(hour - LATE_GRACE_MS + 2_000)));
        assert_eq!(recent.last(), Some(&hour));
        assert_eq!(recent.len(), 15);
        // A failover of 3 s misses one or two times: both still start, once.
        assert_eq!(
            due_times(&every2, 10_000, 13_500, None, false),
            vec![12_000]
        );
        assert_eq!(
            due_times(&every2, 10_000, 14_000, Some(12_000), false),
            vec![12_000]
        );
        assert!(Cron::parse(&s("* * * * *", Some("Mars/Olympus"))).is_err());
    }
}
