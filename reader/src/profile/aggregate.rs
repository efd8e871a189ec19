//! Symbolizes samples and merges those with the same kind, stack, thread,
//! span and attributes into one entry: the unit every output works on.
//! Samples arrive in batches while recording (symbolized while the process
//! and its JIT code are still there); distinct entries are capped.

use super::frame::Frame;
use super::sample::{Sample, SampleKind};
use super::symbolizer::Symbolizer;
use crate::discovery::build_id::build_id;
use crate::discovery::maps::Mapping;
use std::collections::HashMap;

/// Distinct entries kept; samples that would open more are counted in
/// [`Profile::dropped_samples`] so memory stays bounded.
pub const MAX_ENTRIES: usize = 200_000;
/// Sample times kept per profile (16 bytes each); past this, entries only count
/// and [`Profile::times_complete`] turns false.
pub const MAX_OBSERVATIONS: usize = 2_000_000;

/// When one sample of an entry was taken and what it weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// CLOCK_MONOTONIC ns (see [`Profile::unix_ns`]).
    pub time_ns: u64,
    pub weight_ns: u64,
}

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
    /// Each sample's time and weight, oldest first, while the profile keeps them.
    pub times: Vec<Observation>,
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
    /// Notes that hold for the process's life, in the first profile they apply to only
    /// (an agent shows them once per process; `notes` repeats them in every profile).
    pub process_notes: Vec<String>,
    /// Samples not kept because [`MAX_ENTRIES`] distinct entries existed already.
    pub dropped_samples: u64,
    /// Off-CPU time was traced (weights then mix CPU and off-CPU time).
    pub off_cpu_traced: bool,
    /// Nanoseconds one CPU sample stands for (the sampling period).
    pub cpu_period_ns: u64,
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC when the profile was finished:
    /// turns sample times into wall-clock times.
    pub monotonic_to_unix_ns: i64,
    /// Every entry's `times` holds all its samples (no cap was reached).
    pub times_complete: bool,
    /// The process runs V8: unnamed code outside any file is V8's JIT code.
    pub runs_v8: bool,
    /// Build ids (lower-case hex) of the mapped objects, by (device, inode).
    pub build_ids: HashMap<(String, u64), String>,
    observations: usize,
    frame_ids: HashMap<Frame, usize>,
    entry_ids: HashMap<Key, usize>,
}

fn is_tracing_frame(name: &str) -> bool {
    ["bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_"].iter().any(|p| name.starts_with(p))
}

type Key = (SampleKind, Vec<(u64, bool)>, u32, Option<[u8; 16]>, Option<[u8; 8]>, Vec<(String, String)>);

impl Profile {
    pub fn new(pid: i32) -> Profile {
        Profile { pid, times_complete: true, ..Default::default() }
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
        let addrs: Vec<(u64, bool)> = s.kernel_stack.iter().map(|a| (*a, true)).chain(s.user_stack.iter().map(|a| (*a, false))).collect();
        let key: Key = (s.kind, addrs, s.tid, s.trace_id, s.span_id, attrs);
        let observation = self.observe(s);
        if let Some(&i) = self.entry_ids.get(&key) {
            let e = &mut self.entries[i];
            e.count += 1;
            e.weight_ns += s.weight_ns;
            e.times.extend(observation);
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
        let stack = key.1.iter().zip(named).skip(own).map(|(&(addr, kernel), f)| StackFrame { addr, frame: self.intern(f), kernel }).collect();
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
            times: observation.into_iter().collect(),
        });
    }

    /// The sample's observation, while under [`MAX_OBSERVATIONS`].
    fn observe(&mut self, s: &Sample) -> Option<Observation> {
        if self.observations >= MAX_OBSERVATIONS {
            self.times_complete = false;
            return None;
        }
        self.observations += 1;
        Some(Observation { time_ns: s.time_ns, weight_ns: s.weight_ns })
    }

    /// Wall-clock ns since the Unix epoch of a CLOCK_MONOTONIC time.
    pub fn unix_ns(&self, monotonic_ns: u64) -> u64 {
        (monotonic_ns as i64).saturating_add(self.monotonic_to_unix_ns).max(0) as u64
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
                let mine = &mut self.entries[i];
                mine.count += e.count;
                mine.weight_ns += e.weight_ns;
                mine.times.extend(e.times);
            }
            None => {
                self.entry_ids.insert(key, self.entries.len());
                self.entries.push(e);
            }
        }
    }

    /// Records what the symbolizer knows at the end: the mappings (with
    /// their build ids) and its notes, and the clock offset for wall-clock times.
    pub fn finish(&mut self, symbolizer: &Symbolizer) {
        self.mappings = symbolizer.mappings().to_vec();
        for m in self.mappings.iter().filter(|m| m.is_file_backed() && m.perms.contains('x')) {
            if let Some(id) = build_id(self.pid, m) {
                self.build_ids.insert((m.dev.clone(), m.inode), id);
            }
        }
        self.monotonic_to_unix_ns = monotonic_to_unix_ns();
        self.runs_v8 = symbolizer.runs_v8();
        if symbolizer.runs_v8() {
            self.notes.extend(symbolizer.perf_map_note());
            self.notes.extend(symbolizer.jitdump_notes());
        }
        self.notes.extend(symbolizer.baseline_note());
        self.notes.extend(symbolizer.source_map_notes());
        if self.total_count() > 0 {
            self.process_notes = symbolizer.process_notes_once();
        }
        if self.dropped_samples > 0 {
            self.notes.push(format!(
                "{} samples were left out of the profile: it already held {MAX_ENTRIES} distinct stack x thread x span entries",
                self.dropped_samples
            ));
        }
    }

    /// Build id of a mapping, when its object has one.
    pub fn build_id(&self, m: &Mapping) -> Option<&str> {
        self.build_ids.get(&(m.dev.clone(), m.inode)).map(String::as_str)
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

/// CLOCK_REALTIME - CLOCK_MONOTONIC, now.
pub fn monotonic_to_unix_ns() -> i64 {
    let now = |clock| {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: valid out pointer.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    };
    let mono = now(libc::CLOCK_MONOTONIC);
    now(libc::CLOCK_REALTIME) - mono
}
