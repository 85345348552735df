//! A document's `schedule`: when the runtime starts instances by itself (dsl.md, "Schedule").
//! `every` starts one per interval from the document's registration, `cron` one per time of
//! the pattern, `after` one once the previous one ended and the delay passed (the first at
//! once), and `on` one per event its consumption strategy accepts: `one`, or `any` (each event
//! that matches a filter starts its own instance). The instance's input is the list of the
//! events that started it, whole (`$workflow.input[0].data` reads the first one's data).
//! `all` and `until`, which gather several events into one start, are refused at registration
//! ([`super::check_supported`]).

use super::run::{event_matches, listen_filters, listened_types};
use serde_json::Value;

/// When a document's instances start by themselves.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// One per interval (milliseconds) from the registration.
    Every(i64),
    /// One per time of the cron pattern (UTC; five fields, or six with seconds first).
    Cron(String),
    /// One once the previous ended and this delay (milliseconds) passed; the first at once.
    After(i64),
    /// One per event the consumption strategy (`schedule.on`) accepts.
    On(Value),
}

/// A document's `schedule` read; `None` when it says nothing this runtime starts on.
/// Durations were checked at load.
pub fn schedule(s: &Value) -> Option<Schedule> {
    let ms = |key| s.get(key).and_then(|d| super::millis(d).ok());
    if let Some(ms) = ms("every") {
        return Some(Schedule::Every(ms));
    }
    if let Some(cron) = s.get("cron").and_then(Value::as_str) {
        return Some(Schedule::Cron(cron.to_owned()));
    }
    if let Some(ms) = ms("after") {
        return Some(Schedule::After(ms));
    }
    s.get("on").cloned().map(Schedule::On)
}

/// The event types a document's `schedule.on` starts instances for.
pub fn on_types(doc: &Value) -> Vec<String> {
    match doc.get("schedule").and_then(schedule) {
        Some(Schedule::On(to)) => listened_types(&to),
        _ => Vec::new(),
    }
}

/// Whether `event` (a CloudEvent) starts an instance under the consumption strategy `to` (a
/// `schedule.on`): a filter of it matches the event. A filter's `${ }` condition that cannot be
/// evaluated is an error naming its place.
pub fn starts_on(to: &Value, event: &Value) -> Result<bool, String> {
    let (filters, _) = listen_filters(to);
    if filters.is_empty() && to.get("any").is_some() {
        // An `any` without filters: every event.
        return Ok(true);
    }
    for (i, filter) in filters.iter().enumerate() {
        let at = match to.get("one") {
            Some(_) => "/schedule/on/one".to_owned(),
            None => format!("/schedule/on/any/{i}"),
        };
        if event_matches(filter, &at, event)? {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_kind_of_schedule_is_read() {
        let read = |s: Value| schedule(&s);
        assert_eq!(read(json!({"every": "PT2S"})), Some(Schedule::Every(2_000)));
        assert_eq!(
            read(json!({"every": {"minutes": 1}})),
            Some(Schedule::Every(60_000))
        );
        assert_eq!(
            read(json!({"cron": "0 0 * * *"})),
            Some(Schedule::Cron("0 0 * * *".into()))
        );
        assert_eq!(read(json!({"after": "PT1S"})), Some(Schedule::After(1_000)));
        assert_eq!(schedule(&json!({})), None);
    }

    #[test]
    fn an_event_starts_an_instance_when_a_filter_of_on_matches_it() {
        let to = json!({"any": [
            {"with": {"type": "com.x.low", "source": "https://.*\\.example\\.com"}},
            {"with": {"type": "com.x.high", "subject": "${ . == \"icu\" }"}}
        ]});
        let event = |ty: &str, source: &str, subject: &str| json!({"specversion": "1.0", "id": "e", "type": ty, "source": source, "subject": subject});
        let doc = json!({"schedule": {"on": to}});
        assert_eq!(on_types(&doc), ["com.x.high", "com.x.low"]);
        let starts = |e: Value| starts_on(&to, &e).expect("the filters evaluate");
        assert!(starts(event("com.x.low", "https://a.example.com", "")));
        assert!(!starts(event("com.x.low", "https://a.example.org", "")));
        assert!(starts(event("com.x.high", "s", "icu")));
        assert!(!starts(event("com.x.high", "s", "ward")));
        assert!(!starts(event("com.x.other", "https://a.example.com", "")));
        let one = json!({"one": {"with": {"type": "com.x.low"}}});
        assert_eq!(starts_on(&one, &event("com.x.low", "s", "")), Ok(true));
        assert!(on_types(&json!({"do": []})).is_empty());
    }
}
