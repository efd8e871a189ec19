//! Turns the sampler's events into profile samples while `record` runs:
//! resolves stack ids in the BPF stack maps, decodes the record's attributes,
//! names threads, and symbolizes in batches while the target (and the JIT
//! code its perf map describes) is still alive.

use super::aggregate::Profile;
use super::sample::{Sample, SampleKind};
use super::symbolizer::Symbolizer;
use crate::record::decode_attrs;
use crate::sampler::sample::{EventKind, Sample as Event};
use crate::sampler::Sampler;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const BATCH_SAMPLES: usize = 1024;
const BATCH_INTERVAL: Duration = Duration::from_millis(250);
/// Threads whose names are kept (a process churning threads would grow the table forever).
const MAX_THREAD_NAMES: usize = 10_000;
const EEXIST: i32 = 17;

/// How many events lost a stack, and why.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StackLosses {
    /// The stack hashed to a stack map bucket holding another stack (-EEXIST).
    pub collisions: u64,
    /// Any other bpf_get_stackid error, or an id no longer in the map.
    pub other: u64,
}

pub struct Collector {
    symbolizer: Symbolizer,
    profile: Profile,
    pending: Vec<Sample>,
    last_flush: Instant,
    key_map: Option<Vec<String>>,
    /// Resolved stacks by (program, id): ids are stable, nothing is evicted from the maps.
    stacks: HashMap<(EventKind, u32), Vec<u64>>,
    user_stacks: bool,
    kernel_stacks: bool,
    pub user_losses: StackLosses,
    pub kernel_losses: StackLosses,
}

impl Collector {
    pub fn new(
        symbolizer: Symbolizer,
        key_map: Option<&[String]>,
        hz: u32,
        user_stacks: bool,
        kernel_stacks: bool,
        off_cpu: bool,
    ) -> Collector {
        let mut profile = Profile::new(symbolizer.pid());
        profile.cpu_period_ns = 1_000_000_000 / hz.max(1) as u64;
        profile.off_cpu_traced = off_cpu;
        Collector {
            symbolizer,
            profile,
            pending: Vec::with_capacity(BATCH_SAMPLES),
            last_flush: Instant::now(),
            key_map: key_map.map(<[String]>::to_vec),
            stacks: HashMap::new(),
            user_stacks,
            kernel_stacks,
            user_losses: StackLosses::default(),
            kernel_losses: StackLosses::default(),
        }
    }

    pub fn symbolizer(&self) -> &Symbolizer {
        &self.symbolizer
    }

    pub fn add(&mut self, sampler: &Sampler, e: &Event) {
        let user_stack = if self.user_stacks { self.stack(sampler, e.kind, e.user_stack_id, false) } else { Vec::new() };
        let kernel_stack = if self.kernel_stacks { self.stack(sampler, e.kind, e.kernel_stack_id, true) } else { Vec::new() };
        let (trace_id, span_id, flags, attrs) = match e.span() {
            Some((t, s, f)) => {
                let (t, s) = Sample::ids_from_record(t, s);
                let (decoded, _) = decode_attrs(&e.attrs, self.key_map.as_deref());
                (t, s, f, Sample::attrs_from_record(&decoded))
            }
            None => (None, None, 0, Vec::new()),
        };
        let (kind, weight_ns) = match (e.kind, e.preempted) {
            (EventKind::Cpu, _) => (SampleKind::Cpu, self.profile.cpu_period_ns),
            (EventKind::OffCpu, false) => (SampleKind::Blocked, e.duration_ns),
            (EventKind::OffCpu, true) => (SampleKind::Preempted, e.duration_ns),
        };
        self.name_thread(e.tid);
        self.pending.push(Sample {
            kind,
            time_ns: e.time_ns,
            tid: e.tid,
            trace_id,
            span_id,
            flags,
            attrs,
            user_stack,
            kernel_stack,
            weight_ns,
        });
        if self.pending.len() >= BATCH_SAMPLES || self.last_flush.elapsed() >= BATCH_INTERVAL {
            self.flush();
        }
    }

    /// Symbolizes and aggregates what is pending.
    pub fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.profile.add(&self.pending, &mut self.symbolizer);
            self.pending.clear();
        }
        self.last_flush = Instant::now();
    }

    pub fn finish(mut self) -> Profile {
        self.flush();
        self.profile.finish(&self.symbolizer);
        for (what, l) in [("user", self.user_losses), ("kernel", self.kernel_losses)] {
            if l.collisions + l.other > 0 {
                self.profile.notes.push(format!(
                    "{} samples lost their {what} stack ({} to stack map hash collisions, {} to other errors); \
                     they count under their thread with no frames",
                    l.collisions + l.other,
                    l.collisions,
                    l.other
                ));
            }
        }
        self.profile
    }

    fn stack(&mut self, sampler: &Sampler, kind: EventKind, id: Result<u32, i32>, kernel: bool) -> Vec<u64> {
        let losses = if kernel { &mut self.kernel_losses } else { &mut self.user_losses };
        let id = match id {
            Ok(id) => id,
            Err(e) if -e == EEXIST => {
                losses.collisions += 1;
                return Vec::new();
            }
            // A kernel stack of a sample taken in user mode is empty (-EFAULT): not a loss.
            Err(e) if kernel && -e == libc::EFAULT => return Vec::new(),
            Err(_) => {
                losses.other += 1;
                return Vec::new();
            }
        };
        if let Some(s) = self.stacks.get(&(kind, id)) {
            return s.clone();
        }
        match sampler.stack(kind, id) {
            Ok(Some(s)) => {
                self.stacks.insert((kind, id), s.clone());
                s
            }
            _ => {
                losses.other += 1;
                Vec::new()
            }
        }
    }

    fn name_thread(&mut self, tid: u32) {
        let names = &mut self.profile.thread_names;
        if names.contains_key(&tid) || names.len() >= MAX_THREAD_NAMES {
            return;
        }
        let comm = std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", self.profile.pid))
            .map(|s| s.trim_end().to_string())
            .unwrap_or_else(|_| format!("thread-{tid}"));
        names.insert(tid, comm);
    }
}
