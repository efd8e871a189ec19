//! The agent's profile thread: it symbolizes the samples the sampling loop
//! decoded and aggregates them into one profile per process, and at each
//! window's end hands the finished profiles back. Symbolizing reads the
//! target (its maps, V8's perf map, the objects it maps), so it runs here,
//! one process at a time under the thread's [`Heartbeat`], never on the
//! sampling thread. One [`NativeSymbols`] serves every process: an object
//! they all map is parsed once.

use super::registry::Registry;
use super::watchdog::Heartbeat;
use super::{Window, WindowProcess};
use crate::discovery::host_scan::ProcessKey;
use crate::profile::builder::StackLosses;
use crate::profile::{NativeSymbols, ProfileBuilder, ProfileSettings, Sample, Symbolizer};
use opentelemetry_proto::tonic::resource::v1::Resource;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Work for the profile thread, in the order the sampling loop queued it.
enum Job {
    /// Sampling of this process starts: read what symbolizing needs while it runs.
    Track {
        key: ProcessKey,
    },
    Samples {
        key: ProcessKey,
        samples: Vec<Sample>,
        losses: StackLosses,
    },
    EndWindow(WindowEnd),
}

/// The end of a window: every process tracked in it (exited ones for the last time).
pub struct WindowEnd {
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    pub processes: Vec<WindowMeta>,
}

#[derive(Clone)]
pub struct WindowMeta {
    pub key: ProcessKey,
    pub resource: Resource,
    pub service_name: String,
    pub exited: bool,
}

/// The queue between the sampling loop and the profile thread, bounded in
/// samples: when the profile thread falls behind (or is replaced after a
/// stuck read) new samples are dropped and counted, never waited for.
pub struct JobQueue {
    inner: Mutex<Queued>,
    ready: Condvar,
    max_samples: usize,
}

#[derive(Default)]
struct Queued {
    jobs: VecDeque<Job>,
    samples: usize,
    windows: usize,
    closed: bool,
}

/// Window ends kept waiting at most; past this the two oldest waiting ones
/// are merged (a longer window: no sample and no exited process is lost).
const MAX_QUEUED_WINDOWS: usize = 16;

impl JobQueue {
    pub fn new(max_samples: usize) -> JobQueue {
        JobQueue { inner: Mutex::new(Queued::default()), ready: Condvar::new(), max_samples }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push_back(&self, mut q: std::sync::MutexGuard<'_, Queued>, job: Job) {
        q.jobs.push_back(job);
        self.ready.notify_one();
    }

    pub fn push_track(&self, key: ProcessKey) {
        self.push_back(self.lock(), Job::Track { key });
    }

    /// Queues a batch; Err(samples) when it was dropped because the queue is full.
    pub fn push_samples(&self, key: ProcessKey, samples: Vec<Sample>, losses: StackLosses) -> Result<(), usize> {
        let mut q = self.lock();
        if q.samples + samples.len() > self.max_samples {
            return Err(samples.len());
        }
        q.samples += samples.len();
        self.push_back(q, Job::Samples { key, samples, losses });
        Ok(())
    }

    /// Queues a window's end; true when the queue was full of them and the
    /// oldest became part of the next (one window fewer comes back).
    pub fn push_end(&self, end: WindowEnd) -> bool {
        let mut q = self.lock();
        let mut merged = false;
        if q.windows >= MAX_QUEUED_WINDOWS {
            let oldest = q.jobs.iter().position(|j| matches!(j, Job::EndWindow(_)));
            let next = oldest.and_then(|i| q.jobs.iter().skip(i + 1).position(|j| matches!(j, Job::EndWindow(_))).map(|n| i + 1 + n));
            if let (Some(i), Some(n)) = (oldest, next) {
                let Some(Job::EndWindow(first)) = q.jobs.remove(i) else { unreachable!("position found an EndWindow") };
                if let Some(Job::EndWindow(second)) = q.jobs.get_mut(n - 1) {
                    second.absorb(first);
                }
                q.windows -= 1;
                merged = true;
            }
        }
        q.windows += 1;
        self.push_back(q, Job::EndWindow(end));
        merged
    }

    /// Window ends queued and not yet taken by the profile thread.
    pub fn windows_queued(&self) -> usize {
        self.lock().windows
    }

    /// The next job, waiting up to `wait`; None on timeout or once closed.
    fn pop(&self, wait: Duration) -> Option<Job> {
        let mut q = self.lock();
        if q.jobs.is_empty() && !q.closed {
            q = self.ready.wait_timeout(q, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
        if q.closed {
            return None;
        }
        let job = q.jobs.pop_front()?;
        match &job {
            Job::Samples { samples, .. } => q.samples -= samples.len(),
            Job::EndWindow(_) => q.windows -= 1,
            Job::Track { .. } => {}
        }
        Some(job)
    }

    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

impl WindowEnd {
    /// Makes this window start where the earlier `first` started, taking its processes along.
    fn absorb(&mut self, first: WindowEnd) {
        let end = self.start_unix_ns + self.duration_ns;
        self.start_unix_ns = first.start_unix_ns;
        self.duration_ns = end.saturating_sub(first.start_unix_ns);
        for meta in first.processes {
            if !self.processes.iter().any(|m| m.key == meta.key) {
                self.processes.push(meta);
            }
        }
    }
}

/// Runs one profile worker until it is retired or the queue closes.
pub fn run(
    settings: ProfileSettings,
    queue: Arc<JobQueue>,
    registry: Arc<Registry>,
    beat: Heartbeat,
    to_loop: Sender<Window>,
    entry_cap_drops: Arc<AtomicU64>,
) {
    beat.bind_current_thread();
    let mut w = Worker { settings, natives: Rc::new(RefCell::new(NativeSymbols::new())), builders: HashMap::new(), registry, beat };
    loop {
        if w.beat.retired() || w.registry.stopping() {
            return;
        }
        let Some(job) = queue.pop(Duration::from_millis(100)) else { continue };
        match job {
            Job::Track { key } => {
                w.builder(key);
            }
            Job::Samples { key, samples, losses } => w.add(key, samples, losses),
            Job::EndWindow(end) => {
                let window = w.end_window(end, &entry_cap_drops);
                if w.beat.retired() || to_loop.send(window).is_err() {
                    return;
                }
            }
        }
    }
}

struct Worker {
    settings: ProfileSettings,
    natives: Rc<RefCell<NativeSymbols>>,
    builders: HashMap<u32, (ProcessKey, ProfileBuilder)>,
    registry: Arc<Registry>,
    beat: Heartbeat,
}

impl Worker {
    /// The builder of `key`, made on first use (None: the process is stuck, or gone before we looked).
    fn builder(&mut self, key: ProcessKey) -> Option<&mut ProfileBuilder> {
        if self.registry.is_stuck(key) {
            return None;
        }
        if self.builders.get(&key.pid).is_none_or(|(k, _)| *k != key) {
            let symbolizer = {
                let _busy = self.beat.busy(key, "reading its maps and V8 perf map");
                Symbolizer::sharing(key.pid as i32, self.natives.clone()).ok()?
            };
            self.builders.insert(key.pid, (key, ProfileBuilder::new(symbolizer, None, self.settings)));
        }
        self.builders.get_mut(&key.pid).map(|(_, b)| b)
    }

    fn add(&mut self, key: ProcessKey, samples: Vec<Sample>, losses: StackLosses) {
        let _busy = self.beat.busy(key, "symbolizing its samples");
        let Some(b) = self.builder(key) else { return };
        b.losses += losses;
        for s in samples {
            b.add_sample(s);
        }
        b.flush();
    }

    fn end_window(&mut self, end: WindowEnd, entry_cap_drops: &AtomicU64) -> Window {
        let mut processes = Vec::new();
        for meta in &end.processes {
            let beat = &self.beat;
            let Some(b) = self.builders.get_mut(&meta.key.pid).filter(|(k, _)| *k == meta.key).map(|(_, b)| b) else { continue };
            if self.registry.is_stuck(meta.key) {
                continue;
            }
            let profile = {
                let _busy = beat.busy(meta.key, "finishing its profile");
                b.take()
            };
            entry_cap_drops.fetch_add(profile.dropped_samples, Ordering::Relaxed);
            if profile.total_count() > 0 {
                let m = meta.clone();
                processes.push(WindowProcess { pid: m.key.pid, service_name: m.service_name, resource: m.resource, profile, exited: m.exited });
            }
        }
        // Processes no longer tracked (exited, stuck) give their objects back.
        let live: HashMap<u32, ProcessKey> = end.processes.iter().filter(|m| !m.exited).map(|m| (m.key.pid, m.key)).collect();
        self.builders.retain(|pid, (k, _)| live.get(pid) == Some(k));
        Window { start_unix_ns: end.start_unix_ns, duration_ns: end.duration_ns, processes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ProcessKey {
        ProcessKey::of(std::process::id()).unwrap()
    }

    fn samples(n: usize) -> Vec<Sample> {
        let s = Sample {
            kind: crate::profile::SampleKind::Cpu,
            time_ns: 0,
            tid: 1,
            trace_id: None,
            span_id: None,
            flags: 0,
            attrs: vec![],
            user_stack: vec![],
            kernel_stack: vec![],
            weight_ns: 1,
        };
        vec![s; n]
    }

    fn end(start_s: u64, exited: bool) -> WindowEnd {
        let meta =
            WindowMeta { key: ProcessKey { pid: start_s as u32, ..key() }, resource: Resource::default(), service_name: String::new(), exited };
        WindowEnd { start_unix_ns: start_s * 1_000_000_000, duration_ns: 1_000_000_000, processes: vec![meta] }
    }

    #[test]
    fn the_queue_drops_samples_past_its_bound_and_keeps_order() {
        let q = JobQueue::new(10);
        assert!(q.push_samples(key(), samples(6), StackLosses::default()).is_ok());
        assert_eq!(q.push_samples(key(), samples(6), StackLosses::default()), Err(6), "over the bound: dropped, counted");
        assert!(!q.push_end(end(0, false)));
        assert!(matches!(q.pop(Duration::ZERO), Some(Job::Samples { .. })));
        assert!(q.push_samples(key(), samples(6), StackLosses::default()).is_ok(), "room again once taken");
        assert!(matches!(q.pop(Duration::ZERO), Some(Job::EndWindow(_))), "in order");
        q.close();
        assert!(q.pop(Duration::ZERO).is_none(), "closed");
    }

    #[test]
    fn window_ends_beyond_the_bound_merge_the_oldest_into_the_next() {
        let q = JobQueue::new(10);
        let merged: Vec<bool> = (0..MAX_QUEUED_WINDOWS as u64 + 2).map(|i| q.push_end(end(i, i == 0))).collect();
        assert_eq!(merged.iter().filter(|m| **m).count(), 2, "{merged:?}");
        assert_eq!(q.windows_queued(), MAX_QUEUED_WINDOWS);
        let Some(Job::EndWindow(first)) = q.pop(Duration::ZERO) else { panic!("a window end") };
        // Windows 0, 1 and 2 became one, starting at 0, ending at 3 s, with all their processes.
        assert_eq!((first.start_unix_ns, first.duration_ns), (0, 3_000_000_000));
        let mut pids: Vec<u32> = first.processes.iter().map(|m| m.key.pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![0, 1, 2]);
        assert!(first.processes.iter().any(|m| m.exited), "the exited process's last profile is kept");
    }
}
