//! Validation of trace/span ids and flags: everything is checked before a single byte of the
//! record is written.

use thiserror::Error;

/// Which JS error class a validation failure maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Type,
    Range,
}

/// A rejected `setSpanContext` argument. Messages follow the package's one form: the argument's
/// name, what was expected, what was given.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum IdError {
    #[error("{arg}: expected a {hex}-character hex string or a {bytes}-byte Uint8Array, got {got}")]
    WrongType { arg: &'static str, hex: usize, bytes: usize, got: &'static str },
    #[error("{arg}: expected {hex} hex characters, got {len}")]
    HexLength { arg: &'static str, hex: usize, len: usize },
    #[error("{arg}: expected {bytes} bytes, got {len}")]
    ByteLength { arg: &'static str, bytes: usize, len: usize },
    #[error("{arg}: expected only hex digits 0-9a-fA-F, found {found:?} at index {index}")]
    NonHex { arg: &'static str, index: usize, found: char },
    #[error("{arg}: expected an id that is not all zeros (W3C: an all-zero id is invalid)")]
    AllZero { arg: &'static str },
    #[error("traceFlags: expected an integer from 0 to 255, got {got}")]
    FlagsRange { got: String },
    #[error("traceFlags: expected a number (an integer from 0 to 255), got {got}")]
    FlagsType { got: &'static str },
    #[error("arguments: expected at most 3 (traceId, spanId, traceFlags), got {got}")]
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
    if !decode_fast(units, out) {
        decode_scalar(units, out).map_err(|(index, found)| IdError::NonHex { arg, index, found })?;
    }
    if out.iter().all(|&b| b == 0) {
        return Err(IdError::AllZero { arg });
    }
    Ok(())
}

/// Digit by digit; on a non-hex unit, its index and the character (for the error message).
fn decode_scalar(units: &[u16], out: &mut [u8]) -> Result<(), (usize, char)> {
    for (i, (o, pair)) in out.iter_mut().zip(units.chunks_exact(2)).enumerate() {
        let (hi, lo) = (nibble(pair[0]), nibble(pair[1]));
        if hi == INVALID || lo == INVALID {
            let index = if hi == INVALID { 2 * i } else { 2 * i + 1 };
            let found = char::decode_utf16([units[index]]).next().and_then(|r| r.ok()).unwrap_or('\u{FFFD}');
            return Err((index, found));
        }
        *o = hi << 4 | lo;
    }
    Ok(())
}

/// 16 hex digits at a time with SSE2 (part of every x86-64): a trace id is two blocks, a span id
/// one. False when any unit is not a hex digit (the scalar decoder then says which). On the
/// `setSpanContext` path this halves the decoding time.
#[cfg(target_arch = "x86_64")]
fn decode_fast(units: &[u16], out: &mut [u8]) -> bool {
    if !units.len().is_multiple_of(16) || out.len() * 2 != units.len() {
        return false;
    }
    units.chunks_exact(16).zip(out.chunks_exact_mut(8)).all(|(u, o)| {
        // SAFETY: SSE2 is baseline on x86-64; u is 16 u16s (32 bytes), o is 8 bytes: the loads and
        // the 8-byte store stay inside them (unaligned forms).
        unsafe { decode16_sse2(u.as_ptr(), o.as_mut_ptr()) }
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn decode_fast(_: &[u16], _: &mut [u8]) -> bool {
    false
}

/// # Safety
/// `units` must point to 16 readable u16s and `out` to 8 writable bytes.
#[cfg(target_arch = "x86_64")]
unsafe fn decode16_sse2(units: *const u16, out: *mut u8) -> bool {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is baseline on x86-64 (the intrinsics are unsafe only for that reason), and the
    // two unaligned 16-byte loads and the 8-byte store stay inside the caller's buffers.
    unsafe {
        let a = _mm_loadu_si128(units as *const __m128i);
        let b = _mm_loadu_si128(units.add(8) as *const __m128i);
        // Any unit >= 128 cannot be a hex digit (and would not survive the narrowing below).
        let high = _mm_set1_epi16(0xff80u16 as i16);
        let wide = _mm_or_si128(_mm_and_si128(a, high), _mm_and_si128(b, high));
        if _mm_movemask_epi8(_mm_cmpeq_epi8(wide, _mm_setzero_si128())) != 0xffff {
            return false;
        }
        let c = _mm_packus_epi16(a, b); // 16 ASCII bytes, all < 128 so signed compares work
        let d = _mm_sub_epi8(c, _mm_set1_epi8(b'0' as i8));
        let is_digit = _mm_and_si128(_mm_cmpgt_epi8(d, _mm_set1_epi8(-1)), _mm_cmplt_epi8(d, _mm_set1_epi8(10)));
        let l = _mm_sub_epi8(_mm_or_si128(c, _mm_set1_epi8(0x20)), _mm_set1_epi8(b'a' as i8));
        let is_letter = _mm_and_si128(_mm_cmpgt_epi8(l, _mm_set1_epi8(-1)), _mm_cmplt_epi8(l, _mm_set1_epi8(6)));
        if _mm_movemask_epi8(_mm_or_si128(is_digit, is_letter)) != 0xffff {
            return false;
        }
        let nibbles = _mm_or_si128(_mm_and_si128(is_digit, d), _mm_andnot_si128(is_digit, _mm_add_epi8(l, _mm_set1_epi8(10))));
        // Each u16 lane holds (first digit, second digit) as (low, high) byte: combine into one byte.
        let hi = _mm_slli_epi16(_mm_and_si128(nibbles, _mm_set1_epi16(0x00ff)), 4);
        let lo = _mm_srli_epi16(nibbles, 8);
        let bytes = _mm_packus_epi16(_mm_or_si128(hi, lo), _mm_setzero_si128());
        _mm_storel_epi64(out as *mut __m128i, bytes);
        true
    }
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

    /// The SIMD decoder agrees with the scalar one for every UTF-16 unit at every position of a
    /// span id, and on the trace-id length too.
    #[test]
    fn fast_decoder_agrees_with_scalar_for_every_unit_everywhere() {
        let base = u16s("0af7651916cd43dd8448eb211c80319c");
        for len in [16usize, 32] {
            for pos in 0..len {
                for unit in 0..=u16::MAX {
                    let mut units = base[..len].to_vec();
                    units[pos] = unit;
                    let (mut fast, mut slow) = ([0u8; 16], [0u8; 16]);
                    let ok_fast = decode_fast(&units, &mut fast[..len / 2]);
                    let ok_slow = decode_scalar(&units, &mut slow[..len / 2]).is_ok();
                    assert_eq!(ok_fast, ok_slow, "unit {unit:#06x} at {pos} of {len}");
                    if ok_fast {
                        assert_eq!(fast, slow, "unit {unit:#06x} at {pos} of {len}");
                    }
                }
            }
        }
    }
}
