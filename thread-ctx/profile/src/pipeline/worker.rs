//! The symbolization worker: the symbolize stage ([`ProfileBuilder`]) of every
//! tracked process, on a thread of its own, so that a target whose maps, perf
//! map or objects block a read cannot stall sampling. The sampling thread
//! queues work ([`JobQueue`], bounded: when the worker falls behind, new work
//! is dropped and counted, never waited for); the worker reads targets one
//! process at a time under its [`Heartbeat`] and sends each finished window
//! back. One [`NativeSymbols`] serves every process: an object they all map
//! is parsed once. Its per-process state is a cache of the pipeline's table:
//! made on `Track`, dropped with a process's last window.

use super::watchdog::Heartbeat;
use crate::aggregate::{Aggregate, Unnamed};
use crate::symbolizer::NameCache;
use crate::window::{Window, WindowProcess};
use crate::{NativeSymbols, ProfileBuilder, Symbolizer};
use foldhash::{HashMap, HashMapExt};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use thread_ctx_discovery::host_scan::ProcessKey;
use thread_ctx_discovery::process_context_proto::Resource;
use thread_ctx_sampler::SamplerOptions;
use thread_ctx_sampler::{V8FramesError, V8Process};

/// Work for the worker, in the order the sampling thread queued it.
pub(crate) enum Job {
    /// Sampling of this process starts: read what naming needs while it runs.
    Track {
        key: ProcessKey,
        /// Its V8, for naming JS frames from its heap (or why not).
        v8: Result<V8Process, V8FramesError>,
    },
    /// Addresses and threads first seen: name them now, while the code is there.
    Name {
        key: ProcessKey,
        unnamed: Unnamed,
    },
    EndWindow(WindowEnd),
}

/// The end of a window: every process tracked in it (exited ones for the last time).
pub(crate) struct WindowEnd {
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    pub processes: Vec<Finished>,
}

/// One process's window, to be symbolized.
pub(crate) struct Finished {
    pub key: ProcessKey,
    pub resource: Resource,
    pub service_name: String,
    pub aggregate: Aggregate,
    pub exited: bool,
}

/// Counters the worker keeps for the status line.
#[derive(Default)]
pub struct WorkerCounters {
    pub native_names_evicted: AtomicU64,
    pub js_names_evicted: AtomicU64,
    pub thread_names_evicted: AtomicU64,
    pub maps_reads: AtomicU64,
    /// What the worker's caches hold after its last window (gauges).
    pub native_names: AtomicU64,
    pub native_name_bytes: AtomicU64,
    pub objects_open: AtomicU64,
    pub js_functions: AtomicU64,
    pub thread_names: AtomicU64,
    pub v8_entries: AtomicU64,
    pub v8_bytes: AtomicU64,
    /// Reads of those heaps (system calls) and their bytes.
    pub js_heap_reads: AtomicU64,
    pub js_heap_read_bytes: AtomicU64,
    /// Names kept across windows (gauges) and what keeping them saved (running totals).
    pub kept_frames: AtomicU64,
    pub kept_names: AtomicU64,
    pub names: Mutex<NameCache>,
}

/// How long an idle worker sleeps before it looks at its heartbeat again. Closing the queue
/// wakes it at once, and a retired worker is one stuck in a read, not one waiting here: a
/// longer wait only saves wake-ups.
const IDLE_WAIT: Duration = Duration::from_secs(5);

/// Windows between two returns of freed heap to the system (`malloc_trim`).
const TRIM_EVERY_WINDOWS: u64 = 6;

/// Window ends kept waiting at most; past this the two oldest waiting ones
/// are merged (a longer window: no sample and no exited process is lost).
const MAX_QUEUED_WINDOWS: usize = 16;

/// The queue between the sampling thread and the worker, bounded in queued addresses.
pub(crate) struct JobQueue {
    inner: Mutex<Queued>,
    ready: Condvar,
    max_items: usize,
}

#[derive(Default)]
struct Queued {
    jobs: VecDeque<Job>,
    items: usize,
    windows: usize,
    closed: bool,
}

impl JobQueue {
    pub fn new(max_items: usize) -> JobQueue {
        JobQueue { inner: Mutex::new(Queued::default()), ready: Condvar::new(), max_items }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn push(&self, job: Job) {
        let mut q = self.lock();
        q.jobs.push_back(job);
        self.ready.notify_one();
    }

    /// Queues names to find; Err(count) when dropped because the queue is full.
    pub fn push_names(&self, key: ProcessKey, unnamed: Unnamed) -> Result<(), usize> {
        let mut q = self.lock();
        let n = unnamed.len();
        if q.items + n > self.max_items {
            return Err(n);
        }
        q.items += n;
        q.jobs.push_back(Job::Name { key, unnamed });
        self.ready.notify_one();
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
        q.jobs.push_back(Job::EndWindow(end));
        self.ready.notify_one();
        merged
    }

    /// Drops the queued work of a process no longer read (a stuck one): a new worker must not touch it.
    pub fn purge(&self, key: ProcessKey) {
        let mut q = self.lock();
        let mut freed = 0;
        q.jobs.retain(|j| match j {
            Job::Track { key: k, .. } => *k != key,
            Job::Name { key: k, unnamed } => {
                if *k == key {
                    freed += unnamed.len();
                }
                *k != key
            }
            Job::EndWindow(_) => true,
        });
        q.items -= freed;
        for j in q.jobs.iter_mut() {
            if let Job::EndWindow(end) = j {
                end.processes.retain(|f| f.key != key);
            }
        }
    }

    /// Window ends queued and not yet taken by the worker.
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
            Job::Name { unnamed, .. } => q.items -= unnamed.len(),
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
        // The same process may come twice: two profiles in one window, none of its samples lost.
        let later = std::mem::replace(&mut self.processes, first.processes);
        self.processes.extend(later);
    }
}

/// Everything one worker thread needs.
pub(crate) struct WorkerContext {
    pub opts: SamplerOptions,
    pub queue: Arc<JobQueue>,
    pub beat: Heartbeat,
    pub to_loop: Sender<Window>,
    pub counters: Arc<WorkerCounters>,
}

/// Runs one worker until it is retired or the queue closes.
pub(crate) fn run(cx: WorkerContext) {
    cx.beat.bind_current_thread();
    let mut w = Worker { natives: Rc::new(RefCell::new(NativeSymbols::new())), builders: HashMap::new(), cx, windows: 0, gone: NameCache::default() };
    loop {
        if w.cx.beat.retired() {
            return;
        }
        let Some(job) = w.cx.queue.pop(IDLE_WAIT) else {
            if w.cx.beat.retired() {
                return;
            }
            continue;
        };
        match job {
            Job::Track { key, v8 } => {
                if let Some(b) = w.builder(key) {
                    b.symbolizer_mut().set_v8(v8);
                }
            }
            Job::Name { key, unnamed } => {
                let _busy = w.cx.beat.busy(key, "naming its addresses");
                if let Some(b) = w.builder(key) {
                    b.name(&unnamed);
                }
            }
            Job::EndWindow(end) => {
                let window = w.end_window(end);
                w.publish_counters();
                w.natives.borrow().drop_resident_pages();
                // The windows' aggregates were freed: give their pages back now and then rather
                // than keep the peak resident (glibc keeps freed heap otherwise). Not every
                // window: names are kept across windows now, and a trim walks every arena.
                w.windows += 1;
                if w.windows.is_multiple_of(TRIM_EVERY_WINDOWS) {
                    // SAFETY: malloc_trim only releases free memory of the allocator's own heaps.
                    unsafe { libc::malloc_trim(0) };
                }
                if w.cx.beat.retired() || w.cx.to_loop.send(window).is_err() {
                    return;
                }
            }
        }
    }
}

struct Worker {
    natives: Rc<RefCell<NativeSymbols>>,
    builders: HashMap<u32, (ProcessKey, ProfileBuilder)>,
    cx: WorkerContext,
    windows: u64,
    /// What the name caches of processes no longer tracked saved.
    gone: NameCache,
}

impl Worker {
    /// The builder of `key`, made on first use (None: the process is gone before we looked).
    fn builder(&mut self, key: ProcessKey) -> Option<&mut ProfileBuilder> {
        if self.builders.get(&key.pid).is_none_or(|(k, _)| *k != key) {
            let symbolizer = {
                let _busy = self.cx.beat.busy(key, "reading its maps and V8 perf map");
                Symbolizer::sharing(key.pid as i32, self.natives.clone()).ok()?
            };
            self.builders.insert(key.pid, (key, ProfileBuilder::new(symbolizer, &self.cx.opts)));
        }
        self.builders.get_mut(&key.pid).map(|(_, b)| b)
    }

    /// Drops a process's builder, keeping its counts.
    fn remove(&mut self, pid: u32) {
        if let Some((_, b)) = self.builders.remove(&pid) {
            self.gone += b.symbolizer().cache;
        }
    }

    fn end_window(&mut self, end: WindowEnd) -> Window {
        let mut processes = Vec::new();
        for f in end.processes {
            if f.aggregate.is_empty() {
                if f.exited {
                    self.remove(f.key.pid);
                }
                continue;
            }
            let beat = self.cx.beat.clone();
            let Some(b) = self.builder(f.key) else { continue };
            let started = std::time::Instant::now();
            let profile = {
                let _busy = beat.busy(f.key, "finishing its profile");
                b.finish(f.aggregate)
            };
            let finish_ns = started.elapsed().as_nanos() as u64;
            if f.exited {
                self.remove(f.key.pid);
            }
            processes.push(WindowProcess {
                pid: f.key.pid,
                service_name: f.service_name,
                resource: f.resource,
                profile,
                exited: f.exited,
                cpu_throttling: None,
                finish_ns,
            });
        }
        Window { start_unix_ns: end.start_unix_ns, duration_ns: end.duration_ns, processes }
    }

    fn publish_counters(&self) {
        let c = &self.cx.counters;
        let natives = self.natives.borrow();
        c.native_names_evicted.store(natives.names_evicted, Ordering::Relaxed);
        let (names, name_bytes) = natives.functions_cached();
        c.native_names.store(names as u64, Ordering::Relaxed);
        c.native_name_bytes.store(name_bytes as u64, Ordering::Relaxed);
        c.objects_open.store(natives.objects_open() as u64, Ordering::Relaxed);
        let (mut js, mut threads, mut maps, mut js_held, mut threads_held) = (0, 0, 0, 0, 0);
        let (mut v8_entries, mut v8_bytes) = (0, 0);
        let mut reads = crate::js_names::HeapReads::default();
        let (mut names, mut kept_frames, mut kept_names) = (self.gone, 0, 0);
        for (_, b) in self.builders.values() {
            names += b.symbolizer().cache;
            let (frames, keys) = b.symbolizer().names_cached();
            (kept_frames, kept_names) = (kept_frames + frames as u64, kept_names + keys as u64);
            js += b.symbolizer().js_names_evicted();
            threads += b.thread_names_evicted;
            maps += b.symbolizer().maps_reads;
            js_held += b.symbolizer().js_functions_cached() as u64;
            threads_held += b.thread_names_cached() as u64;
            if let Some(j) = b.symbolizer().js_names() {
                let size = j.cached();
                (v8_entries, v8_bytes) = (v8_entries + size.entries as u64, v8_bytes + size.bytes as u64);
                reads += j.reads();
            }
        }
        c.kept_frames.store(kept_frames, Ordering::Relaxed);
        c.kept_names.store(kept_names, Ordering::Relaxed);
        *c.names.lock().unwrap_or_else(|e| e.into_inner()) = names;
        c.js_heap_reads.store(reads.calls, Ordering::Relaxed);
        c.js_heap_read_bytes.store(reads.bytes, Ordering::Relaxed);
        c.v8_entries.store(v8_entries, Ordering::Relaxed);
        c.v8_bytes.store(v8_bytes, Ordering::Relaxed);
        c.js_functions.store(js_held, Ordering::Relaxed);
        c.thread_names.store(threads_held, Ordering::Relaxed);
        c.js_names_evicted.fetch_max(js, Ordering::Relaxed);
        c.thread_names_evicted.fetch_max(threads, Ordering::Relaxed);
        c.maps_reads.store(maps, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pid: u32) -> ProcessKey {
        ProcessKey { pid, ..ProcessKey::of(std::process::id()).unwrap() }
    }

    fn unnamed(n: usize) -> Unnamed {
        Unnamed { user: (0..n as u64).collect(), ..Default::default() }
    }

    fn end(start_s: u64, pid: u32, exited: bool) -> WindowEnd {
        let f = Finished { key: key(pid), resource: Resource::default(), service_name: String::new(), aggregate: Aggregate::new(), exited };
        WindowEnd { start_unix_ns: start_s * 1_000_000_000, duration_ns: 1_000_000_000, processes: vec![f] }
    }

    #[test]
    fn the_queue_drops_names_past_its_bound_keeps_order_and_purges_a_stuck_process() {
        let q = JobQueue::new(10);
        assert!(q.push_names(key(1), unnamed(6)).is_ok());
        assert_eq!(q.push_names(key(1), unnamed(6)), Err(6), "over the bound: dropped, counted");
        assert!(!q.push_end(end(0, 1, false)));
        assert!(matches!(q.pop(Duration::ZERO), Some(Job::Name { .. })));
        assert!(q.push_names(key(2), unnamed(6)).is_ok(), "room again once taken");
        q.purge(key(2));
        let Some(Job::EndWindow(e)) = q.pop(Duration::ZERO) else { panic!("the window end, in order") };
        assert_eq!(e.processes.len(), 1);
        assert!(q.pop(Duration::ZERO).is_none(), "the purged process's work is gone");
        assert!(q.push_names(key(3), unnamed(10)).is_ok(), "and its room is free");
        q.close();
        assert!(q.pop(Duration::ZERO).is_none(), "closed");
    }

    #[test]
    fn window_ends_beyond_the_bound_merge_the_oldest_into_the_next() {
        let q = JobQueue::new(10);
        let merged: Vec<bool> = (0..MAX_QUEUED_WINDOWS as u64 + 2).map(|i| q.push_end(end(i, i as u32, i == 0))).collect();
        assert_eq!(merged.iter().filter(|m| **m).count(), 2, "{merged:?}");
        assert_eq!(q.windows_queued(), MAX_QUEUED_WINDOWS);
        let Some(Job::EndWindow(first)) = q.pop(Duration::ZERO) else { panic!("a window end") };
        assert_eq!((first.start_unix_ns, first.duration_ns), (0, 3_000_000_000));
        let mut pids: Vec<u32> = first.processes.iter().map(|m| m.key.pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![0, 1, 2]);
        assert!(first.processes.iter().any(|m| m.exited), "the exited process's last profile is kept");
    }
}
