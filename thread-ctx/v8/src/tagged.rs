//! V8's tagged words as Node's builds have them: no pointer compression, so a
//! tagged value is a full 64-bit word; a heap object pointer ends in `01`
//! (kHeapObjectTag), a small integer (Smi) ends in `0` and holds its 32-bit
//! value in the upper half (kSmiShiftSize 31 + kSmiTagSize 1). The layout's
//! check refuses a binary whose symbols say otherwise.

use crate::error::Miss;

pub const HEAP_OBJECT_TAG: u64 = 1;
pub const HEAP_OBJECT_TAG_MASK: u64 = 3;
pub const SMI_TAG_MASK: u64 = 1;
pub const SMI_SHIFT: u32 = 32;
/// Userspace on x86-64 ends below 2^47: a "pointer" above it is not one.
pub const USER_ADDRESS_LIMIT: u64 = 1 << 47;

pub fn is_heap_object(word: u64) -> bool {
    word & HEAP_OBJECT_TAG_MASK == HEAP_OBJECT_TAG && word < USER_ADDRESS_LIMIT && word > 0x1000
}

pub fn is_smi(word: u64) -> bool {
    word & SMI_TAG_MASK == 0
}

/// The Smi's value, or None when the word is not a Smi (a Smi's lower half is zero in these builds).
pub fn smi(word: u64) -> Option<i32> {
    (is_smi(word) && word as u32 == 0).then_some((word >> SMI_SHIFT) as u32 as i32)
}

/// The object's address (tag removed), or [`Miss::BadTag`].
pub fn untag(word: u64) -> Result<u64, Miss> {
    if is_heap_object(word) {
        Ok(word - HEAP_OBJECT_TAG)
    } else {
        Err(Miss::BadTag)
    }
}

/// A word holding the Smi `v`.
pub const fn smi_word(v: i32) -> u64 {
    ((v as u32 as u64) << SMI_SHIFT) & !SMI_TAG_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_told_apart() {
        assert_eq!(smi(smi_word(-1)), Some(-1));
        assert_eq!(smi(smi_word(12345)), Some(12345));
        assert_eq!(smi(0x0000_0000_0001_71c4), None, "a raw 32-bit field is not a Smi");
        assert!(is_heap_object(0x014b_1daf_4a79));
        assert!(!is_heap_object(0x014b_1daf_4a78));
        assert!(!is_heap_object(0xffff_8000_0000_0001), "a kernel address");
        assert_eq!(untag(0x014b_1daf_4a79), Ok(0x014b_1daf_4a78));
        assert_eq!(untag(smi_word(3)), Err(Miss::BadTag));
    }
}
