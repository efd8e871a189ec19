//! The fuzz targets (`thread-ctx/fuzz/src/lib.rs`, the same file libFuzzer
//! drives) on stable Rust: every kept corpus input and every crasher the
//! fuzzers found is replayed, then proptest mutates them the way hostile
//! targets lie (bytes flipped, sizes and offsets overwritten with extreme
//! values, inputs cut short). No run may panic, and none may allocate more
//! than its bound, whatever sizes the input claims.

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod targets;

use proptest::prelude::*;
use proptest::sample::Index;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use thread_ctx_discovery::elf_reader::MAX_TOTAL_BYTES;

/// Counts this thread's live heap bytes and their peak, so a run's allocation is measured.
struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn count(grow: usize, shrink: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add(grow).saturating_sub(shrink);
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count(l.size(), 0);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count(l.size(), 0);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        count(0, l.size());
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        count(new, l.size());
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak heap bytes `f` allocated on this thread above what was live before it.
fn peak_allocation(f: impl FnOnce()) -> usize {
    let before = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(before));
    f();
    PEAK.with(Cell::get) - before
}

/// What one run may allocate: for the ELF target the reader's per-object
/// budget; for the others a small multiple of the input (decoded structs are
/// larger than their bytes), never anything a claimed size could set.
fn allocation_bound(target: &str, input: usize) -> usize {
    let proportional = 64 * input + (1 << 20);
    match target {
        "elf_object" => MAX_TOTAL_BYTES as usize * 2 + proportional,
        _ => proportional,
    }
}

fn run(target: &str, f: fn(&[u8]), input: &[u8], origin: &str) {
    let used = peak_allocation(|| f(input));
    let bound = allocation_bound(target, input.len());
    assert!(used <= bound, "{target} on {origin} ({} bytes) allocated {used} bytes, bound {bound}", input.len());
}

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Input files of one target: (file name, bytes).
type Inputs = Vec<(String, Vec<u8>)>;

/// The kept corpus and crashers of `target`.
fn inputs(target: &str) -> &'static [(String, Vec<u8>)] {
    static ALL: OnceLock<Vec<(String, Inputs)>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        targets::TARGETS
            .iter()
            .map(|(name, _)| {
                let mut files = Vec::new();
                for kind in ["corpus", "crashers"] {
                    let Ok(dir) = std::fs::read_dir(fuzz_dir().join(kind).join(name)) else { continue };
                    for e in dir.flatten() {
                        let bytes = std::fs::read(e.path()).unwrap();
                        files.push((format!("{kind}/{name}/{}", e.file_name().to_string_lossy()), bytes));
                    }
                }
                files.sort();
                (name.to_string(), files)
            })
            .collect()
    });
    &all.iter().find(|(n, _)| n == target).unwrap().1
}

#[test]
fn every_target_replays_its_corpus_and_crashers() {
    for (name, f) in targets::TARGETS {
        let files = inputs(name);
        assert!(files.len() >= 3, "expected a corpus for fuzz target {name} under {}", fuzz_dir().join("corpus").join(name).display());
        for (origin, bytes) in files {
            run(name, *f, bytes, origin);
        }
    }
}

/// Values hostile targets put in size and offset fields.
fn extreme() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(0x7fff_ffff),
        Just(0x8000_0000),
        Just(0xffff_ffff),
        Just(0x1_0000_0000),
        Just(i64::MAX as u64),
        Just(u64::MAX),
        Just(u64::MAX - 7),
        any::<u64>(),
        (0u64..4096),
    ]
}

#[derive(Debug, Clone)]
struct Mutation {
    pick: Index,
    bytes: Vec<(Index, u8)>,
    /// (where, value, width 4 or 8): a size or offset field overwritten.
    words: Vec<(Index, u64, bool)>,
    cut: Option<Index>,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    (
        any::<Index>(),
        prop::collection::vec((any::<Index>(), any::<u8>()), 0..8),
        prop::collection::vec((any::<Index>(), extreme(), any::<bool>()), 0..6),
        prop::option::weighted(0.2, any::<Index>()),
    )
        .prop_map(|(pick, bytes, words, cut)| Mutation { pick, bytes, words, cut })
}

fn apply(m: &Mutation, corpus: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut data = corpus[m.pick.index(corpus.len())].1.clone();
    if data.is_empty() {
        return data;
    }
    for (at, b) in &m.bytes {
        let i = at.index(data.len());
        data[i] = *b;
    }
    for (at, v, wide) in &m.words {
        let width = if *wide { 8 } else { 4 };
        if data.len() >= width {
            // Aligned, like the ELF and protocol fields they stand for.
            let i = at.index(data.len() - width + 1) / width * width;
            data[i..i + width].copy_from_slice(&v.to_le_bytes()[..width]);
        }
    }
    if let Some(cut) = &m.cut {
        data.truncate(cut.index(data.len()));
    }
    data
}

macro_rules! mutated {
    ($($test:ident => $target:literal),* $(,)?) => {$(
        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]
            #[test]
            fn $test(m in mutation()) {
                let f = targets::TARGETS.iter().find(|(n, _)| *n == $target).unwrap().1;
                let corpus = inputs($target);
                prop_assume!(!corpus.is_empty());
                run($target, f, &apply(&m, corpus), "a mutated corpus input");
            }
        }
    )*};
}

mutated! {
    mutated_maps => "maps",
    mutated_process_context => "process_context",
    mutated_ctx_record => "ctx_record",
    mutated_sample_event => "sample_event",
    mutated_elf_object => "elf_object",
    mutated_tls_resolve => "tls_resolve",
    mutated_perf_map => "perf_map",
}
