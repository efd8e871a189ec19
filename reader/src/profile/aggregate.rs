//! Symbolizes samples and merges those with the same kind, stack, thread,
//! span and attributes into one entry: the unit every output works on.
//! Samples arrive in batches while recording (symbolized while the process
//! and its JIT code are still there); distinct entries are capped.

use super::frame::Frame;
use super::sample::{Sample, SampleKind};
use super::symbolizer::Symbolizer;
use crate::maps::Mapping;
use std::collections::HashMap;

/// Distinct entries kept; samples that would open more are counted in
/// [`Profile::dropped_samples`] so memory stays bounded.
pub const MAX_ENTRIES: usize = 200_000;

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
    pub kind: SampleKind,
    /// Leaf first: kernel frames (if any), then user frames.
    pub stack: Vec<StackFrame>,
    pub tid: u32,
    pub trace_id: Option<[u8; 16]>,
    pub span_id: Option<[u8; 8]>,
    /// Sorted by key.
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
    /// Thread names (comm) by tid, as first seen.
    pub thread_names: HashMap<u32, String>,
    /// The target's mappings at symbolization time.
    pub mappings: Vec<Mapping>,
    /// Things the user should know (e.g. the perf map is missing).
    pub notes: Vec<String>,
    /// Samples not kept because [`MAX_ENTRIES`] distinct entries existed already.
    pub dropped_samples: u64,
    /// Off-CPU time was traced (weights then mix CPU and off-CPU time).
    pub off_cpu_traced: bool,
    /// Nanoseconds one CPU sample stands for (the sampling period).
    pub cpu_period_ns: u64,
    frame_ids: HashMap<Frame, usize>,
    entry_ids: HashMap<Key, usize>,
}

fn is_tracing_frame(name: &str) -> bool {
    ["bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_"].iter().any(|p| name.starts_with(p))
}

type Key = (SampleKind, Vec<(u64, bool)>, u32, Option<[u8; 16]>, Option<[u8; 8]>, Vec<(String, String)>);

impl Profile {
    pub fn new(pid: i32) -> Profile {
        Profile { pid, ..Default::default() }
    }

    /// All samples at once: [`Profile::add`] then [`Profile::finish`].
    pub fn build(samples: &[Sample], symbolizer: &mut Symbolizer) -> Profile {
        let mut p = Profile::new(symbolizer.pid());
        p.add(samples, symbolizer);
        p.finish(symbolizer);
        p
    }

    /// Symbolizes a batch (one blazesym call per address space) and merges it in.
    pub fn add(&mut self, samples: &[Sample], symbolizer: &mut Symbolizer) {
        let users: Vec<&[u64]> = samples.iter().map(|s| s.user_stack.as_slice()).collect();
        let kernels: Vec<&[u64]> = samples.iter().map(|s| s.kernel_stack.as_slice()).collect();
        symbolizer.prefetch(&users, &kernels);
        for s in samples {
            self.add_one(s, symbolizer);
        }
    }

    fn add_one(&mut self, s: &Sample, symbolizer: &mut Symbolizer) {
        let mut attrs = s.attrs.clone();
        attrs.sort();
        let addrs: Vec<(u64, bool)> =
            s.kernel_stack.iter().map(|a| (*a, true)).chain(s.user_stack.iter().map(|a| (*a, false))).collect();
        let key: Key = (s.kind, addrs, s.tid, s.trace_id, s.span_id, attrs);
        if let Some(&i) = self.entry_ids.get(&key) {
            self.entries[i].count += 1;
            self.entries[i].weight_ns += s.weight_ns;
            return;
        }
        if self.entries.len() >= MAX_ENTRIES {
            self.dropped_samples += 1;
            return;
        }
        let kernel = symbolizer.kernel_frames(&s.kernel_stack);
        // A tracepoint's kernel stack starts in the tracing program itself: not the thread's code.
        let own = kernel.iter().take_while(|f| is_tracing_frame(&f.name)).count();
        let named = kernel.into_iter().chain(symbolizer.user_frames(&s.user_stack));
        let stack = key
            .1
            .iter()
            .zip(named)
            .skip(own)
            .map(|(&(addr, kernel), f)| StackFrame { addr, frame: self.intern(f), kernel })
            .collect();
        self.entry_ids.insert(key.clone(), self.entries.len());
        self.entries.push(Entry {
            kind: s.kind,
            stack,
            tid: s.tid,
            trace_id: s.trace_id,
            span_id: s.span_id,
            attrs: key.5,
            count: 1,
            weight_ns: s.weight_ns,
        });
    }

    /// Index of `f` in [`Profile::frames`], adding it when new.
    pub fn intern(&mut self, f: Frame) -> usize {
        if let Some(&i) = self.frame_ids.get(&f) {
            return i;
        }
        self.frames.push(f.clone());
        self.frame_ids.insert(f, self.frames.len() - 1);
        self.frames.len() - 1
    }

    /// Adds an entry built elsewhere (a decoded pprof), merging it with an equal one.
    pub fn push_entry(&mut self, e: Entry) {
        let addrs = e.stack.iter().map(|f| (f.addr, f.kernel)).collect();
        let key: Key = (e.kind, addrs, e.tid, e.trace_id, e.span_id, e.attrs.clone());
        match self.entry_ids.get(&key) {
            Some(&i) => {
                self.entries[i].count += e.count;
                self.entries[i].weight_ns += e.weight_ns;
            }
            None => {
                self.entry_ids.insert(key, self.entries.len());
                self.entries.push(e);
            }
        }
    }

    /// Records what the symbolizer knows at the end: the mappings and its notes.
    pub fn finish(&mut self, symbolizer: &Symbolizer) {
        self.mappings = symbolizer.mappings().to_vec();
        if symbolizer.runs_v8() {
            self.notes.extend(symbolizer.perf_map_note());
        }
        if self.dropped_samples > 0 {
            self.notes.push(format!(
                "{} samples were left out of the profile: it already held {MAX_ENTRIES} distinct stack x thread x span entries",
                self.dropped_samples
            ));
        }
    }

    pub fn frame(&self, f: &StackFrame) -> &Frame {
        &self.frames[f.frame]
    }

    pub fn total_count(&self) -> u64 {
        self.entries.iter().map(|e| e.count).sum()
    }

    pub fn thread_name(&self, tid: u32) -> Option<&str> {
        self.thread_names.get(&tid).map(String::as_str)
    }
}
