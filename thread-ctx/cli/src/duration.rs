//! Durations on the command line: `10s`, `500ms`, `2m`, `1h`, `1.5h` (a bare
//! number is seconds). clap puts the flag and the value before the message,
//! so the message does not repeat them.

use std::time::Duration;

const EXPECTED: &str = "expected a number and a unit (ms, s, m or h), e.g. 10s, 500ms, 2m, 1h";
/// The longest recording asked for at once.
const MAX_SECONDS: f64 = 24.0 * 3600.0;

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = match num.parse() {
        Ok(v) => v,
        Err(_) if num.is_empty() => return Err(format!("no number: {EXPECTED}")),
        Err(_) => return Err(format!("{num:?} is not a number: {EXPECTED}")),
    };
    let scale = match unit.trim_start() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("unknown unit {other:?}: {EXPECTED}")),
    };
    let secs = value * scale;
    if !(1e-3..=MAX_SECONDS).contains(&secs) {
        return Err("expected a duration from 1ms to 24h".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
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
        assert_eq!(parse_duration("0s").unwrap_err(), "expected a duration from 1ms to 24h");
        assert_eq!(parse_duration("25h").unwrap_err(), "expected a duration from 1ms to 24h");
        assert!(parse_duration("5d").unwrap_err().starts_with("unknown unit \"d\": expected a number and a unit (ms, s, m or h)"));
        assert!(parse_duration("abc").unwrap_err().starts_with("no number: "));
        assert!(parse_duration("1.2.3s").unwrap_err().starts_with("\"1.2.3\" is not a number: "));
        assert!(parse_duration("").unwrap_err().starts_with("no number: "));
        assert!(parse_duration("-5s").unwrap_err().starts_with("no number: "));
    }
}
