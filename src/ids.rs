//! Validation of trace/span ids and flags: everything is checked before a single byte of the
//! record is written.

use thiserror::Error;

/// Which JS error class a validation failure maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Type,
    Range,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum IdError {
    #[error("{arg} must be a {hex}-character hex string or a {bytes}-byte Uint8Array, got {got}")]
    WrongType { arg: &'static str, hex: usize, bytes: usize, got: &'static str },
    #[error("{arg} must be {hex} hex characters long, got {len}")]
    HexLength { arg: &'static str, hex: usize, len: usize },
    #[error("{arg} must be {bytes} bytes long, got {len}")]
    ByteLength { arg: &'static str, bytes: usize, len: usize },
    #[error("{arg} must contain only hex digits 0-9a-fA-F, found {found:?} at index {index}")]
    NonHex { arg: &'static str, index: usize, found: char },
    #[error("{arg} must not be all zeros (W3C: an all-zero id is invalid)")]
    AllZero { arg: &'static str },
    #[error("traceFlags must be an integer from 0 to 255, got {got}")]
    FlagsRange { got: String },
    #[error("traceFlags must be a number (an integer from 0 to 255), got {got}")]
    FlagsType { got: &'static str },
    #[error("setSpanContext takes at most 3 arguments (traceId, spanId, traceFlags), got {got}")]
    TooManyArgs { got: usize },
}

impl IdError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            IdError::WrongType { .. } | IdError::FlagsType { .. } | IdError::TooManyArgs { .. } => ErrorKind::Type,
            _ => ErrorKind::Range,
        }
    }

    /// Node-style error code, set as `err.code`.
    pub fn code(&self) -> &'static str {
        match self {
            IdError::WrongType { .. } | IdError::FlagsType { .. } | IdError::TooManyArgs { .. } => "ERR_INVALID_ARG_TYPE",
            IdError::FlagsRange { .. } => "ERR_OUT_OF_RANGE",
            _ => "ERR_INVALID_ARG_VALUE",
        }
    }
}

const INVALID: u8 = 0xFF;

static HEX: [u8; 128] = {
    let mut t = [INVALID; 128];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

#[inline(always)]
fn nibble(c: u16) -> u8 {
    if c < 128 {
        HEX[c as usize]
    } else {
        INVALID
    }
}

/// Decodes a hex id given as UTF-16 code units (what JS strings are) into `out`.
pub fn decode_hex_utf16(arg: &'static str, units: &[u16], out: &mut [u8]) -> Result<(), IdError> {
    let hex = out.len() * 2;
    if units.len() != hex {
        return Err(IdError::HexLength { arg, hex, len: units.len() });
    }
    let mut acc = 0u8;
    for (i, pair) in units.chunks_exact(2).enumerate() {
        let (hi, lo) = (nibble(pair[0]), nibble(pair[1]));
        if hi == INVALID || lo == INVALID {
            let index = if hi == INVALID { 2 * i } else { 2 * i + 1 };
            let found = char::decode_utf16([units[index]]).next().and_then(|r| r.ok()).unwrap_or('\u{FFFD}');
            return Err(IdError::NonHex { arg, index, found });
        }
        out[i] = hi << 4 | lo;
        acc |= out[i];
    }
    if acc == 0 {
        return Err(IdError::AllZero { arg });
    }
    Ok(())
}

/// Copies an id given as raw bytes into `out`.
pub fn decode_bytes(arg: &'static str, bytes: &[u8], out: &mut [u8]) -> Result<(), IdError> {
    if bytes.len() != out.len() {
        return Err(IdError::ByteLength { arg, bytes: out.len(), len: bytes.len() });
    }
    if bytes.iter().all(|&b| b == 0) {
        return Err(IdError::AllZero { arg });
    }
    out.copy_from_slice(bytes);
    Ok(())
}

/// Validates a JS number as W3C trace flags.
pub fn flags_from_f64(v: f64) -> Result<u8, IdError> {
    if v.fract() == 0.0 && (0.0..=255.0).contains(&v) {
        Ok(v as u8)
    } else {
        Err(IdError::FlagsRange { got: format!("{v}") })
    }
}

/// Lowercase hex, as OpenTelemetry JS spells ids.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u16s(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    #[test]
    fn decodes_mixed_case() {
        let mut out = [0u8; 8];
        decode_hex_utf16("spanId", &u16s("00f067aA0bA902b7"), &mut out).unwrap();
        assert_eq!(out, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert_eq!(to_hex(&out), "00f067aa0ba902b7");
    }

    #[test]
    fn rejects_bad_input() {
        let mut out = [0u8; 8];
        assert_eq!(decode_hex_utf16("spanId", &u16s("00f067aa0ba902b"), &mut out), Err(IdError::HexLength { arg: "spanId", hex: 16, len: 15 }));
        assert_eq!(decode_hex_utf16("spanId", &u16s("00f067aa0ba902bg"), &mut out), Err(IdError::NonHex { arg: "spanId", index: 15, found: 'g' }));
        // A non-Latin-1 character must not be folded into a hex digit.
        assert!(matches!(decode_hex_utf16("spanId", &u16s("00f067aa0ba902b\u{0130}"), &mut out), Err(IdError::NonHex { .. })));
        assert_eq!(decode_hex_utf16("spanId", &u16s("0000000000000000"), &mut out), Err(IdError::AllZero { arg: "spanId" }));
        assert_eq!(decode_bytes("spanId", &[0; 8], &mut out), Err(IdError::AllZero { arg: "spanId" }));
        assert_eq!(decode_bytes("spanId", &[1; 9], &mut out), Err(IdError::ByteLength { arg: "spanId", bytes: 8, len: 9 }));
        assert!(flags_from_f64(256.0).is_err() && flags_from_f64(-1.0).is_err() && flags_from_f64(1.5).is_err() && flags_from_f64(f64::NAN).is_err());
        assert_eq!(flags_from_f64(255.0), Ok(255));
    }
}
