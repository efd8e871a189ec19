//! Durations on the command line: `10s`, `500ms`, `2m` (a bare number is seconds).

use std::time::Duration;

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("{s:?}: expected a duration like 10s, 500ms or 2m"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}, expected ms, s or m")),
    };
    let secs = value * scale;
    if !(secs > 0.0 && secs <= 86_400.0) {
        return Err(format!("{s:?}: expected a duration above 0 and at most 24 hours"));
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
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0s").unwrap_err().contains("above 0"));
        assert!(parse_duration("5h").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("abc").unwrap_err().contains("expected a duration"));
    }
}
