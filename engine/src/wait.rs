//! WAIT: a system task that stays IN_PROGRESS until something outside completes it (a task update,
//! an event action) or, with `duration` or `until` in its input, until that time comes — Conductor's
//! `Wait` task. The due time is fixed when the task is scheduled and stored as the task's
//! `waitTimeout`, so every replica and every later leader arms the same timer (`TimerKind::Wait`).
//!
//! Formats (Conductor's `DateTimeUtils`): `duration` is a sequence of `<n> <unit>` with units days
//! (`d`, `day`, `days`), hours (`h`, `hr`, `hrs`, `hour`, `hours`), minutes (`m`, `min`, `mins`,
//! `minute`, `minutes`) and seconds (`s`, `sec`, `secs`, `second`, `seconds`), e.g. `"1 seconds"`,
//! `"2h 30m"`. `until` is `yyyy-MM-dd HH:mm[:ss]` or `yyyy-MM-dd`, in UTC unless followed by an
//! offset (`+01:00`) or `UTC`/`GMT`/`Z`, or an RFC 3339 timestamp. Conductor reads zone-less times
//! in the server's zone; Baton's nodes may sit in different zones, so it reads them in UTC.

use super::NowMs;
use proto::model::Json;
use serde_json::Value;

/// The reason a WAIT with both inputs fails with (Conductor's wording).
pub(crate) const BOTH_GIVEN: &str =
    "Both 'duration' and 'until' specified. Please provide only one input";

/// When a WAIT with this input is due: `Ok(None)` waits for an outside completion, `Err` says why
/// the input is unusable (the task then fails with that reason, as in Conductor).
pub(crate) fn due_ms(input: &Json, now: NowMs) -> Result<Option<NowMs>, String> {
    let text = |key: &str| match input.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => Some(s.trim().to_owned()),
        Some(other) => Some(other.to_string()),
    };
    match (text("duration"), text("until")) {
        (Some(_), Some(_)) => Err(BOTH_GIVEN.to_owned()),
        (Some(d), None) => {
            let ms = duration_ms(&d).ok_or_else(|| {
                format!("Unable to parse duration '{d}': use e.g. '30 seconds', '2h 30m', '1 days'")
            })?;
            Ok(Some(now.saturating_add(ms)))
        }
        (None, Some(u)) => until_ms(&u).map(Some).ok_or_else(|| {
            format!("Unable to parse date '{u}': use 'yyyy-MM-dd HH:mm', 'yyyy-MM-dd' or RFC 3339")
        }),
        (None, None) => Ok(None),
    }
}

/// `"1 days 2h 3 minutes 4s"` in milliseconds; units must come in that order, each at most once.
fn duration_ms(text: &str) -> Option<i64> {
    const UNITS: [(&[&str], i64); 4] = [
        (&["d", "day", "days"], 86_400_000),
        (&["h", "hr", "hrs", "hour", "hours"], 3_600_000),
        (&["m", "min", "mins", "minute", "minutes"], 60_000),
        (&["s", "sec", "secs", "second", "seconds"], 1_000),
    ];
    let lower = text.to_ascii_lowercase();
    let mut rest = lower.trim();
    let mut next_unit = 0;
    let mut total: i64 = 0;
    let mut any = false;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: i64 = rest[..digits].parse().ok()?;
        rest = rest[digits..].trim_start();
        let letters = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..letters];
        rest = rest[letters..].trim_start();
        let at = UNITS[next_unit..]
            .iter()
            .position(|(names, _)| names.contains(&unit))?
            + next_unit;
        total = total.checked_add(n.checked_mul(UNITS[at].1)?)?;
        next_unit = at + 1;
        any = true;
    }
    any.then_some(total)
}

/// An absolute time in epoch milliseconds.
fn until_ms(text: &str) -> Option<i64> {
    use chrono::{DateTime, NaiveDate, NaiveDateTime};
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp_millis());
    }
    for fmt in ["%Y-%m-%d %H:%M %:z", "%Y-%m-%d %H:%M:%S %:z"] {
        if let Ok(t) = DateTime::parse_from_str(text, fmt) {
            return Some(t.timestamp_millis());
        }
    }
    let local = ["UTC", "GMT", "Z"]
        .iter()
        .find_map(|z| text.strip_suffix(z))
        .map_or(text, str::trim_end);
    for fmt in ["%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(local, fmt) {
            return Some(t.and_utc().timestamp_millis());
        }
    }
    NaiveDate::parse_from_str(local, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(v: Value) -> Json {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn durations_in_conductors_formats() {
        let table: [(&str, Option<i64>); 12] = [
            ("1 seconds", Some(1_000)),
            ("1s", Some(1_000)),
            ("30 secs", Some(30_000)),
            ("2h 30m", Some(9_000_000)),
            ("1 day 1 hour 1 minute 1 second", Some(90_061_000)),
            ("5 MINUTES", Some(300_000)),
            ("0 seconds", Some(0)),
            ("", None),
            ("seconds", None),
            ("10", None),
            ("1m 2h", None),
            ("3 fortnights", None),
        ];
        for (text, want) in table {
            assert_eq!(duration_ms(text), want, "{text:?}");
        }
    }

    #[test]
    fn until_in_utc_or_with_an_offset() {
        let base = 1_767_225_600_000; // 2026-01-01T00:00:00Z
        let table: [(&str, Option<i64>); 7] = [
            ("2026-01-01", Some(base)),
            ("2026-01-01 00:01", Some(base + 60_000)),
            ("2026-01-01 00:01 UTC", Some(base + 60_000)),
            ("2026-01-01 01:01 +01:00", Some(base + 60_000)),
            ("2026-01-01T00:00:01Z", Some(base + 1_000)),
            ("2026-01-01 00:00:02", Some(base + 2_000)),
            ("next tuesday", None),
        ];
        for (text, want) in table {
            assert_eq!(until_ms(text), want, "{text:?}");
        }
    }

    #[test]
    fn the_input_decides_the_due_time() {
        let now = 1_000_000;
        assert_eq!(due_ms(&input(json!({})), now), Ok(None));
        assert_eq!(due_ms(&input(json!({"duration": ""})), now), Ok(None));
        assert_eq!(
            due_ms(&input(json!({"duration": "2 s"})), now),
            Ok(Some(now + 2_000))
        );
        assert_eq!(
            due_ms(&input(json!({"until": "1970-01-01 00:20"})), now),
            Ok(Some(1_200_000))
        );
        assert_eq!(
            due_ms(
                &input(json!({"duration": "1s", "until": "2026-01-01"})),
                now
            ),
            Err(BOTH_GIVEN.to_owned())
        );
        assert!(due_ms(&input(json!({"duration": "soon"})), now)
            .expect_err("unparseable")
            .contains("'soon'"));
    }
}
