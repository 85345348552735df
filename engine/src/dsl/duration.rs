//! A DSL duration's length: an ISO 8601 duration (`PT5M`, `P1DT2H`, `PT0.25S`) or an object of
//! `days`, `hours`, `minutes`, `seconds`, `milliseconds`. Months and years have no fixed length
//! and are refused, as are negative durations.

use proto::limits::DURATION_SECONDS_MAX;
use serde_json::Value;

const DAY_MS: f64 = 86_400_000.0;

/// `duration` in milliseconds, at most [`DURATION_SECONDS_MAX`] seconds.
pub fn millis(duration: &Value) -> Result<i64, String> {
    let ms = match duration {
        Value::String(text) => iso(text)?,
        Value::Object(parts) => {
            let mut ms = 0.0;
            for (unit, unit_ms) in [
                ("days", DAY_MS),
                ("hours", 3_600_000.0),
                ("minutes", 60_000.0),
                ("seconds", 1_000.0),
                ("milliseconds", 1.0),
            ] {
                if let Some(n) = parts.get(unit).and_then(Value::as_f64) {
                    if n < 0.0 {
                        return Err(format!("a duration may not be negative ({unit}: {n})"));
                    }
                    ms += n * unit_ms;
                }
            }
            ms
        }
        other => return Err(format!("{other} is not a duration")),
    };
    if !ms.is_finite() || ms > (DURATION_SECONDS_MAX as f64) * 1000.0 {
        return Err(format!(
            "a duration may not be longer than {DURATION_SECONDS_MAX} seconds"
        ));
    }
    // In range and finite: the conversion cannot overflow.
    Ok(ms.round() as i64)
}

/// An ISO 8601 duration of days, hours, minutes and seconds (weeks count as seven days).
fn iso(text: &str) -> Result<f64, String> {
    let bad =
        || format!("'{text}' is not an ISO 8601 duration of days, hours, minutes and seconds");
    let rest = text.strip_prefix('P').ok_or_else(bad)?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return Err(bad()),
        None => (rest, None),
    };
    let mut ms = fields(date, &[('W', 7.0 * DAY_MS), ('D', DAY_MS)]).ok_or_else(bad)?;
    if let Some(time) = time {
        let units = [('H', 3_600_000.0), ('M', 60_000.0), ('S', 1_000.0)];
        ms += fields(time, &units).ok_or_else(bad)?;
    }
    if date.is_empty() && time.is_none() {
        return Err(bad());
    }
    Ok(ms)
}

/// The sum of `text`'s number-unit pairs, the units in `units`' order, each at most once.
fn fields(text: &str, units: &[(char, f64)]) -> Option<f64> {
    let mut total = 0.0;
    let mut rest = text;
    let mut allowed = units;
    while !rest.is_empty() {
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))?;
        let number: f64 = rest[..end].replace(',', ".").parse().ok()?;
        let unit = rest[end..].chars().next()?;
        let at = allowed.iter().position(|(u, _)| *u == unit)?;
        total += number * allowed[at].1;
        allowed = &allowed[at + 1..];
        rest = &rest[end + unit.len_utf8()..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn iso_and_object_durations_in_milliseconds() {
        assert_eq!(millis(&json!("PT5M")), Ok(300_000));
        assert_eq!(millis(&json!("P1DT2H")), Ok(93_600_000));
        assert_eq!(millis(&json!("PT0.25S")), Ok(250));
        assert_eq!(millis(&json!("P1W")), Ok(604_800_000));
        assert_eq!(
            millis(&json!({"seconds": 1, "milliseconds": 500})),
            Ok(1_500)
        );
        for bad in ["5M", "P", "PT", "P1M", "PT1H1H", "PT1S1M", "P-1D"] {
            assert!(millis(&json!(bad)).is_err(), "{bad}");
        }
        assert!(millis(&json!({"seconds": -1})).is_err());
        assert!(millis(&json!({"days": 1e9})).is_err());
    }
}
