//! Received OTLP/Profiles (resolved samples, see [`crate::received`]) turned back into one
//! [`Profile`] per process, so that what a Collector received goes through the same summary,
//! top frames, flame graphs and pprof as a `record`: the inverse of [`crate::encode`].
//!
//! A process is told apart by its resource's `host.name` and `process.pid` (by `service.name`
//! when it has no pid); its windows (one OTLP `Profile` each) are merged. CPU profiles
//! (`samples`/`count`) give CPU entries, off-CPU ones (`off_cpu`/`nanoseconds`) blocked or
//! preempted entries, the two allocation ones allocation entries (`alloc_objects`/`count`
//! their counts, `alloc_space`/`bytes` their bytes and times); the link gives the trace and span, `thread.id`/`thread.name` the thread,
//! the other sample attributes the record's attributes; frames get their kind from
//! `profile.frame.type`, mappings their build id from `process.executable.build_id.gnu`.

use crate::encode::{BUILD_ID_GNU, FRAME_TYPE, OFF_CPU_STATE, THREAD_ID, THREAD_NAME};
use crate::received::{ResolvedFrame, ResolvedMapping, ResolvedSample};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use thread_ctx_discovery::maps::Mapping;
use thread_ctx_model::symbolized::{Observation, StackFrame};
use thread_ctx_model::{Entry, Frame, FrameKind, Measure, Profile, SampleKind, SourcePos, Value};

use thread_ctx_model::symbolized::KERNEL_MAPPING;
/// The device that mappings rebuilt from OTLP are filed under (the profile keys build ids by
/// device and inode; OTLP has neither).
const OTLP_DEVICE: &str = "otlp";

/// What one process sent.
#[derive(Debug)]
pub struct ReceivedProcess {
    /// The resource of its latest window (a process republishes its context once its SDK
    /// has its full resource).
    pub resource: BTreeMap<String, String>,
    pub profile: Profile,
    /// Windows with samples, and the wall-clock span they cover.
    pub windows: usize,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// CPU samples received (counted as they were added: a profile built without its entries
    /// still knows them).
    cpu_samples: u64,
}

impl ReceivedProcess {
    pub fn service_name(&self) -> Option<&str> {
        self.resource.get("service.name").map(String::as_str)
    }

    pub fn pid(&self) -> Option<u32> {
        self.resource.get("process.pid")?.parse().ok()
    }

    /// CPU samples.
    pub fn cpu_samples(&self) -> u64 {
        self.cpu_samples
    }

    /// Mapped files with a GNU build id: (file name, build id), sorted by name.
    pub fn build_ids(&self) -> Vec<(&str, &str)> {
        let mut out: Vec<(&str, &str)> = self.profile.mappings.iter().filter_map(|m| Some((m.name.as_str(), self.profile.build_id(m)?))).collect();
        out.sort();
        out.dedup();
        out
    }
}

/// The processes in `samples`, most CPU samples first.
pub fn processes(samples: &[ResolvedSample]) -> Vec<ReceivedProcess> {
    let mut all = Processes::default();
    for s in samples {
        all.add(s);
    }
    all.finish()
}

/// What tells a process apart: its resource's (`host.name`, `process.pid`, else `service.name`).
pub type ProcessKey = (String, String);

/// Processes built up one sample at a time, so that a file read one message at a time never
/// holds more than the profiles it adds up to (`report --otlp`).
#[derive(Default)]
pub struct Processes {
    by_key: BTreeMap<ProcessKey, Builder>,
}

impl Processes {
    /// Adds a sample to its process's profile.
    pub fn add(&mut self, s: &ResolvedSample) {
        self.add_with(s, true, |_, _, _| {});
    }

    /// Adds a sample, giving the entry it makes to `visit` with its process's key and profile
    /// (whose frames the entry's stack indexes); the profile keeps the entry only when `keep`
    /// says so. A reader that adds up what it prints as entries come keeps none: memory then holds
    /// each process's frames, mappings and threads, not an entry per (stack, span) pair.
    pub fn add_with(&mut self, s: &ResolvedSample, keep: bool, visit: impl FnOnce(&ProcessKey, &Profile, &Entry)) {
        let key = process_key(&s.resource);
        let builder = match self.by_key.get_mut(&key) {
            Some(b) => b,
            None => self.by_key.entry(key.clone()).or_default(),
        };
        let entry = builder.add(s);
        visit(&key, &builder.profile, &entry);
        if keep {
            builder.profile.push_entry(entry);
        }
    }

    /// The processes, most CPU samples first.
    pub fn finish(self) -> Vec<ReceivedProcess> {
        self.finish_keyed().into_iter().map(|(_, p)| p).collect()
    }

    /// The processes with their keys, most CPU samples first.
    pub fn finish_keyed(self) -> Vec<(ProcessKey, ReceivedProcess)> {
        let mut out: Vec<(ProcessKey, ReceivedProcess)> = self.by_key.into_iter().map(|(k, b)| (k, b.finish())).collect();
        out.sort_by_key(|(_, p)| std::cmp::Reverse(p.cpu_samples()));
        out
    }
}

/// The key of the process whose resource this is.
pub fn process_key(r: &BTreeMap<String, String>) -> ProcessKey {
    let who = r.get("process.pid").or_else(|| r.get("service.name")).map(String::as_str).unwrap_or_default();
    let host = r.get("host.name").map(String::as_str).unwrap_or_default();
    (host.to_string(), who.to_string())
}

#[derive(Default)]
struct Builder {
    profile: Profile,
    resource: BTreeMap<String, String>,
    latest_window: u64,
    windows: BTreeSet<u64>,
    end_unix_ns: u64,
    /// Distinct mappings, by what OTLP says of them, and the inode they were given.
    mappings: HashMap<ResolvedMapping, u64>,
    times_complete: bool,
    cpu_samples: u64,
}

impl Builder {
    /// Takes in what the sample says of its process, and makes its entry.
    fn add(&mut self, s: &ResolvedSample) -> Entry {
        if self.windows.is_empty() {
            self.times_complete = true;
        }
        if s.profile_time_unix_nano >= self.latest_window {
            self.latest_window = s.profile_time_unix_nano;
            self.resource.clone_from(&s.resource);
        }
        self.windows.insert(s.profile_time_unix_nano);
        self.end_unix_ns = self.end_unix_ns.max(s.profile_time_unix_nano + s.profile_duration_nano);
        let period = s.period.2.max(0) as u64;
        let alloc_value = match Measure::of_type(&s.sample_type.0) {
            Some((Measure::Alloc, v)) => Some(v),
            _ => None,
        };
        let kind = match (s.sample_type.0.as_str(), s.attributes.get(OFF_CPU_STATE).map(String::as_str)) {
            _ if alloc_value.is_some() => SampleKind::Alloc,
            ("off_cpu", Some("preempted")) => SampleKind::Preempted,
            ("off_cpu", _) => SampleKind::Blocked,
            _ => SampleKind::Cpu,
        };
        match kind {
            SampleKind::Cpu => self.profile.cpu_period_ns = period,
            SampleKind::Alloc => self.profile.alloc_traced = true,
            _ => self.profile.off_cpu_traced = true,
        }
        let stack = s.frames.iter().map(|f| self.stack_frame(f)).collect();
        let tid = s.attributes.get(THREAD_ID).and_then(|t| t.parse().ok()).unwrap_or(0);
        if let Some(name) = s.attributes.get(THREAD_NAME) {
            self.profile.thread_names.entry(tid).or_insert_with(|| name.clone());
        }
        let own = [THREAD_ID, THREAD_NAME, OFF_CPU_STATE];
        let attrs: Vec<(String, String)> =
            s.attributes.iter().filter(|(k, _)| !own.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
        let (trace_id, span_id) = match &s.link {
            Some((t, sp)) => (t.as_slice().try_into().ok(), sp.as_slice().try_into().ok()),
            None => (None, None),
        };
        let values: Vec<u64> = s.values.iter().map(|v| (*v).max(0) as u64).collect();
        // CPU values count samples (one period each); off-CPU values are nanoseconds. An
        // allocation sample comes twice, once per sibling profile: its objects give the count,
        // its bytes the weight and the times, and the two halves merge into one entry.
        let (count, weight) = match (kind, alloc_value) {
            (SampleKind::Cpu, _) => (values.iter().sum::<u64>(), values.iter().sum::<u64>() * period),
            (_, Some(Value::Count)) => (values.iter().sum(), 0),
            (_, Some(Value::Weight)) => (0, values.iter().sum()),
            _ => (values.len() as u64, values.iter().sum()),
        };
        let weight_of = |v: u64| if kind == SampleKind::Cpu { v * period } else { v };
        let ts = &s.timestamps_unix_nano;
        let times: Vec<Observation> = if alloc_value == Some(Value::Count) {
            Vec::new()
        } else if !ts.is_empty() && ts.len() == values.len() {
            ts.iter().zip(&values).map(|(&t, &v)| Observation { time_ns: t, weight: weight_of(v) }).collect()
        } else if kind == SampleKind::Cpu && values.len() == 1 && ts.len() as u64 == values[0] {
            // One count with a timestamp per sample it counts.
            ts.iter().map(|&t| Observation { time_ns: t, weight: period }).collect()
        } else {
            self.times_complete = false;
            Vec::new()
        };
        if kind.is_cpu() {
            self.cpu_samples += count;
        }
        Entry { kind, stack, tid, trace_id, span_id, attrs, count, weight, times }
    }

    fn stack_frame(&mut self, f: &ResolvedFrame) -> StackFrame {
        let in_kernel = f.mapping.as_ref().is_some_and(|m| m.filename == KERNEL_MAPPING);
        let bracketed = f.function.starts_with('[');
        let kind = match f.attributes.get(FRAME_TYPE).map(String::as_str) {
            Some("kernel") => FrameKind::Kernel,
            _ if in_kernel => FrameKind::Kernel,
            Some("v8js") if !(bracketed && f.file.is_empty()) => FrameKind::Js,
            _ if bracketed || f.function.is_empty() => FrameKind::Unknown,
            _ => FrameKind::Native,
        };
        if kind == FrameKind::Js {
            self.profile.runs_v8 = true;
        }
        let positive = |n: i64| u32::try_from(n).ok().filter(|&n| n > 0);
        let start = positive(f.start_line);
        // A JS frame sampled at a line other than its function's start carries that position.
        let pos = positive(f.line).filter(|&l| kind == FrameKind::Js && Some(l) != start).map(|line| SourcePos { line, column: positive(f.column) });
        let name = if f.function.is_empty() { format!("[{:#x}]", f.address) } else { f.function.clone() };
        let frame = Frame {
            kind,
            name,
            file: (!f.file.is_empty()).then(|| f.file.clone()),
            line: start,
            column: if pos.is_none() && kind == FrameKind::Js { positive(f.column) } else { None },
            pos,
            generated: None,
            tier: None,
        };
        if let Some(m) = f.mapping.as_ref().filter(|m| m.filename.starts_with('/')) {
            self.mapping(m);
        }
        StackFrame { addr: f.address, frame: self.profile.intern(frame), kernel: kind == FrameKind::Kernel }
    }

    fn mapping(&mut self, m: &ResolvedMapping) {
        if self.mappings.contains_key(m) {
            return;
        }
        let inode = self.mappings.len() as u64 + 1;
        self.mappings.insert(m.clone(), inode);
        if let Some(id) = m.attributes.get(BUILD_ID_GNU) {
            self.profile.build_ids.insert((OTLP_DEVICE.into(), inode), id.clone());
        }
        self.profile.mappings.push(Mapping {
            start: m.memory_start,
            end: m.memory_limit,
            perms: "r-xp".into(),
            offset: m.file_offset,
            dev: OTLP_DEVICE.into(),
            inode,
            name: m.filename.clone(),
        });
    }

    fn finish(mut self) -> ReceivedProcess {
        self.profile.pid = self.resource.get("process.pid").and_then(|p| p.parse().ok()).unwrap_or(0);
        // Times are wall clock already.
        self.profile.monotonic_to_unix_ns = 0;
        self.profile.times_complete = self.times_complete;
        self.profile.mappings.sort_by_key(|m| m.start);
        ReceivedProcess {
            resource: self.resource,
            profile: self.profile,
            windows: self.windows.len(),
            start_unix_ns: self.windows.first().copied().unwrap_or(0),
            end_unix_ns: self.end_unix_ns,
            cpu_samples: self.cpu_samples,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{export_request, ProcessWindow};
    use crate::received::resolve;
    use opentelemetry_proto::tonic::profiles::v1development::ProfilesData;
    use thread_ctx_discovery::process_context_proto::{string_value, KeyValue, Resource};

    /// The window the OTLP writer's tests send, plus a JS frame sampled at a line of its own
    /// (V8's jitdump; OTLP has no function start column: that frame has none), and three
    /// allocation samples (two sibling profiles, merged back into one entry).
    fn sent() -> Profile {
        let mut p = crate::encode::tests::profile();
        let sampled =
            p.intern(Frame { pos: Some(SourcePos { line: 5, column: Some(2) }), ..Frame::js("twoLoops", Some("/app/b.js"), Some(3), None) });
        let mut e = p.entries[0].clone();
        e.stack.insert(0, StackFrame { addr: 0x7f00_0000_0200, frame: sampled, kernel: false });
        p.push_entry(e);
        p.alloc_traced = true;
        let at = |t: u64, bytes: u64| Observation { time_ns: t, weight: bytes };
        let times = vec![at(11, 600_000), at(12, 700_000), at(13, 500_000)];
        p.push_entry(Entry { kind: SampleKind::Alloc, count: 3, weight: 1_800_000, times, ..p.entries[0].clone() });
        p
    }

    fn resource(pid: &str) -> Resource {
        let kv = |k: &str, v: &str| KeyValue { key: k.into(), value: Some(string_value(v)) };
        Resource { attributes: vec![kv("service.name", "shop"), kv("process.pid", pid)], ..Default::default() }
    }

    #[test]
    fn what_the_agent_sends_comes_back_as_the_same_profile() {
        let p = sent();
        let req = export_request(&[
            ProcessWindow { resource: &resource("42"), profile: &p, start_unix_ns: 1_000, duration_ns: 10, throttling: None },
            ProcessWindow { resource: &resource("43"), profile: &p, start_unix_ns: 1_000, duration_ns: 10, throttling: None },
        ]);
        let data = ProfilesData { resource_profiles: req.resource_profiles, dictionary: req.dictionary };
        let back = processes(&resolve(&data).unwrap());
        assert_eq!(back.len(), 2, "two processes");
        let got = &back.iter().find(|r| r.pid() == Some(42)).unwrap();
        assert_eq!((got.service_name(), got.windows, got.cpu_samples()), (Some("shop"), 1, 4));
        assert_eq!(got.build_ids(), vec![("/usr/bin/node", "abcd")]);
        let g = &got.profile;
        assert!(g.off_cpu_traced && g.alloc_traced && g.cpu_period_ns == 10_000_000 && g.runs_v8 && g.times_complete);
        assert_eq!(g.thread_name(42), Some("node"));
        let frames = |pr: &Profile, e: &Entry| e.stack.iter().map(|f| pr.frame(f).clone()).collect::<Vec<_>>();
        assert_eq!(g.entries.len(), p.entries.len());
        for orig in &p.entries {
            // (CPU samples travel before off-CPU ones.)
            let back = g
                .entries
                .iter()
                .find(|b| b.kind == orig.kind && frames(g, b) == frames(&p, orig))
                .unwrap_or_else(|| panic!("{orig:?} did not come back"));
            assert_eq!((back.count, back.weight, back.tid), (orig.count, orig.weight, orig.tid));
            assert_eq!((back.trace_id, back.span_id, &back.attrs), (orig.trace_id, orig.span_id, &orig.attrs));
            let times: Vec<u64> = orig.times.iter().map(|o| p.unix_ns(o.time_ns)).collect();
            assert_eq!(back.times.iter().map(|o| o.time_ns).collect::<Vec<_>>(), times, "wall-clock times");
        }
        let node = g.mappings.iter().find(|m| m.name == "/usr/bin/node").unwrap();
        assert_eq!((node.start, node.end, g.build_id(node)), (0x1000, 0x2000, Some("abcd")));
    }
}
