//! The fuzz targets (`fuzz/src/lib.rs`, the same file libFuzzer drives) on
//! stable Rust: every kept corpus input is replayed, then proptest mutates
//! them the way a hostile heap lies (words overwritten with extreme values and
//! pointers into the heap, inputs cut short). No run may panic.

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod targets;

use proptest::prelude::*;
use proptest::sample::Index;
use std::path::{Path, PathBuf};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target)
}

/// The kept corpus and the crashers (inputs that once failed, kept once fixed) of `target`.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for dir in [corpus_dir(target), Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/crashers").join(target)] {
        let Ok(d) = std::fs::read_dir(&dir) else { continue };
        files.extend(d.flatten().map(|e| (e.path().display().to_string(), std::fs::read(e.path()).unwrap())));
    }
    files.sort();
    files
}

#[test]
fn every_target_replays_its_corpus() {
    for (name, f) in targets::TARGETS {
        let files = inputs(name);
        assert!(files.len() >= 3, "expected a corpus for fuzz target {name} under {}", corpus_dir(name).display());
        for (_, bytes) in &files {
            f(bytes);
        }
    }
}

/// Values a lying heap puts in words: small and huge numbers, Smis, tagged pointers into
/// the heap and code (0xAA / 0xCC prefixes, see `lie`), unmapped addresses.
fn lie() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(0xffff_ffff_0000_0000),
        Just(0x7fff_ffff_0000_0000),
        (0u64..0x10_0000).prop_map(|v| 0xaa00_0000_0000_0000 | v),
        (0u64..0x1_0000).prop_map(|v| 0xcc00_0000_0000_0000 | v),
        (0u64..0x10_0000).prop_map(|v| 0xaa00_0000_0000_0000 | v | 1),
        any::<u64>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// The example heap of any version with up to 16 words anywhere replaced by lies.
    #[test]
    fn lying_heaps_never_panic(version in any::<u8>(), lies in prop::collection::vec((any::<u32>(), lie()), 0..16)) {
        let mut data = vec![version];
        for (i, v) in lies {
            data.extend_from_slice(&i.to_le_bytes());
            data.extend_from_slice(&v.to_le_bytes());
        }
        targets::v8_heap(&data);
    }

    #[test]
    fn mutated_corpus_never_panics(target in any::<Index>(), pick in any::<Index>(), flips in prop::collection::vec((any::<Index>(), any::<u8>()), 0..16), cut in prop::option::weighted(0.2, any::<Index>())) {
        let (name, f) = targets::TARGETS[target.index(targets::TARGETS.len())];
        let corpus = inputs(name);
        prop_assume!(!corpus.is_empty());
        let mut data = corpus[pick.index(corpus.len())].1.clone();
        if !data.is_empty() {
            for (at, b) in &flips {
                let i = at.index(data.len());
                data[i] = *b;
            }
            if let Some(c) = cut {
                data.truncate(c.index(data.len()));
            }
        }
        f(&data);
    }
}
