//! A process's profile as the outputs take it: its samples aggregated into
//! entries (one per kind x stack x thread x span x attributes) whose stacks
//! are symbolized frames, plus what the outputs need around them (mappings,
//! build ids, thread names, notes, clocks).

use crate::frame::Frame;
use crate::sample::{Measure, SampleKind};
use foldhash::HashMap;
use thread_ctx_discovery::maps::Mapping;

/// The mapping kernel frames are in, as pprof and OTLP profiles name it, and where it starts.
pub const KERNEL_MAPPING: &str = "[kernel.kallsyms]";
pub const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// When one sample of an entry was taken and what it weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// CLOCK_MONOTONIC ns (see [`Profile::unix_ns`]).
    pub time_ns: u64,
    pub weight: u64,
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
    /// The sum of the samples' weights, in the unit of the kind's measure.
    pub weight: u64,
    /// Each sample's time and weight, oldest first, while the profile keeps them.
    pub times: Vec<Observation>,
}

#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub pid: i32,
    /// Distinct frames, referenced by index.
    pub frames: Vec<Frame>,
    pub entries: Vec<Entry>,
    /// Thread names (comm) by tid.
    pub thread_names: HashMap<u32, String>,
    /// For a process in a PID namespace of its own: each thread's id there, by tid.
    pub thread_vids: HashMap<u32, u32>,
    /// The target's mappings at symbolization time.
    pub mappings: Vec<Mapping>,
    /// Things the user should know (e.g. the perf map is missing).
    pub notes: Vec<String>,
    /// Notes that hold for the process's life, in the first profile they apply to only
    /// (an agent shows them once per process; `notes` repeats them in every profile).
    pub process_notes: Vec<String>,
    /// Samples not kept because the profile already held its maximum of distinct entries.
    pub dropped_samples: u64,
    /// Off-CPU time was traced (an off-CPU profile exists even when empty).
    pub off_cpu_traced: bool,
    /// Allocations were traced (allocation profiles exist even when empty).
    pub alloc_traced: bool,
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
    /// How the JS frames of its CPU samples were named, or why not.
    pub js_naming: crate::JsNaming,
    frame_ids: HashMap<Frame, usize>,
    /// Entries by the hash of what merges them (kind, stack addresses, thread, span, attributes),
    /// compared with the entry itself on a hit: a key of its own copied each entry's stack and
    /// attributes (half of an entry's memory with a stack of 24 frames).
    entry_ids: HashMap<u64, usize>,
    /// Entries whose hash an earlier entry has already (rare: 64-bit hashes).
    entry_collisions: HashMap<u64, Vec<usize>>,
}

/// The entry the output tests build on: `count` CPU samples of `stack` on thread 1, in the span
/// whose trace id bytes are all `ids.0` and span id bytes all `ids.1`, with these attributes;
/// each test sets what else it needs with `..Entry::test(..)`.
#[cfg(any(test, feature = "test-support"))]
impl Entry {
    #[doc(hidden)]
    pub fn test(stack: Vec<StackFrame>, ids: Option<(u8, u8)>, attrs: &[(&str, &str)], count: u64) -> Entry {
        Entry {
            kind: SampleKind::Cpu,
            stack,
            tid: 1,
            trace_id: ids.map(|(t, _)| [t; 16]),
            span_id: ids.map(|(_, s)| [s; 8]),
            attrs: attrs.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect(),
            count,
            weight: 0,
            times: vec![],
        }
    }
}

/// The mapping the output tests put native frames in: `/usr/bin/node`, executable, at
/// 0x1000..0x2000 (device 08:01, inode 7).
#[cfg(any(test, feature = "test-support"))]
impl Profile {
    #[doc(hidden)]
    pub fn test_node_mapping() -> Mapping {
        Mapping { start: 0x1000, end: 0x2000, perms: "r-xp".into(), offset: 0, dev: "08:01".into(), inode: 7, name: "/usr/bin/node".into() }
    }
}

/// Two entries merge: same kind, stack addresses, thread, span and attributes.
fn merges_with(a: &Entry, b: &Entry) -> bool {
    let same_stack = a.stack.len() == b.stack.len() && a.stack.iter().zip(&b.stack).all(|(x, y)| x.addr == y.addr && x.kernel == y.kernel);
    a.kind == b.kind && a.tid == b.tid && a.trace_id == b.trace_id && a.span_id == b.span_id && same_stack && a.attrs == b.attrs
}

impl Profile {
    pub fn new(pid: i32) -> Profile {
        Profile { pid, times_complete: true, ..Default::default() }
    }

    /// The measures this profile has samples of, or was asked to trace.
    pub fn measures(&self) -> Vec<Measure> {
        Measure::ALL
            .into_iter()
            .filter(|m| match m {
                Measure::Cpu => true,
                Measure::OffCpu => self.off_cpu_traced,
                Measure::Alloc => self.alloc_traced,
            })
            .collect()
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

    /// Adds an entry, merging it with an equal one (same kind, stack, thread, span, attributes).
    pub fn push_entry(&mut self, e: Entry) {
        let hash = self.entry_hash(&e);
        let first = self.entry_ids.get(&hash).copied();
        let others = self.entry_collisions.get(&hash).into_iter().flatten().copied();
        match first.into_iter().chain(others).find(|&i| merges_with(&self.entries[i], &e)) {
            Some(i) => {
                let mine = &mut self.entries[i];
                mine.count += e.count;
                mine.weight += e.weight;
                mine.times.extend(e.times);
            }
            None => {
                let i = self.entries.len();
                match first {
                    None => {
                        self.entry_ids.insert(hash, i);
                    }
                    Some(_) => self.entry_collisions.entry(hash).or_default().push(i),
                }
                self.entries.push(e);
            }
        }
    }

    /// The hash of what [`Profile::push_entry`] merges entries by.
    fn entry_hash(&self, e: &Entry) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = self.entry_ids.hasher().build_hasher();
        (e.kind, e.stack.len(), e.tid, e.trace_id, e.span_id, &e.attrs).hash(&mut h);
        for f in &e.stack {
            (f.addr, f.kernel).hash(&mut h);
        }
        h.finish()
    }

    /// Adds an entry known to be distinct from every other (the builder's entries are).
    pub fn push_distinct(&mut self, e: Entry) {
        self.entries.push(e);
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

    /// Thread `tid`'s id in the process's own PID namespace, when that is not the reader's.
    pub fn thread_vid(&self, tid: u32) -> Option<u32> {
        self.thread_vids.get(&tid).copied()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(addrs: &[u64], span: u8, count: u64) -> Entry {
        let stack = addrs.iter().map(|&addr| StackFrame { addr, frame: 0, kernel: false }).collect();
        Entry { weight: count * 10, ..Entry::test(stack, Some((1, span)), &[("http.route", "/a")], count) }
    }

    #[test]
    fn equal_entries_merge_and_others_stay_apart_even_when_their_hashes_collide() {
        let mut p = Profile::new(1);
        p.push_entry(entry(&[1, 2], 1, 1));
        p.push_entry(entry(&[1, 2], 1, 2));
        p.push_entry(entry(&[1, 2], 2, 1));
        p.push_entry(entry(&[1, 3], 1, 1));
        let mut in_kernel = entry(&[1, 2], 1, 1);
        in_kernel.stack[0].kernel = true;
        p.push_entry(in_kernel);
        assert_eq!(p.entries.iter().map(|e| e.count).collect::<Vec<_>>(), vec![3, 1, 1, 1]);
        assert_eq!(p.entries[0].weight, 30);
        // An entry whose hash the first entry has: kept apart, then merged with itself.
        let other = entry(&[9], 1, 1);
        p.entry_ids.insert(p.entry_hash(&other), 0);
        p.push_entry(other.clone());
        p.push_entry(other);
        assert_eq!(p.entries.iter().map(|e| e.count).collect::<Vec<_>>(), vec![3, 1, 1, 1, 2]);
        assert_eq!(p.entry_collisions.len(), 1);
    }
}
