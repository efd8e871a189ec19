//! Baseline (Sparkplug) code keeps no source positions of its own: a table
//! maps its instructions to bytecodes (one unsigned VLQ per bytecode: how many
//! bytes of machine code it compiled to, after one for the prologue), and the
//! bytecode's offset then gives the position through the BytecodeArray's own
//! table. Walking the bytecodes needs their sizes, which V8 keeps in
//! `Bytecodes::kBytecodeSizes` (read from the binary: [`BytecodeSizes`]).

use crate::error::Miss;
use crate::position_table::read_uvlq;
use crate::symbols::BytecodeSizes;

/// The `Wide` / `DebugBreakWide` and `ExtraWide` / `DebugBreakExtraWide`
/// prefixes (bytecodes 0-3 since V8 6.8): the next bytecode's operands are 2 or 4 bytes.
fn operand_scale(op: u8) -> Option<usize> {
    match op {
        0 | 2 => Some(1),
        1 | 3 => Some(2),
        _ => None,
    }
}

/// The length of the bytecode at `at` in `code`, its prefix included.
fn bytecode_len(sizes: &BytecodeSizes, code: &[u8], at: usize) -> Option<usize> {
    let op = *code.get(at)?;
    let (scale, prefix, op) = match operand_scale(op) {
        Some(scale) => (scale, 1, *code.get(at + 1)?),
        None => (0, 0, op),
    };
    let count = sizes.count();
    if op as usize >= count {
        return None;
    }
    Some(prefix + sizes.table[scale * count + op as usize] as usize)
}

/// The bytecode offset baseline code was executing at instruction offset
/// `pc_offset` (V8's `BytecodeOffsetIterator::AdvanceToPCOffset`): the
/// bytecode whose machine code ends at or after it. None: the prologue.
pub fn baseline_bytecode_offset(sizes: &BytecodeSizes, table: &[u8], bytecodes: &[u8], pc_offset: u64) -> Result<Option<u32>, Miss> {
    let mut at = 0;
    let mut pc_end = read_uvlq(table, &mut at).ok_or(Miss::BadTable)?;
    let mut current: Option<usize> = None;
    let mut next = 0usize;
    while pc_end < pc_offset {
        let delta = read_uvlq(table, &mut at).ok_or(Miss::BadTable)?;
        pc_end = pc_end.checked_add(delta).ok_or(Miss::BadTable)?;
        current = Some(next);
        next += bytecode_len(sizes, bytecodes, next).ok_or(Miss::BadTable)?;
    }
    Ok(current.map(|c| c as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three bytecodes: 0x10 (2 bytes), Wide + 0x11 (1 + 3 bytes), 0x12 (1 byte).
    fn sizes() -> BytecodeSizes {
        let mut t = vec![1u8; 3 * 0x20];
        t[0x10] = 2;
        t[0x20 + 0x11] = 3;
        BytecodeSizes::new(t).unwrap()
    }

    #[test]
    fn pcs_map_to_the_bytecode_they_belong_to() {
        let bytecodes = [0x10, 0x00, 0x00, 0x11, 0x00, 0x00, 0x12];
        // prologue 8 bytes, then 4, 10 and 2 bytes of machine code.
        let table = [8u8, 4, 10, 2];
        let at = |pc| baseline_bytecode_offset(&sizes(), &table, &bytecodes, pc);
        assert_eq!(at(3), Ok(None), "prologue");
        assert_eq!(at(8), Ok(None), "the prologue's last byte");
        assert_eq!(at(9), Ok(Some(0)));
        assert_eq!(at(12), Ok(Some(0)));
        assert_eq!(at(13), Ok(Some(2)), "after the 2-byte bytecode");
        assert_eq!(at(22), Ok(Some(2)));
        assert_eq!(at(23), Ok(Some(6)), "after the wide bytecode (prefix + 3)");
        assert_eq!(at(40), Err(Miss::BadTable), "past the table");
    }

    #[test]
    fn unknown_bytecodes_stop_the_walk() {
        let table = [1u8, 1, 1];
        assert_eq!(baseline_bytecode_offset(&sizes(), &table, &[0xff, 0x10], 3), Err(Miss::BadTable));
        assert_eq!(baseline_bytecode_offset(&sizes(), &table, &[0x00], 3), Err(Miss::BadTable), "a prefix at the end");
    }
}
