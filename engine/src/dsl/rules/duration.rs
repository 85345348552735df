//! A duration written as an object (`{days, hours, minutes, seconds, milliseconds}`) may not be
//! negative, in any of its parts, nor longer than [`DURATION_SECONDS_MAX`]. (The schema's ISO 8601
//! pattern has no sign, so a negative ISO duration never gets this far.)

use proto::limits::DURATION_SECONDS_MAX;
use serde_json::Value;

/// Each unit with its length in milliseconds.
const UNITS_MS: [(&str, i128); 5] = [
    ("days", 86_400_000),
    ("hours", 3_600_000),
    ("minutes", 60_000),
    ("seconds", 1_000),
    ("milliseconds", 1),
];

/// What is wrong with `duration`, if anything (a string is left to the schema).
pub fn check(duration: &Value) -> Option<String> {
    let parts = duration.as_object()?;
    let mut total_ms: i128 = 0;
    for (unit, unit_ms) in UNITS_MS {
        let Some(n) = parts.get(unit).and_then(Value::as_i64) else {
            continue;
        };
        if n < 0 {
            return Some(format!("a duration may not be negative ({unit}: {n})"));
        }
        total_ms += i128::from(n) * unit_ms;
    }
    (total_ms > i128::from(DURATION_SECONDS_MAX) * 1000).then(|| {
        format!("a duration may not be longer than {DURATION_SECONDS_MAX} seconds (ten years)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn negative_and_overlong_durations_are_refused() {
        assert_eq!(check(&json!({"minutes": 5, "seconds": 30})), None);
        assert_eq!(check(&json!("PT5M")), None);
        assert_eq!(
            check(&json!({"minutes": 5, "seconds": -1})),
            Some("a duration may not be negative (seconds: -1)".to_owned())
        );
        let ten_years_days = DURATION_SECONDS_MAX / 86_400;
        assert_eq!(check(&json!({ "days": ten_years_days })), None);
        let over = check(&json!({ "days": ten_years_days, "milliseconds": 1 }));
        assert!(over.is_some_and(|m| m.contains("longer than")));
        assert!(check(&json!({ "days": i64::MAX, "hours": i64::MAX })).is_some());
    }
}
