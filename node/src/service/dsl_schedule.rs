//! Serverless Workflow documents' timed schedules (`schedule.every`, `cron` and `after`; dsl.md,
//! "Schedule"). Each registered version with one runs like a Conductor schedule, named
//! `dsl:{namespace}/{name}/{version}`, on the leader of that name's partition, which keeps the
//! time it last fired. Every start has the idempotency key `schedule:{version key}:{time}`, so
//! a time fired twice across a failover starts one instance.
//!
//! `every` fires at the registration time plus whole intervals and `cron` at the pattern's
//! times (UTC), each only when missed by less than a failover's grace (no catch-up after an
//! outage or while the version was not registered); `after` starts the first instance at once
//! and each next one when the one before has ended and the delay has passed. Instances start
//! with an empty input. A `schedule.on` is not timed: the event consumers start its instances
//! (`events::listeners`).

use super::triggers::{
    due_times, next_off_runtime, read_i64, Cron, Triggers, DSL_SCHEDULE_PREFIX, LATE_GRACE_MS,
    SCHEDULE_RECHECK_MS,
};
use crate::error::{Error, Result};
use crate::partition::keys;
use engine::dsl::Schedule;
use proto::model::{DslSchedule, EpochMs, StartWorkflowRequest};
use proto::record::PartitionCommand;
use std::sync::Arc;
use std::time::Duration;

/// A pass's decision: the time to start an instance for now, if any, and when to look again.
struct Due {
    fire: Option<EpochMs>,
    wake: EpochMs,
}

/// The idempotency key of the start at `time` of the version `key`.
fn start_key(key: &str, time: EpochMs) -> String {
    format!("schedule:{key}:{time}")
}

/// Whether a schedule starts instances at times (not on events).
fn timed(s: &DslSchedule) -> Option<Schedule> {
    engine::dsl::schedule(&s.schedule).filter(|s| !matches!(s, Schedule::On(_)))
}

/// `every`: the latest time of the intervals since the registration, if it is due now.
fn every(created: EpochMs, interval: i64, mark: EpochMs, now: EpochMs) -> Due {
    let interval = interval.max(1);
    let passed = (now - created).max(0) / interval;
    let latest = created + passed * interval;
    let missed_by = now - latest;
    let fire = (passed >= 1 && latest > mark && missed_by < LATE_GRACE_MS).then_some(latest);
    Due {
        fire,
        wake: latest + interval,
    }
}

impl Triggers {
    /// The runner names of the registered documents' timed schedules.
    pub(super) fn dsl_schedule_names(&self) -> Vec<String> {
        let schedules = self.host.defs.dsl_schedules();
        schedules
            .iter()
            .filter(|s| timed(s).is_some())
            .map(|s| format!("{DSL_SCHEDULE_PREFIX}{}", s.key()))
            .collect()
    }

    /// One pass of the runner of version `key`'s schedule: starts the instance due now, if any,
    /// marks its time, and answers how long to sleep.
    pub(super) async fn run_dsl_schedule(&self, key: &str) -> Result<Duration> {
        let recheck = Duration::from_millis(SCHEDULE_RECHECK_MS.unsigned_abs());
        let Some(s) = self.host.defs.dsl_schedule(key) else {
            return Ok(recheck);
        };
        let Some(schedule) = timed(&s) else {
            return Ok(recheck);
        };
        let name = format!("{DSL_SCHEDULE_PREFIX}{key}");
        let partition = self.schedule_partition(&name);
        let p = self.host.partition(partition).ok_or_else(|| {
            Error::Unavailable(format!("partition {partition} is not hosted here"))
        })?;
        let mark = read_i64(p.state(), &keys::schedule_mark(&name));
        let now = self.host.clock.now_ms();
        let due = match schedule {
            Schedule::Every(interval) => every(s.create_time, interval, mark, now),
            Schedule::Cron(expression) => self.cron_due(&expression, &s, mark, now).await?,
            Schedule::After(delay) => self.after_due(&s, delay, mark, now).await?,
            Schedule::On(_) => return Ok(recheck),
        };
        if let Some(time) = due.fire {
            self.fire(&s, &name, time).await?;
        }
        let wait = (due.wake - self.host.clock.now_ms()).clamp(1, SCHEDULE_RECHECK_MS);
        Ok(Duration::from_millis(wait.unsigned_abs()))
    }

    /// `cron`: the latest time of the pattern since the last one fired, if it is due now.
    async fn cron_due(
        &self,
        expression: &str,
        s: &DslSchedule,
        mark: EpochMs,
        now: EpochMs,
    ) -> Result<Due> {
        let field = format!("workflow {}: schedule.cron", s.key());
        let cron = Arc::new(Cron::pattern(&field, expression, chrono_tz::UTC)?);
        let base = mark.max(s.create_time - 1);
        let c = cron.clone();
        let due = tokio::task::spawn_blocking(move || due_times(&c, base, now, None, false))
            .await
            .map_err(|e| Error::Internal(format!("{field}: {e}")))?;
        let next = next_off_runtime(cron, now).await?;
        Ok(Due {
            fire: due.last().copied(),
            wake: next.unwrap_or(now + SCHEDULE_RECHECK_MS),
        })
    }

    /// `after`: the first start at once; then, once the instance started last has ended, its
    /// end plus the delay (an instance no longer stored counts as ended at its start).
    async fn after_due(
        &self,
        s: &DslSchedule,
        delay: i64,
        mark: EpochMs,
        now: EpochMs,
    ) -> Result<Due> {
        if mark == 0 {
            return Ok(Due {
                fire: Some(s.create_time),
                wake: now,
            });
        }
        let id = self
            .workflows
            .keyed_workflow_id(&s.name, &start_key(&s.key(), mark));
        let ended = match self.workflows.workflow(&id.to_string(), false).await {
            Ok(wf) if wf.status.is_terminal() => wf.end_time,
            Ok(_) => {
                return Ok(Due {
                    fire: None,
                    wake: now + SCHEDULE_RECHECK_MS,
                })
            }
            Err(Error::NotFound(_)) => mark,
            Err(e) => return Err(e),
        };
        let at = (ended + delay).max(mark + 1);
        Ok(Due {
            fire: (at <= now).then_some(at),
            wake: at,
        })
    }

    /// Starts the instance of `time` and marks the time fired.
    async fn fire(&self, s: &DslSchedule, name: &str, time: EpochMs) -> Result<()> {
        let request = StartWorkflowRequest {
            idempotency_key: Some(start_key(&s.key(), time)),
            ..StartWorkflowRequest::default()
        };
        let version = (s.namespace.as_str(), s.name.as_str(), s.version.as_str());
        let id = self.workflows.start_dsl_with(version, request).await?;
        let label = crate::metrics::label(crate::metrics::Names::Schedule, name);
        metrics::counter!(crate::metrics::SCHEDULES_FIRED, "schedule" => label).increment(1);
        let partition = self.schedule_partition(name);
        let mark = PartitionCommand::MarkSchedule {
            name: name.to_owned(),
            time,
        };
        self.host.partition_command(partition, mark).await?;
        tracing::debug!(schedule = name, time, workflow = %id, "document schedule fired");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fires_the_latest_interval_once_and_within_the_grace() {
        let due = every(1_000, 500, 0, 1_200);
        assert_eq!((due.fire, due.wake), (None, 1_500));
        let due = every(1_000, 500, 0, 2_100);
        assert_eq!((due.fire, due.wake), (Some(2_000), 2_500));
        assert_eq!(every(1_000, 500, 2_000, 2_100).fire, None);
        let long_after = 2_000 + LATE_GRACE_MS + 250;
        let due = every(1_000, 500, 2_000, long_after);
        assert_eq!(due.fire, Some(long_after - 250));
        let outage = every(1_000, 60_000, 0, 1_000 + 60_000 + LATE_GRACE_MS);
        assert_eq!(outage.fire, None);
    }
}
