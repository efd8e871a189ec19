//! Trace and span ids as W3C trace context writes them: lower-case hex.

/// Lower-case hex of an id, as W3C trace context writes it.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses `digits` hex digits into bytes; Err says what was expected.
pub fn parse_hex<const N: usize>(s: &str) -> Result<[u8; N], String> {
    let s = s.trim();
    if s.len() != 2 * N || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("expected {} hex digits, got {s:?}", 2 * N));
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_bad_lengths_and_digits() {
        let id: [u8; 8] = parse_hex("00f067aa0ba902b7").unwrap();
        assert_eq!(hex(&id), "00f067aa0ba902b7");
        assert!(parse_hex::<8>("00f067aa0ba902").unwrap_err().contains("expected 16 hex digits"));
        assert!(parse_hex::<8>("00f067aa0ba902zz").unwrap_err().contains("expected 16 hex digits"));
    }
}
