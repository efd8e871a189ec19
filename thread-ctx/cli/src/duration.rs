//! Durations on the command line: `10s`, `500ms`, `2m`, `1h`, `1.5h` (a bare
//! number is seconds). clap puts the flag and the value before the message,
//! so the message does not repeat them.

use std::time::Duration;

const EXPECTED: &str = "expected a number and a unit (ms, s, m or h), e.g. 10s, 500ms, 2m, 1h";
/// The longest recording asked for at once.
const MAX_SECONDS: f64 = 24.0 * 3600.0;
/// The shortest agent window.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// What is wrong with a duration (clap names the flag and the value before it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("no number: {EXPECTED}")]
    NoNumber,
    #[error("{0:?} is not a number: {EXPECTED}")]
    NotANumber(String),
    #[error("unknown unit {0:?}: {EXPECTED}")]
    Unit(String),
    #[error("expected a duration from 1ms to 24h")]
    OutOfRange,
    #[error("{0:?}: the interval is at least 1s")]
    IntervalTooShort(String),
}

pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = match num.parse() {
        Ok(v) => v,
        Err(_) if num.is_empty() => return Err(DurationError::NoNumber),
        Err(_) => return Err(DurationError::NotANumber(num.to_string())),
    };
    let scale = match unit.trim_start() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(DurationError::Unit(other.to_string())),
    };
    let secs = value * scale;
    if !(1e-3..=MAX_SECONDS).contains(&secs) {
        return Err(DurationError::OutOfRange);
    }
    Ok(Duration::from_secs_f64(secs))
}

/// An agent window: a duration of at least [`MIN_INTERVAL`].
pub fn parse_interval(s: &str) -> Result<Duration, DurationError> {
    let d = parse_duration(s)?;
    if d < MIN_INTERVAL {
        return Err(DurationError::IntervalTooShort(s.to_string()));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_interval};
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("3 s"), Ok(Duration::from_secs(3)));
    }

    #[test]
    fn garbage_says_what_is_wrong_without_repeating_the_value() {
        let said = |s: &str| parse_duration(s).unwrap_err().to_string();
        assert_eq!(said("0s"), "expected a duration from 1ms to 24h");
        assert_eq!(said("25h"), "expected a duration from 1ms to 24h");
        assert!(said("5d").starts_with("unknown unit \"d\": expected a number and a unit (ms, s, m or h)"));
        assert!(said("abc").starts_with("no number: "));
        assert!(said("1.2.3s").starts_with("\"1.2.3\" is not a number: "));
        assert!(said("").starts_with("no number: "));
        assert!(said("-5s").starts_with("no number: "));
        assert_eq!(parse_interval("500ms").unwrap_err().to_string(), "\"500ms\": the interval is at least 1s");
        assert_eq!(parse_interval("2s"), Ok(Duration::from_secs(2)));
    }
}
