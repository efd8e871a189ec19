//! Symbolizes samples and merges those with the same stack, thread, span
//! and attributes into one entry: the unit every output works on.

use super::frame::Frame;
use super::sample::Sample;
use super::symbolizer::Symbolizer;
use crate::maps::Mapping;
use std::collections::HashMap;

/// One frame of an entry's stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StackFrame {
    /// The address as sampled (pprof keeps it in the location).
    pub addr: u64,
    /// Index into [`Profile::frames`].
    pub frame: usize,
    pub kernel: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Leaf first: kernel frames (if any), then user frames.
    pub stack: Vec<StackFrame>,
    pub tid: u32,
    pub trace_id: Option<[u8; 16]>,
    pub span_id: Option<[u8; 8]>,
    pub attrs: Vec<(String, String)>,
    pub count: u64,
    pub weight_ns: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub pid: i32,
    /// Distinct frames, referenced by index.
    pub frames: Vec<Frame>,
    pub entries: Vec<Entry>,
    /// The target's mappings at symbolization time.
    pub mappings: Vec<Mapping>,
    /// Things the user should know (e.g. the perf map is missing).
    pub notes: Vec<String>,
}

type Key = (Vec<(u64, bool)>, u32, Option<[u8; 16]>, Option<[u8; 8]>, Vec<(String, String)>);

impl Profile {
    pub fn build(samples: &[Sample], symbolizer: &mut Symbolizer) -> Profile {
        let users: Vec<&[u64]> = samples.iter().map(|s| s.user_stack.as_slice()).collect();
        let kernels: Vec<&[u64]> = samples.iter().map(|s| s.kernel_stack.as_slice()).collect();
        symbolizer.prefetch(&users, &kernels);

        let mut profile = Profile { pid: symbolizer.pid(), ..Default::default() };
        let mut frame_ids: HashMap<Frame, usize> = HashMap::new();
        let mut entry_ids: HashMap<Key, usize> = HashMap::new();
        for s in samples {
            let mut attrs = s.attrs.clone();
            attrs.sort();
            let addrs: Vec<(u64, bool)> =
                s.kernel_stack.iter().map(|a| (*a, true)).chain(s.user_stack.iter().map(|a| (*a, false))).collect();
            let key: Key = (addrs, s.tid, s.trace_id, s.span_id, attrs);
            if let Some(&i) = entry_ids.get(&key) {
                profile.entries[i].count += 1;
                profile.entries[i].weight_ns += s.weight_ns;
                continue;
            }
            let named = symbolizer.kernel_frames(&s.kernel_stack).into_iter().chain(symbolizer.user_frames(&s.user_stack));
            let stack = key
                .0
                .iter()
                .zip(named)
                .map(|(&(addr, kernel), f)| {
                    let next = frame_ids.len();
                    let frame = *frame_ids.entry(f.clone()).or_insert_with(|| {
                        profile.frames.push(f);
                        next
                    });
                    StackFrame { addr, frame, kernel }
                })
                .collect();
            entry_ids.insert(key.clone(), profile.entries.len());
            profile.entries.push(Entry {
                stack,
                tid: s.tid,
                trace_id: s.trace_id,
                span_id: s.span_id,
                attrs: key.4,
                count: 1,
                weight_ns: s.weight_ns,
            });
        }
        profile.mappings = symbolizer.mappings().to_vec();
        profile.notes.extend(symbolizer.perf_map_note());
        profile
    }

    pub fn frame(&self, f: &StackFrame) -> &Frame {
        &self.frames[f.frame]
    }

    pub fn total_count(&self) -> u64 {
        self.entries.iter().map(|e| e.count).sum()
    }
}
