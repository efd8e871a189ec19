//! The symbolize stage of one process: names the addresses and threads its
//! [`Aggregate`] hands over while the process runs, and turns each window's
//! aggregate into a [`Profile`] (frames, mappings with build ids, thread
//! names, notes). It reads the target (maps, perf map, jitdump, objects,
//! thread names), so the agent runs it on its symbolization worker.

use super::aggregate::{Aggregate, Space, Unnamed};
use super::frame::Frame;
use super::js_key::JsKey;
use super::symbolized::{monotonic_to_unix_ns, Entry, Profile, StackFrame};
use super::symbolizer::{Symbolizer, UNNAMED_JIT};
use foldhash::{HashMap, HashMapExt, HashSet};
use thread_ctx_discovery::build_id::build_id;
use thread_ctx_discovery::container::namespace_pid;
use thread_ctx_model::js_naming::why;
use thread_ctx_model::{FrameKind, JsNaming};
use thread_ctx_sampler::SamplerOptions;

/// Thread names kept per process; past this the table starts over (counted).
const MAX_THREAD_NAMES: usize = 10_000;

pub struct ProfileBuilder {
    symbolizer: Symbolizer,
    thread_names: HashMap<u32, String>,
    /// For a process in a PID namespace of its own: its threads' ids there (what its spans
    /// say as `thread.id`), by the ids this reader sees.
    thread_vids: HashMap<u32, u32>,
    /// Whether the process is in a PID namespace of its own (read once).
    namespaced: Option<bool>,
    cpu_period_ns: u64,
    off_cpu: bool,
    alloc: bool,
    /// Thread names dropped to keep the table bounded.
    pub thread_names_evicted: u64,
}

fn is_tracing_frame(name: &str) -> bool {
    ["bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_"].iter().any(|p| name.starts_with(p))
}

impl ProfileBuilder {
    pub fn new(symbolizer: Symbolizer, opts: &SamplerOptions) -> ProfileBuilder {
        ProfileBuilder {
            symbolizer,
            thread_names: HashMap::new(),
            thread_vids: HashMap::new(),
            namespaced: None,
            cpu_period_ns: opts.cpu_period_ns(),
            off_cpu: opts.off_cpu,
            alloc: opts.alloc,
            thread_names_evicted: 0,
        }
    }

    pub fn symbolizer(&self) -> &Symbolizer {
        &self.symbolizer
    }

    /// The symbolizer, to name a stack now rather than with the window (`record --frames`).
    pub fn symbolizer_mut(&mut self) -> &mut Symbolizer {
        &mut self.symbolizer
    }

    /// Thread names cached now.
    pub fn thread_names_cached(&self) -> usize {
        self.thread_names.len()
    }

    /// Names what the aggregate saw first since the last call.
    pub fn name(&mut self, unnamed: &Unnamed) {
        self.symbolizer.name(&unnamed.user, &unnamed.kernel);
        self.symbolizer.name_js(&unnamed.js);
        for &tid in &unnamed.tids {
            self.name_thread(tid);
        }
    }

    fn name_thread(&mut self, tid: u32) {
        if self.thread_names.contains_key(&tid) {
            return;
        }
        if self.thread_names.len() >= MAX_THREAD_NAMES {
            self.thread_names_evicted += self.thread_names.len() as u64;
            self.thread_names.clear();
            self.thread_vids.clear();
        }
        let pid = self.symbolizer.pid();
        let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
            .map(|s| s.trim_end().to_string())
            .unwrap_or_else(|_| format!("thread-{tid}"));
        self.thread_names.insert(tid, comm);
        let status = |path: String| std::fs::read_to_string(path).ok().and_then(|s| namespace_pid(&s));
        let namespaced = *self.namespaced.get_or_insert_with(|| status(format!("/proc/{pid}/status")).is_some());
        if namespaced {
            if let Some(vtid) = status(format!("/proc/{pid}/task/{tid}/status")) {
                self.thread_vids.insert(tid, vtid as u32);
            }
        }
    }

    /// The window's profile: every entry of `aggregate` with its stack named.
    pub fn finish(&mut self, mut aggregate: Aggregate) -> Profile {
        let unnamed = aggregate.take_unnamed();
        self.name(&unnamed);
        let mut p = Profile::new(self.symbolizer.pid());
        p.cpu_period_ns = self.cpu_period_ns;
        p.off_cpu_traced = self.off_cpu;
        // An allocation profile only for a process whose allocations are sampled: one that
        // published its sampling interval, or had an allocation sample. Another process's spans
        // would get alloc_bytes 0 for allocations nobody sampled.
        p.alloc_traced = self.alloc && (aggregate.allocations_on || aggregate.entries().iter().any(|e| e.key.kind.is_alloc()));
        p.times_complete = aggregate.times_complete();
        p.dropped_samples = aggregate.dropped_samples;
        // The stack of each aggregate stack id, as profile frames (one per distinct stack), and
        // how its JS frames were named.
        let mut stacks: HashMap<u32, (Vec<StackFrame>, JsNaming)> = HashMap::new();
        let mut frame_of: HashMap<usize, usize> = HashMap::new();
        for raw in aggregate.entries() {
            let stack = stacks
                .entry(raw.key.stack)
                .or_insert_with(|| {
                    let (kernel, user) = aggregate.stack(raw.key.stack);
                    let js = aggregate.js_keys(raw.key.stack);
                    let mut out = Vec::with_capacity(kernel.len() + user.len());
                    let mut naming = JsNaming::default();
                    let mut skipping = true;
                    for (space, frames) in [(Space::Kernel, kernel), (Space::User, user)] {
                        for (depth, &addr) in frames.iter().enumerate() {
                            // A JS frame read by the sampler may be several (the functions inlined at its pc).
                            let key = js.iter().find(|k| space == Space::User && k.depth as usize == depth);
                            let indexes: Vec<usize> = match key {
                                Some(key) => self.symbolizer.js_frame_indexes(key).to_vec(),
                                None => vec![self.symbolizer.frame_index(space, super::aggregate::lookup_addr(addr, depth))],
                            };
                            if space == Space::User {
                                self.count_js(&indexes, key, &mut naming);
                            }
                            for i in indexes {
                                // A tracepoint's kernel stack starts in the tracing program itself: not the thread's code.
                                if space == Space::Kernel && skipping && is_tracing_frame(&self.symbolizer.frame(i).name) {
                                    continue;
                                }
                                skipping = false;
                                let next = frame_of.len();
                                let frame = *frame_of.entry(i).or_insert(next);
                                out.push(StackFrame { addr, frame, kernel: space == Space::Kernel });
                            }
                        }
                    }
                    (out, naming)
                })
                .clone();
            let (stack, naming) = stack;
            let k = &raw.key;
            if k.kind.is_cpu() {
                p.js_naming.add(&naming, raw.count);
            }
            p.push_distinct(Entry {
                kind: k.kind,
                stack,
                tid: k.tid,
                trace_id: k.trace_id,
                span_id: k.span_id,
                attrs: k.attrs.to_vec(),
                count: raw.count,
                weight: raw.weight,
                times: raw.times.clone(),
            });
        }
        let mut frames: Vec<Option<Frame>> = vec![None; frame_of.len()];
        for (index, profile_index) in frame_of {
            frames[profile_index] = Some(self.symbolizer.frame(index).clone());
        }
        self.symbolizer.end_window();
        for f in frames.into_iter().flatten() {
            p.intern(f);
        }
        let tids: HashSet<u32> = p.entries.iter().map(|e| e.tid).collect();
        p.thread_names = tids.iter().filter_map(|t| self.thread_names.get(t).map(|n| (*t, n.clone()))).collect();
        p.thread_vids = tids.iter().filter_map(|t| self.thread_vids.get(t).map(|v| (*t, *v))).collect();
        self.finish_profile(&mut p, aggregate.losses);
        p
    }

    /// Counts into `naming` the JS frames one position of a user stack became (`indexes`, from
    /// the sampler's JS frame `key` when it read one there): named from the heap (a tier), from a
    /// perf map or jitdump, or in generated code named by nothing, with why.
    fn count_js(&self, indexes: &[usize], key: Option<&JsKey>, naming: &mut JsNaming) {
        // Named by the heap: every JS frame of the key (an inlined function's frame has no tier
        // of its own), else by its pc (a perf map or jitdump).
        let by_heap = key.is_some_and(|k| self.symbolizer.why_unnamed(k).is_none());
        for &i in indexes {
            let f = self.symbolizer.frame(i);
            match f.kind {
                FrameKind::Js if by_heap => naming.from_heap += 1,
                FrameKind::Js => naming.from_perf_map += 1,
                FrameKind::Unknown if f.name == UNNAMED_JIT => {
                    let why = match key {
                        Some(k) => self.symbolizer.why_unnamed(k).unwrap_or(why::NOT_READ),
                        None if self.symbolizer.names_js_from_heap() => why::NOT_READ,
                        None => why::NO_SOURCE,
                    };
                    *naming.unnamed.entry(why).or_default() += 1;
                }
                _ => {}
            }
        }
    }

    fn finish_profile(&self, p: &mut Profile, losses: super::decode::StackLosses) {
        let sym = &self.symbolizer;
        p.mappings = sym.mappings().iter().filter(|m| m.is_file_backed() && m.perms.contains('x')).cloned().collect();
        for m in &p.mappings {
            if let Some(id) = build_id(p.pid, m) {
                p.build_ids.insert((m.dev.clone(), m.inode), id);
            }
        }
        p.monotonic_to_unix_ns = monotonic_to_unix_ns();
        p.runs_v8 = sym.runs_v8();
        if p.runs_v8 {
            p.notes.extend(sym.perf_map_note());
            p.notes.extend(sym.jitdump_notes());
        }
        p.notes.extend(sym.baseline_note());
        p.notes.extend(sym.source_map_notes());
        if !p.entries.is_empty() {
            p.process_notes = sym.process_notes_once();
        }
        if p.dropped_samples > 0 {
            p.notes.push(format!(
                "{} samples were left out of the profile: it already held {} distinct stack x thread x span entries",
                p.dropped_samples,
                super::aggregate::MAX_ENTRIES
            ));
        }
        for (what, n) in [("user", losses.user), ("kernel", losses.kernel)] {
            if n > 0 {
                p.notes
                    .push(format!("{n} samples have no {what} stack (the kernel could not take it); they count under their thread with no frames"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(alloc: bool) -> SamplerOptions {
        SamplerOptions { hz: 99, user_stacks: true, kernel_stacks: false, off_cpu: false, alloc }
    }

    /// With `--alloc`, a window has an allocation profile only for a process whose allocations
    /// are sampled (it published its interval): another process's spans would read "0 bytes"
    /// for allocations nobody sampled, where the connector leaves alloc_bytes out.
    #[test]
    fn an_allocation_profile_only_for_a_process_whose_allocations_are_sampled() {
        let own = std::process::id() as i32;
        let mut b = ProfileBuilder::new(Symbolizer::new(own).unwrap(), &options(true));
        assert!(!b.finish(Aggregate::new()).alloc_traced, "sampling off, no allocation sample");
        let on = || {
            let mut a = Aggregate::new();
            a.allocations_on = true;
            a
        };
        assert!(b.finish(on()).alloc_traced, "sampling on: an empty allocation profile says 0 bytes");
        let mut without = ProfileBuilder::new(Symbolizer::new(own).unwrap(), &options(false));
        assert!(!without.finish(on()).alloc_traced, "the agent ran without --alloc");
    }
}
