//! Builds one process's profile from the sampler's events as they arrive:
//! decodes the record's attributes with the process's key map, names
//! threads, and symbolizes in batches while the target (and the JIT code its
//! perf map describes) is still alive. A recording is one profile; the agent
//! takes one per window ([`ProfileBuilder::take`]) and keeps the symbolizer.

use super::aggregate::Profile;
use super::sample::{Sample, SampleKind};
use super::symbolizer::Symbolizer;
use crate::ctx_record::decode_attrs;
use crate::sampler::{Event, EventKind};
use std::time::{Duration, Instant};

const BATCH_SAMPLES: usize = 1024;
const BATCH_INTERVAL: Duration = Duration::from_millis(250);
/// Threads whose names are kept (a process churning threads would grow the table forever).
const MAX_THREAD_NAMES: usize = 10_000;

/// Samples whose stack the kernel could not take (bpf_get_stack failed).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StackLosses {
    pub user: u64,
    pub kernel: u64,
}

impl std::ops::AddAssign for StackLosses {
    fn add_assign(&mut self, other: StackLosses) {
        self.user += other.user;
        self.kernel += other.kernel;
    }
}

/// What a profile records about its sampling.
#[derive(Debug, Clone, Copy)]
pub struct ProfileSettings {
    pub hz: u32,
    pub user_stacks: bool,
    pub kernel_stacks: bool,
    pub off_cpu: bool,
}

impl ProfileSettings {
    /// Nanoseconds one CPU sample stands for.
    pub fn cpu_period_ns(&self) -> u64 {
        1_000_000_000 / self.hz.max(1) as u64
    }
}

pub struct ProfileBuilder {
    symbolizer: Symbolizer,
    profile: Profile,
    pending: Vec<Sample>,
    last_flush: Instant,
    key_map: Option<Vec<String>>,
    settings: ProfileSettings,
    /// Only this thread's samples are kept (`record TID`).
    only_tid: Option<u32>,
    pub losses: StackLosses,
}

impl ProfileBuilder {
    pub fn new(symbolizer: Symbolizer, key_map: Option<&[String]>, settings: ProfileSettings) -> ProfileBuilder {
        let profile = Self::empty(symbolizer.pid(), settings);
        ProfileBuilder {
            symbolizer,
            profile,
            pending: Vec::with_capacity(BATCH_SAMPLES),
            last_flush: Instant::now(),
            key_map: key_map.map(<[String]>::to_vec),
            settings,
            only_tid: None,
            losses: StackLosses::default(),
        }
    }

    /// Keeps only the samples of thread `tid` from now on.
    pub fn keep_only_thread(&mut self, tid: u32) {
        self.only_tid = Some(tid);
    }

    fn empty(pid: i32, settings: ProfileSettings) -> Profile {
        let mut profile = Profile::new(pid);
        profile.cpu_period_ns = settings.cpu_period_ns();
        profile.off_cpu_traced = settings.off_cpu;
        profile
    }

    pub fn symbolizer(&self) -> &Symbolizer {
        &self.symbolizer
    }

    /// A newer key map (the process registered attribute keys since).
    pub fn set_key_map(&mut self, key_map: Option<&[String]>) {
        self.key_map = key_map.map(<[String]>::to_vec);
    }

    /// Samples aggregated so far (pending ones included).
    pub fn len(&self) -> u64 {
        self.profile.total_count() + self.profile.dropped_samples + self.pending.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn add(&mut self, e: &Event) {
        if self.only_tid.is_some_and(|t| t != e.tid) {
            return;
        }
        let sample = sample_of(e, self.key_map.as_deref(), self.settings, &mut self.losses);
        self.add_sample(sample);
    }

    /// Adds a sample decoded elsewhere (the agent decodes on its sampling thread and symbolizes on another).
    pub fn add_sample(&mut self, sample: Sample) {
        self.name_thread(sample.tid);
        self.pending.push(sample);
        if self.pending.len() >= BATCH_SAMPLES || self.last_flush.elapsed() >= BATCH_INTERVAL {
            self.flush();
        }
    }

    /// Symbolizes what is pending once it has waited a batch interval: called
    /// without new events too, so a process that exits has had its samples named.
    pub fn flush_if_due(&mut self) {
        if !self.pending.is_empty() && self.last_flush.elapsed() >= BATCH_INTERVAL {
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

    /// The profile so far, finished, and a fresh one for what comes next
    /// (thread names and the symbolizer's caches carry over).
    pub fn take(&mut self) -> Profile {
        self.flush();
        let mut next = Self::empty(self.profile.pid, self.settings);
        next.thread_names = self.profile.thread_names.clone();
        let mut done = std::mem::replace(&mut self.profile, next);
        self.finish_profile(&mut done);
        self.losses = StackLosses::default();
        done
    }

    pub fn finish(mut self) -> Profile {
        self.take()
    }

    fn finish_profile(&self, p: &mut Profile) {
        p.finish(&self.symbolizer);
        for (what, n) in [("user", self.losses.user), ("kernel", self.losses.kernel)] {
            if n > 0 {
                p.notes
                    .push(format!("{n} samples have no {what} stack (the kernel could not take it); they count under their thread with no frames"));
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

/// One event as a [`Sample`]: the record's attributes decoded with the
/// process's key map, stacks as captured (those the kernel could not take
/// are counted in `losses`), weighed by the sampling period or the off-CPU time.
pub fn sample_of(e: &Event, key_map: Option<&[String]>, settings: ProfileSettings, losses: &mut StackLosses) -> Sample {
    let user_stack = if settings.user_stacks { stack(&e.user_stack, &mut losses.user, false) } else { Vec::new() };
    let kernel_stack = if settings.kernel_stacks { stack(&e.kernel_stack, &mut losses.kernel, true) } else { Vec::new() };
    let (trace_id, span_id, flags, attrs) = match e.span() {
        Some((t, s, f)) => {
            let (t, s) = Sample::ids_from_record(t, s);
            let (decoded, _) = decode_attrs(&e.attrs, key_map);
            (t, s, f, Sample::attrs_from_record(&decoded))
        }
        None => (None, None, 0, Vec::new()),
    };
    let (kind, weight_ns) = match (e.kind, e.preempted) {
        (EventKind::Cpu, _) => (SampleKind::Cpu, settings.cpu_period_ns()),
        (EventKind::OffCpu, false) => (SampleKind::Blocked, e.duration_ns),
        (EventKind::OffCpu, true) => (SampleKind::Preempted, e.duration_ns),
    };
    Sample { kind, time_ns: e.time_ns, tid: e.tid, trace_id, span_id, flags, attrs, user_stack, kernel_stack, weight_ns }
}

fn stack(stack: &Result<Vec<u64>, i32>, lost: &mut u64, kernel: bool) -> Vec<u64> {
    match stack {
        Ok(s) => s.clone(),
        // A kernel stack of a sample taken in user mode is empty (-EFAULT): not a loss.
        Err(e) if kernel && -e == libc::EFAULT => Vec::new(),
        Err(_) => {
            *lost += 1;
            Vec::new()
        }
    }
}
