//! Triggers that are not message brokers: webhooks (signed HTTP deliveries that become events on
//! `webhook:{name}`) and cron schedules (Orkes's `WorkflowSchedule` shape), both stored in the meta
//! group.

use super::{EpochMs, Json, StartWorkflowRequest};
use serde::{Deserialize, Serialize};

/// How far a webhook's timestamp may be from the node's clock, by default.
pub const WEBHOOK_TOLERANCE_SECONDS: u64 = 300;

/// A webhook: deliveries to `POST /api/webhook/{name}` signed with one of `secrets` become
/// messages on the event `webhook:{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Webhook {
    pub name: String,
    /// HMAC-SHA256 keys; a delivery signed with any of them is accepted (rotation: add the new
    /// secret, move senders over, remove the old one).
    pub secrets: Vec<String>,
    /// 0 means [`WEBHOOK_TOLERANCE_SECONDS`].
    pub tolerance_seconds: u64,
    pub create_time: EpochMs,
    #[serde(flatten)]
    pub extra: Json,
}

impl Webhook {
    pub fn tolerance_ms(&self) -> i64 {
        let s = if self.tolerance_seconds == 0 {
            WEBHOOK_TOLERANCE_SECONDS
        } else {
            self.tolerance_seconds
        };
        i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    /// The webhook as `GET` shows it: secrets are never read back.
    pub fn redacted(&self) -> Webhook {
        Webhook {
            secrets: self.secrets.iter().map(|_| "***".to_owned()).collect(),
            ..self.clone()
        }
    }
}

/// A cron schedule that starts a workflow at every matching time (Orkes's field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkflowSchedule {
    pub name: String,
    /// Quartz-style, with seconds: `*/2 * * * * *` is every two seconds; five fields mean
    /// second 0.
    pub cron_expression: String,
    /// An IANA time zone (`Europe/Berlin`); absent = UTC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
    pub start_workflow_request: StartWorkflowRequest,
    pub paused: bool,
    /// After an outage or a pause, start every missed time (true), or only those missed by less
    /// than 30 s, such as during a failover (false).
    pub run_catchup_schedule_instances: bool,
    /// No times before this (epoch ms; absent = none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_start_time: Option<EpochMs>,
    /// No times after this (epoch ms; absent = none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_end_time: Option<EpochMs>,
    pub create_time: EpochMs,
    pub updated_time: EpochMs,
    #[serde(flatten)]
    pub extra: Json,
}
