//! A JS frame as a sample carries it and as it is named: the frame's pc and
//! what the sampler read of the frame (its SharedFunctionInfo, bytecode array
//! and offset slots; for the innermost frame under a builtin, the words at the
//! stack pointer). Two samples whose frames agree on all of it name alike, so
//! the aggregate merges them and the symbolizer names each key once per window.

use thread_ctx_sampler::event::{JsFrameSlots, JS_FRAME_LEAF_STACK};

/// Words per JS frame in an interned stack ([`JsKey::push_words`]).
pub const WORDS_PER_FRAME: usize = 4;
/// Leaf words a sample carries at most (`LEAF_STACK_WORDS` of the BPF program).
pub const LEAF_WORDS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JsKey {
    /// The raw pc of the frame (the sampled instruction, or the return address into the frame).
    pub pc: u64,
    /// Its depth in the user stack: 0 is the innermost frame.
    pub depth: u16,
    pub flags: u16,
    pub shared: u64,
    pub bytecode_array: u64,
    pub bytecode_offset: u64,
    /// The words at the stack pointer (innermost frame with `JS_FRAME_LEAF_STACK`), else zeros.
    pub leaf_words: [u64; LEAF_WORDS],
}

/// `flags` of a key the sampler did not send: the innermost frame of a sample in generated code
/// whose frame held no JS function, to be named by its code object alone (profile side only;
/// the sampler's flags are the low bits).
pub const JS_FRAME_BY_CODE: u16 = 0x8000;

impl JsKey {
    /// The key naming the innermost frame at `pc` by its code object ([`JS_FRAME_BY_CODE`]).
    pub fn by_code(pc: u64) -> JsKey {
        JsKey { pc, depth: 0, flags: JS_FRAME_BY_CODE, shared: 0, bytecode_array: 0, bytecode_offset: 0, leaf_words: [0; LEAF_WORDS] }
    }

    /// Appends the sample's JS frames to an interned stack: four words each, then the
    /// leaf words when a frame refers to them.
    pub fn push_words(frames: &[JsFrameSlots], leaf_words: &[u64], out: &mut Vec<u64>) {
        for f in frames {
            out.extend_from_slice(&[(f.depth as u64) << 16 | f.flags as u64, f.shared, f.bytecode_array, f.bytecode_offset]);
        }
        if frames.iter().any(|f| f.flags & JS_FRAME_LEAF_STACK != 0) {
            let mut w = [0u64; LEAF_WORDS];
            for (d, s) in w.iter_mut().zip(leaf_words) {
                *d = *s;
            }
            out.extend_from_slice(&w);
        }
    }

    /// The keys of an interned stack's JS words, given its user stack.
    pub fn from_words(words: &[u64], user: &[u64]) -> Vec<JsKey> {
        let records = words.len() / WORDS_PER_FRAME;
        let leaf = words.get(records * WORDS_PER_FRAME..).filter(|w| w.len() == LEAF_WORDS);
        let mut keys = Vec::with_capacity(records);
        for r in words[..records * WORDS_PER_FRAME].chunks_exact(WORDS_PER_FRAME) {
            let (depth, flags) = ((r[0] >> 16) as u16, r[0] as u16);
            let Some(&pc) = user.get(depth as usize) else { continue };
            let mut leaf_words = [0u64; LEAF_WORDS];
            if flags & JS_FRAME_LEAF_STACK != 0 {
                if let Some(w) = leaf {
                    leaf_words.copy_from_slice(w);
                }
            }
            keys.push(JsKey { pc, depth, flags, shared: r[1], bytecode_array: r[2], bytecode_offset: r[3], leaf_words });
        }
        // A stack with JS frames whose innermost frame is none of them may be in generated code
        // whose frame is not built yet (or torn down already): named by its code object, if so.
        if let (false, false, Some(&leaf)) = (keys.is_empty(), keys.iter().any(|k| k.depth == 0), user.first()) {
            keys.push(JsKey::by_code(leaf));
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_survive_the_interned_stack() {
        let frames = [
            JsFrameSlots { depth: 0, flags: JS_FRAME_LEAF_STACK, shared: 0x11, bytecode_array: 0x21, bytecode_offset: 0x31 },
            JsFrameSlots { depth: 2, flags: 0, shared: 0x12, bytecode_array: 0x22, bytecode_offset: 5 << 32 },
        ];
        let mut words = Vec::new();
        JsKey::push_words(&frames, &[7, 8, 9], &mut words);
        assert_eq!(words.len(), 2 * WORDS_PER_FRAME + LEAF_WORDS);
        let keys = JsKey::from_words(&words, &[0x100, 0x200, 0x300]);
        assert_eq!(keys.len(), 2);
        assert_eq!((keys[0].pc, keys[0].leaf_words, keys[1].pc, keys[1].leaf_words), (0x100, [7, 8, 9], 0x300, [0; 3]));
        assert!(JsKey::from_words(&words, &[0x100]).len() == 1, "a frame deeper than the stack is dropped");
        let deeper = JsKey::from_words(&words[..WORDS_PER_FRAME * 2][WORDS_PER_FRAME..], &[0x100, 0x200, 0x300]);
        assert_eq!(deeper.len(), 2, "a stack whose innermost frame is not a JS frame's gets a key to name it by its code");
        assert_eq!((deeper[1].pc, deeper[1].flags), (0x100, JS_FRAME_BY_CODE));
        assert!(JsKey::from_words(&[], &[0x100]).is_empty(), "a stack without JS frames gets none");
    }
}
