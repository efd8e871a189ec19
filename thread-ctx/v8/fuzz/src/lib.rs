//! Fuzz targets: every reader of data a target process (its heap) or a node
//! binary (its symbols) controls, as a function of bytes. libFuzzer drives
//! them (`fuzz_targets/`, run by `scripts/fuzz.sh`); `tests/fuzz_corpus.rs`
//! includes this same file and replays the kept corpus through them, with
//! mutations, on stable Rust in `cargo test -p thread-ctx-v8`.
//!
//! A target fails by panicking: on its own, or on a property asserted here.

use thread_ctx_v8::bytecode::baseline_bytecode_offset;
use thread_ctx_v8::image::{example, Example, CODE_BASE, CODE_SIZE, HEAP_BASE, HEAP_SIZE};
use thread_ctx_v8::memory::Budget;
use thread_ctx_v8::position_table::position_at;
use thread_ctx_v8::supported::SUPPORTED;
use thread_ctx_v8::symbols::BytecodeSizes;
use thread_ctx_v8::{Layout, Namer, PostmortemSymbols};

/// A fuzz target: one input, any outcome but a panic.
pub type Target = fn(&[u8]);

/// Every target by name (its corpus directory under `fuzz/corpus/`).
pub const TARGETS: &[(&str, Target)] = &[("v8_heap", v8_heap), ("v8_tables", v8_tables), ("v8_symbols", v8_symbols)];

/// A value of a lie: as is, or (top byte 0xAA) a pointer into the heap image, so that
/// the fuzzer reaches cycles and objects of the wrong type, not only unmapped addresses.
fn lie(v: u64) -> u64 {
    if v >> 56 == 0xaa {
        HEAP_BASE + (v & 0xf_ffff) % HEAP_SIZE as u64
    } else if v >> 56 == 0xcc {
        CODE_BASE + (v & 0xffff) % CODE_SIZE as u64
    } else {
        v
    }
}

/// The example heap of one supported V8 (byte 0), its frames named after the
/// words of the image and of the frames that the rest of the input overwrites:
/// 12-byte records, a u32 word index then the u64 it is set to ([`lie`]).
/// Properties: no panic, every naming within its read budget.
pub fn v8_heap(data: &[u8]) {
    let Some((&v, rest)) = data.split_first() else { return };
    // Built once per layout: a run starts from a copy.
    static EXAMPLES: std::sync::OnceLock<Vec<Example>> = std::sync::OnceLock::new();
    let examples = EXAMPLES.get_or_init(|| SUPPORTED.iter().map(|s| example(s.layout.clone())).collect());
    let mut e = examples[v as usize % SUPPORTED.len()].clone();
    let heap_words = (HEAP_SIZE / 8) as u32;
    let code_words = (CODE_SIZE / 8) as u32;
    let frame_fields = 6;
    for rec in rest.chunks_exact(12) {
        let index = u32::from_le_bytes(rec[..4].try_into().unwrap());
        let value = lie(u64::from_le_bytes(rec[4..].try_into().unwrap()));
        let i = index % (heap_words + code_words + frame_fields);
        if i < heap_words {
            e.builder.image.put_u64(HEAP_BASE + 8 * i as u64, value);
        } else if i < heap_words + code_words {
            e.builder.image.put_u64(CODE_BASE + 8 * (i - heap_words) as u64, value);
        } else {
            let which = (index / (heap_words + code_words + frame_fields)) as usize % e.frames.len();
            let f = &mut e.frames[which].0;
            match i - heap_words - code_words {
                0 => f.pc = value,
                1 => f.shared = value,
                2 => f.bytecode_array = value,
                3 => f.bytecode_offset = value,
                4 => f.registers.get_or_insert_with(Default::default).bytecode_offset = value,
                _ => f.registers.get_or_insert_with(Default::default).return_candidates.push((value, CODE_BASE)),
            }
        }
    }
    let mut namer = Namer::new(e.builder.layout.clone(), Some(e.bytecode_sizes.clone()));
    for _ in 0..2 {
        for (input, _) in &e.frames {
            let _ = namer.name(&e.builder.image, input);
        }
    }
    let sizes = namer.cache_sizes();
    assert!(sizes.bytes() < 64 << 20, "{sizes:?}");
    let _ = Budget::FRAME;
}

/// The table decoders on raw bytes: byte 0 the shift, bytes 1..9 the offset, the rest a
/// position table; then the same bytes as a baseline pc table over themselves as bytecodes.
pub fn v8_tables(data: &[u8]) {
    if data.len() < 9 {
        return;
    }
    let shift = (data[0] & 1) as u32;
    let offset = i64::from_le_bytes(data[1..9].try_into().unwrap());
    let table = &data[9..];
    let _ = position_at(table, offset, shift);
    let sizes = BytecodeSizes::new((0..3 * 64).map(|i| 1 + (i % 5) as u8).collect()).unwrap();
    let _ = baseline_bytecode_offset(&sizes, table, table, offset as u64 & 0xffff);
}

/// A node binary (or anything): its postmortem symbols read and checked.
pub fn v8_symbols(data: &[u8]) {
    if let Ok(s) = PostmortemSymbols::read(data, "fuzz") {
        let _ = Layout::checked(&s);
        assert!(s.values.len() <= 4096);
    }
}
