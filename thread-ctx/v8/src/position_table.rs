//! V8's source position tables (`source-position-table.cc`), which map a
//! bytecode offset (interpreted code) or an instruction offset (optimized
//! code) to a position in the script, and the 64-bit `SourcePosition` they hold
//! (`source-position.h`).
//!
//! A table is a run of entries, each two zigzag VLQs: the code offset's delta
//! (negative when the entry is not a statement: `-delta - 1`) and the source
//! position's delta. The first entry is relative to code offset -1 (the
//! function's entry) and position 0. The entry in effect at an offset is the
//! last whose code offset is not past it. V8 14 shifts each code offset
//! delta left by one more bit (found on Node 26's tables, whose offsets only
//! fit their bytecode that way); the layout says how far
//! ([`crate::layout::Layout::position_code_shift`]).

use crate::error::Miss;

/// A 64-bit `SourcePosition`: bit 0 "external" (a line in another file, for
/// builtins), bits 1-30 the script offset plus one (0: no position), bits
/// 31-46 the inlining id (0: the code's own function, k: inlining position k-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SourcePosition(pub u64);

impl SourcePosition {
    pub fn is_external(self) -> bool {
        self.0 & 1 == 1
    }

    /// The offset in the script's source (UTF-16 units), when there is one.
    pub fn script_offset(self) -> Option<u32> {
        if self.is_external() {
            return None;
        }
        let v = ((self.0 >> 1) & ((1 << 30) - 1)) as u32;
        v.checked_sub(1)
    }

    pub fn inlining_id(self) -> u16 {
        (self.0 >> 31) as u16
    }
}

/// One zigzag-encoded VLQ at `*at`, advancing it; None at the end or on a malformed number.
fn read_vlq(table: &[u8], at: &mut usize) -> Option<i64> {
    let value = read_uvlq(table, at)?;
    Some(((value >> 1) as i64) ^ -((value & 1) as i64))
}

/// An unsigned VLQ (baseline code's pc table), advancing `*at`.
pub(crate) fn read_uvlq(table: &[u8], at: &mut usize) -> Option<u64> {
    let mut value: u64 = 0;
    let mut shift = 0;
    loop {
        let b = *table.get(*at)?;
        *at += 1;
        if shift >= 64 {
            return None;
        }
        value |= ((b & 0x7f) as u64) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
}

/// The position in effect at code offset `offset`: the last entry whose code
/// offset is not past it (None when the table has none that early).
/// Err when the table does not decode (a truncated entry, code offsets going
/// backwards, a position outside 0..2^30).
pub fn position_at(table: &[u8], offset: i64, shift: u32) -> Result<Option<SourcePosition>, Miss> {
    let mut at = 0;
    let mut code: i64 = -1;
    let mut pos: i64 = 0;
    let mut found = None;
    while at < table.len() {
        let delta = read_vlq(table, &mut at).ok_or(Miss::BadTable)?;
        let code_delta = if delta >= 0 { delta } else { -(delta + 1) } >> shift;
        let pos_delta = read_vlq(table, &mut at).ok_or(Miss::BadTable)?;
        code = code.checked_add(code_delta).ok_or(Miss::BadTable)?;
        pos = pos.checked_add(pos_delta).ok_or(Miss::BadTable)?;
        if code > offset {
            break;
        }
        if pos < 0 {
            return Err(Miss::BadTable);
        }
        found = Some(SourcePosition(pos as u64));
    }
    Ok(found)
}

/// Encodes `(code offset, raw position, is_statement)` entries as V8 does,
/// with code offsets shifted by `shift` (see [`position_at`]): for building heap images.
pub fn encode(entries: &[(i64, i64, bool)], shift: u32) -> Vec<u8> {
    fn vlq(v: i64, out: &mut Vec<u8>) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
    }
    let (mut code, mut pos) = (-1i64, 0i64);
    let mut out = Vec::new();
    for &(c, p, stmt) in entries {
        let d = (c - code) << shift;
        vlq(if stmt { d } else { -d - 1 }, &mut out);
        vlq(p - pos, &mut out);
        (code, pos) = (c, p);
    }
    out
}

/// The raw `SourcePosition` of script offset `offset` in inlined function `inlining_id` (0: none).
pub fn raw_position(offset: u32, inlining_id: u16) -> i64 {
    (((offset as u64 + 1) << 1) | ((inlining_id as u64) << 31)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_in_effect_is_found() {
        let t = encode(&[(0, 10, true), (5, 40, false), (9, 33, true), (20, 90, true)], 0);
        assert_eq!(position_at(&t, -1, 0), Ok(None));
        assert_eq!(position_at(&t, 0, 0), Ok(Some(SourcePosition(10))));
        assert_eq!(position_at(&t, 4, 0), Ok(Some(SourcePosition(10))));
        assert_eq!(position_at(&t, 5, 0), Ok(Some(SourcePosition(40))));
        assert_eq!(position_at(&t, 19, 0), Ok(Some(SourcePosition(33))));
        assert_eq!(position_at(&t, 1000, 0), Ok(Some(SourcePosition(90))));
    }

    #[test]
    fn bad_tables_are_misses_not_panics() {
        assert_eq!(position_at(&[0x80, 0x80], 3, 0), Err(Miss::BadTable), "truncated VLQ");
        assert_eq!(position_at(&[0x02], 3, 0), Err(Miss::BadTable), "entry without its position");
        assert_eq!(position_at(&[0xff; 12], 3, 0), Err(Miss::BadTable), "overlong VLQ");
        assert_eq!(position_at(&encode(&[(0, -5, true)], 0), 3, 0), Err(Miss::BadTable), "negative position");
    }

    #[test]
    fn shifted_tables_decode_with_their_shift() {
        let t = encode(&[(0, 10, true), (5, 40, false), (9, 33, true)], 1);
        assert_eq!(position_at(&t, 6, 1), Ok(Some(SourcePosition(40))));
        assert_eq!(position_at(&t, 9, 1), Ok(Some(SourcePosition(33))));
    }

    #[test]
    fn positions_unpack_their_fields() {
        let p = SourcePosition(((103u64 + 1) << 1) | (2 << 31));
        assert_eq!((p.script_offset(), p.inlining_id(), p.is_external()), (Some(103), 2, false));
        assert_eq!(SourcePosition(0).script_offset(), None, "no position");
        assert_eq!(SourcePosition(1).script_offset(), None, "external");
    }
}
