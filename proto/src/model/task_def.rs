//! `TaskDef`: retry, timeout and rate settings of a task type.

use super::{EpochMs, Json};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RetryLogic {
    #[default]
    Fixed,
    LinearBackoff,
    ExponentialBackoff,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TimeoutPolicy {
    Retry,
    #[default]
    TimeOutWf,
    AlertOnly,
}

/// A task definition. Defaults are Conductor's: retryCount 3, FIXED, retryDelaySeconds 60,
/// responseTimeoutSeconds 3600, timeoutPolicy TIME_OUT_WF, everything else 0 or unset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskDef {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub retry_count: u32,
    pub timeout_seconds: u64,
    pub input_keys: Vec<String>,
    pub output_keys: Vec<String>,
    pub timeout_policy: TimeoutPolicy,
    pub retry_logic: RetryLogic,
    pub retry_delay_seconds: u64,
    pub response_timeout_seconds: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent_exec_limit: Option<u32>,
    pub input_template: Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_frequency: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_frequency_in_seconds: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner_email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_timeout_seconds: Option<u64>,
    pub backoff_scale_factor: u32,
    /// Baton and Orkes: upper bound on the retry delay when > 0.
    pub max_retry_delay_seconds: u64,
    /// Baton and Orkes: uniform jitter in `[0, backoffJitterMs]` added after the cap.
    pub backoff_jitter_ms: u64,
    /// Across all attempts, from the first attempt's scheduled time; 0 = none.
    pub total_timeout_seconds: u64,
    /// Orkes: the schema a task's input must match when `enforce_schema` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<super::SchemaRef>,
    /// Orkes: the schema a COMPLETED result's output must match when `enforce_schema` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<super::SchemaRef>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub enforce_schema: bool,
    pub create_time: EpochMs,
    pub update_time: EpochMs,
    #[serde(flatten)]
    pub extra: Json,
}

impl Default for TaskDef {
    fn default() -> Self {
        Self {
            name: String::new(),
            description: None,
            retry_count: 3,
            timeout_seconds: 0,
            input_keys: Vec::new(),
            output_keys: Vec::new(),
            timeout_policy: TimeoutPolicy::TimeOutWf,
            retry_logic: RetryLogic::Fixed,
            retry_delay_seconds: 60,
            response_timeout_seconds: 3600,
            concurrent_exec_limit: None,
            input_template: Json::new(),
            rate_limit_per_frequency: None,
            rate_limit_frequency_in_seconds: None,
            owner_email: None,
            poll_timeout_seconds: None,
            backoff_scale_factor: 1,
            max_retry_delay_seconds: 0,
            backoff_jitter_ms: 0,
            total_timeout_seconds: 0,
            input_schema: None,
            output_schema: None,
            enforce_schema: false,
            create_time: 0,
            update_time: 0,
            extra: Json::new(),
        }
    }
}

/// How many tasks of a type may be IN_PROGRESS at once and how many may start per window, across
/// the whole cluster (`concurrentExecLimit`, `rateLimitPerFrequency` per
/// `rateLimitFrequencyInSeconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLimits {
    pub concurrent: Option<u32>,
    pub rate: Option<Rate>,
}

/// At most `count` tasks handed out per `window_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub window_ms: u64,
}

impl Rate {
    /// The window in whole seconds (Conductor's `rateLimitFrequencyInSeconds`).
    pub fn window_s(&self) -> u32 {
        u32::try_from(self.window_ms / 1_000).unwrap_or(u32::MAX)
    }
}

impl TaskDef {
    /// The limits this definition sets, `None` when it sets none (0 means none, as in
    /// Conductor; a rate without a window is per second, Conductor's default).
    pub fn limits(&self) -> Option<TaskLimits> {
        let concurrent = self.concurrent_exec_limit.filter(|n| *n > 0);
        let rate = self
            .rate_limit_per_frequency
            .filter(|n| *n > 0)
            .map(|count| Rate {
                count,
                window_ms: u64::from(self.rate_limit_frequency_in_seconds.unwrap_or(1).max(1))
                    * 1_000,
            });
        (concurrent.is_some() || rate.is_some()).then_some(TaskLimits { concurrent, rate })
    }

    /// A definition with Conductor's defaults, used for tasks whose definition is not registered.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            ..Self::default()
        }
    }
}
