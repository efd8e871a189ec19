//! The pipeline every sampling command runs, one way from a perf event to a
//! finished window:
//!
//! sampler (BPF event) -> decode ([`Decoder`]) -> aggregate ([`Aggregate`])
//! -> symbolize ([`ProfileBuilder`]) -> a [`Window`] for a sink.
//!
//! The [`Pipeline`] owns the sampler and the one table of tracked processes
//! (each with its identity, decoder and current aggregate). Decode and
//! aggregate run on the caller's thread and never read a target. The
//! symbolize stage reads targets; it runs inline ([`Symbolize::Inline`]:
//! `record`) or on a worker thread ([`Symbolize::OnWorker`]: the agent), whose
//! heartbeat the pipeline watches so that a target that blocks a read is
//! skipped, never waited for ([`watchdog`]).

pub mod watchdog;
mod worker;

use crate::aggregate::Aggregate;
use crate::window::{Window, WindowProcess};
use crate::{Decoder, Frame, ProfileBuilder, Sample, Symbolizer};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thread_ctx_discovery::error::ErrorKind;
use thread_ctx_discovery::host_scan::ProcessKey;
use thread_ctx_discovery::process_context_proto::Resource;
use thread_ctx_discovery::Discovery;
use thread_ctx_sampler::alloc_probe::{published_interval, Added, ProbeAttachments, ProbeLink, ProbeSite, ProbeSiteError};
use thread_ctx_sampler::{Event, EventKind, Sampler, SamplerError, SamplerOptions, V8FramesError, V8Process};
use watchdog::{Heartbeat, Stuck, Supervised};
use worker::{Finished, Job, JobQueue, WindowEnd, WorkerContext, WorkerCounters};

/// A process's new addresses go to the symbolize stage this often, or at this many.
const NAME_INTERVAL: Duration = Duration::from_millis(250);
const NAME_BATCH: usize = 1024;

/// Where the symbolize stage runs.
#[derive(Debug, Clone, Copy)]
pub enum Symbolize {
    /// On the caller's thread, when it polls and ends windows (`record`).
    Inline,
    /// On a worker thread; a process whose read blocks longer than `process_timeout` is skipped for good.
    OnWorker { process_timeout: Duration },
    /// Not at all: no stacks are captured, nothing to name.
    Never,
}

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Sampler(#[from] SamplerError),
    #[error("process {pid}: {reason}")]
    Untrackable { pid: u32, reason: String },
    #[error("symbolizing process {pid}: {source}")]
    Symbolizer { pid: u32, source: thread_ctx_discovery::error::Error },
    #[error("starting the symbolization thread: {0}")]
    Thread(std::io::Error),
}

impl PipelineError {
    /// What the error means for the caller: the sampler's or the target's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            PipelineError::Sampler(e) => e.kind(),
            PipelineError::Symbolizer { source, .. } => source.kind(),
            PipelineError::Untrackable { .. } | PipelineError::Thread(_) => ErrorKind::Other,
        }
    }
}

/// What a pipeline shows its caller of each sample: the tracked process, the event as the
/// sampler sent it, and the sample the decode stage made of it.
pub type OnSample<'a> = &'a mut dyn FnMut(&mut TrackedProcess, &Event, &Sample);

/// What a profile says about where it comes from (the OTLP resource, the service name).
#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub resource: Resource,
    pub service_name: String,
}

/// Events of one process since tracking started.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessCounts {
    pub cpu_samples: u64,
    /// CPU samples whose thread had published a span.
    pub with_span: u64,
    pub off_cpu_intervals: u64,
    /// Allocation samples (V8's sampling heap profiler, through the allocation uprobe).
    pub alloc_samples: u64,
    /// Allocation samples whose thread had published a span.
    pub alloc_with_span: u64,
}

/// One tracked process: the pipeline's table holds everything about it.
pub struct TrackedProcess {
    pub key: ProcessKey,
    pub identity: Identity,
    pub counts: ProcessCounts,
    decoder: Decoder,
    aggregate: Aggregate,
    /// Inline symbolize stage (`record`); the worker keeps its own otherwise.
    builder: Option<ProfileBuilder>,
    only_tid: Option<u32>,
    last_named: Instant,
    /// It published its allocation sampling interval (its allocations are sampled).
    allocations_on: bool,
}

impl TrackedProcess {
    pub fn key_map(&self) -> Option<&[String]> {
        self.decoder.key_map()
    }

    /// The inline symbolizer (`record`), to warn early about unnamed JS frames.
    pub fn symbolizer(&self) -> Option<&Symbolizer> {
        self.builder.as_ref().map(ProfileBuilder::symbolizer)
    }

    /// The sample's frames named now (kernel frames, then user frames; leaf first) by the inline
    /// symbolize stage, which names them once for the window too; None without one (the agent
    /// names on its worker, a recording without stacks names nothing).
    pub fn name_now(&mut self, s: &Sample) -> Option<Vec<Frame>> {
        let symbolizer = self.builder.as_mut()?.symbolizer_mut();
        let mut frames = symbolizer.kernel_frames(s.kernel_stack);
        frames.extend(symbolizer.sample_frames(s.user_stack, s.js_frames, s.leaf_words));
        Some(frames)
    }
}

/// Cache evictions and other counters of the pipeline, for the agent's status line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipelineCounters {
    /// Decoded attribute sets dropped from the decoders' caches.
    pub attrs_evicted: u64,
    /// Native symbol names dropped from the shared cache.
    pub native_names_evicted: u64,
    /// JS functions dropped from perf maps to keep them bounded.
    pub js_names_evicted: u64,
    pub thread_names_evicted: u64,
    /// Addresses not named because the symbolization worker was behind.
    pub dropped_behind: u64,
    /// Samples left out of a window for the distinct-entry cap.
    pub dropped_entry_cap: u64,
    /// Reads of those heaps (each a system call), over the tracked processes.
    pub js_heap_reads: crate::js_names::HeapReads,
    /// What the names kept across windows saved (running totals over every process).
    pub names: crate::symbolizer::NameCache,
    /// What the bounded caches hold now.
    pub cached: CacheSizes,
}

/// Entries held now by each bounded cache (gauges, unlike the evictions beside them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheSizes {
    /// Native symbol names by (object, file offset), and the bytes of their text.
    pub native_names: u64,
    pub native_name_bytes: u64,
    /// Objects (ELF files) held open for symbols.
    pub objects_open: u64,
    /// JS functions from perf maps and jitdumps, over every tracked process.
    pub js_functions: u64,
    /// Decoded attribute sets, over every tracked process.
    pub attr_sets: u64,
    pub thread_names: u64,
    /// What the V8 heap namers hold (functions, scripts, code objects, bytecode tables), over
    /// every tracked process: entries and bytes.
    pub v8_entries: u64,
    pub v8_bytes: u64,
    /// Names kept across windows, over every tracked process: frames, and the addresses and
    /// JS frames that lead to them.
    pub kept_frames: u64,
    pub kept_names: u64,
}

struct WorkerStage {
    queue: Arc<JobQueue>,
    supervised: Supervised,
    process_timeout: Duration,
    windows_tx: Sender<Window>,
    windows_rx: Receiver<Window>,
    counters: Arc<WorkerCounters>,
    /// Windows queued and not back yet.
    outstanding: usize,
}

pub struct Pipeline {
    /// Allocation uprobes, one per `node` object (declared before the sampler: detached before it unloads).
    alloc_probes: ProbeAttachments<ProbeLink>,
    /// Lines to show about allocation probes (an object without the symbol, once), not yet taken.
    alloc_reports: Vec<String>,
    sampler: Sampler,
    opts: SamplerOptions,
    symbolize: Symbolize,
    processes: BTreeMap<u32, TrackedProcess>,
    /// Processes untracked during this window, their last aggregate still to finish.
    exited: Vec<TrackedProcess>,
    worker: Option<WorkerStage>,
    /// Windows finished inline, not yet taken.
    finished: Vec<Window>,
    events: Vec<Event>,
    counters: PipelineCounters,
    /// Events of processes no longer tracked (arrived after `untrack`).
    pub late_events: u64,
    /// Ring-buffer records that did not decode (an ABI mismatch: should stay 0).
    pub undecodable: u64,
}

impl Pipeline {
    /// Loads and attaches the sampler (and starts the symbolization worker); nothing is
    /// sampled until [`Pipeline::track`].
    pub fn start(opts: SamplerOptions, symbolize: Symbolize) -> Result<Pipeline, PipelineError> {
        let sampler = Sampler::start(opts)?;
        let symbolize = if opts.user_stacks || opts.kernel_stacks { symbolize } else { Symbolize::Never };
        let mut p = Pipeline {
            alloc_probes: ProbeAttachments::new(),
            alloc_reports: Vec::new(),
            sampler,
            opts,
            symbolize,
            processes: BTreeMap::new(),
            exited: Vec::new(),
            worker: None,
            finished: Vec::new(),
            events: Vec::new(),
            counters: PipelineCounters::default(),
            late_events: 0,
            undecodable: 0,
        };
        if let Symbolize::OnWorker { process_timeout } = symbolize {
            // Addresses waiting for the worker: ten seconds of every CPU sampling a new 32-frame stack.
            let max_items = (10 * opts.hz as usize * p.sampler.cpus() * 32).max(100_000);
            let (windows_tx, windows_rx) = mpsc::channel();
            let queue = Arc::new(JobQueue::new(max_items));
            let counters = Arc::new(WorkerCounters::default());
            let beat = spawn_worker(opts, &queue, &windows_tx, &counters).map_err(PipelineError::Thread)?;
            p.worker =
                Some(WorkerStage { queue, supervised: Supervised::new(beat), process_timeout, windows_tx, windows_rx, counters, outstanding: 0 });
        }
        Ok(p)
    }

    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// Lines about allocation probes since the last call: a `node` without V8's
    /// `SampleObject` (stripped, say), said once per object; its CPU profile goes on.
    pub fn take_alloc_reports(&mut self) -> Vec<String> {
        std::mem::take(&mut self.alloc_reports)
    }

    /// Allocation uprobes attached now (one per `node` object with tracked processes).
    pub fn alloc_probes_attached(&self) -> usize {
        self.alloc_probes.attached()
    }

    /// The tracked process `pid`'s allocations are probed.
    pub fn alloc_probed(&self, pid: u32) -> bool {
        self.alloc_probes.covers(pid)
    }

    pub fn sampler_mut(&mut self) -> &mut Sampler {
        &mut self.sampler
    }

    pub fn options(&self) -> SamplerOptions {
        self.opts
    }

    /// Starts sampling a discovered process: its threads' records are read through its
    /// sampled writer's access (stacks only when it has none, or none resolved); for a node
    /// process whose V8 layout is known (`v8`, found by [`thread_ctx_sampler::V8Sites`]), its
    /// JS frames are read with its stacks and named from its heap.
    pub fn track(
        &mut self,
        key: ProcessKey,
        discovery: &Discovery,
        identity: Identity,
        v8: Result<V8Process, V8FramesError>,
    ) -> Result<(), PipelineError> {
        let pid = key.pid;
        // How its threads reach their record: the TLS slot and, for a `nodejs_v1_dev` writer, the frame walk.
        let reach = discovery.sampled_writer().ok().and_then(|w| w.record_reach());
        let builder = match self.symbolize {
            Symbolize::Inline => {
                let mut symbolizer = Symbolizer::new(pid as i32).map_err(|source| PipelineError::Symbolizer { pid, source })?;
                symbolizer.set_v8(v8.clone());
                Some(ProfileBuilder::new(symbolizer, &self.opts))
            }
            _ => None,
        };
        let walk = v8.as_ref().ok().filter(|_| !matches!(self.symbolize, Symbolize::Never)).map(V8Process::walk);
        self.sampler.track_process(pid, reach, walk.as_ref())?;
        if let Some(w) = &self.worker {
            w.queue.push(Job::Track { key, v8 });
        }
        let mut decoder = Decoder::new(discovery.key_map(), &self.opts);
        let interval = discovery.context().and_then(published_interval);
        if self.opts.alloc {
            decoder.set_alloc_interval(interval);
        }
        let process = TrackedProcess {
            key,
            identity,
            counts: ProcessCounts::default(),
            decoder,
            aggregate: Aggregate::new(),
            builder,
            only_tid: None,
            last_named: Instant::now(),
            allocations_on: interval.is_some(),
        };
        self.processes.insert(pid, process);
        Ok(())
    }

    /// Attaches the allocation uprobe for tracked process `pid` (with allocations on), at `site`
    /// when the caller found it, else found here (which reads the target's maps and its
    /// `node`). A `node` without the symbol goes into [`Pipeline::take_alloc_reports`], once.
    pub fn probe_allocations(&mut self, pid: u32, site: Option<Result<ProbeSite, ProbeSiteError>>) {
        if !self.opts.alloc || !self.processes.contains_key(&pid) {
            return;
        }
        let sampler = &self.sampler;
        let attach = |site: &ProbeSite| sampler.attach_alloc_probe(site);
        let added = match site {
            Some(site) => self.alloc_probes.add_site(pid, site, attach),
            None => self.alloc_probes.add(pid, attach),
        };
        if let Added::Unavailable { report: Some(line) } = added {
            self.alloc_reports.push(line);
        }
    }

    /// Keeps only the samples of thread `tid` of process `pid` from now on (`record TID`).
    pub fn keep_only_thread(&mut self, pid: u32, tid: u32) {
        if let Some(p) = self.processes.get_mut(&pid) {
            p.only_tid = Some(tid);
        }
    }

    /// A tracked process's context changed: new key map and identity.
    pub fn update(&mut self, key: ProcessKey, key_map: Option<&[String]>, identity: Identity) {
        if let Some(p) = self.processes.get_mut(&key.pid).filter(|p| p.key == key) {
            p.decoder.set_key_map(key_map);
            p.identity = identity;
        }
    }

    /// Stops sampling `pid`; its events still in the ring buffer are decoded first, and its
    /// samples so far go out with the current window. Returns its key when it was tracked.
    pub fn untrack(&mut self, pid: u32, on_sample: OnSample) -> Result<Option<ProcessKey>, PipelineError> {
        if !self.processes.contains_key(&pid) {
            return Ok(None);
        }
        self.sampler.untrack(pid)?;
        self.alloc_probes.remove(pid);
        self.poll(Duration::ZERO, on_sample)?;
        let Some(mut p) = self.processes.remove(&pid) else { return Ok(None) };
        send_names(&mut p, self.worker.as_ref(), &mut self.counters);
        let key = p.key;
        self.exited.push(p);
        Ok(Some(key))
    }

    /// Forgets `key` at once (a process a worker blocked on): its window is dropped and no
    /// worker reads it again.
    fn drop_process(&mut self, key: ProcessKey) {
        if self.processes.get(&key.pid).is_some_and(|p| p.key == key) {
            let _ = self.sampler.untrack(key.pid);
            self.alloc_probes.remove(key.pid);
            self.processes.remove(&key.pid);
        }
        self.exited.retain(|p| p.key != key);
        if let Some(w) = &self.worker {
            w.queue.purge(key);
        }
    }

    pub fn get(&self, pid: u32) -> Option<&TrackedProcess> {
        self.processes.get(&pid)
    }

    pub fn processes(&self) -> impl Iterator<Item = &TrackedProcess> {
        self.processes.values()
    }

    pub fn len(&self) -> usize {
        self.processes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.processes.is_empty()
    }

    /// Waits up to `timeout` for events, decodes and aggregates each into its process (showing
    /// each decoded sample to `on_sample`), and hands new addresses to the symbolize stage when
    /// due. Returns how many events arrived.
    pub fn poll(&mut self, timeout: Duration, on_sample: OnSample) -> Result<usize, PipelineError> {
        self.undecodable += self.sampler.poll(timeout, &mut self.events)?;
        let n = self.events.len();
        for e in self.events.drain(..) {
            let Some(p) = self.processes.get_mut(&e.pid) else {
                self.late_events += 1;
                continue;
            };
            if p.only_tid.is_some_and(|t| t != e.tid) {
                continue;
            }
            match e.kind {
                EventKind::Cpu => {
                    p.counts.cpu_samples += 1;
                    p.counts.with_span += e.span().is_some() as u64;
                }
                EventKind::OffCpu => p.counts.off_cpu_intervals += 1,
                EventKind::Alloc => {
                    p.counts.alloc_samples += 1;
                    p.counts.alloc_with_span += e.span().is_some() as u64;
                }
            }
            let sample = p.decoder.decode(&e);
            on_sample(p, &e, &sample);
            p.aggregate.add(&sample);
        }
        for p in self.processes.values_mut() {
            if p.aggregate.unnamed_len() >= NAME_BATCH || (p.last_named.elapsed() >= NAME_INTERVAL && p.aggregate.unnamed_len() > 0) {
                send_names(p, self.worker.as_ref(), &mut self.counters);
            }
        }
        Ok(n)
    }

    /// Ends the window that started at `start_unix_ns`: every tracked process's samples so
    /// far (and those of processes untracked in it) are finished into profiles, inline now or
    /// by the worker, and come back through [`Pipeline::take_windows`].
    pub fn end_window(&mut self, start_unix_ns: u64, duration_ns: u64) {
        let mut finished: Vec<(ProcessKey, Identity, Aggregate, Option<ProfileBuilder>)> = Vec::new();
        for p in self.processes.values_mut() {
            p.aggregate.losses += p.decoder.take_losses();
            p.aggregate.allocations_on = p.allocations_on;
            finished.push((p.key, p.identity.clone(), std::mem::take(&mut p.aggregate), None));
        }
        let tracked = finished.len();
        for mut p in std::mem::take(&mut self.exited) {
            p.aggregate.losses += p.decoder.take_losses();
            p.aggregate.allocations_on = p.allocations_on;
            self.counters.attrs_evicted += p.decoder.attrs_evicted;
            finished.push((p.key, p.identity.clone(), std::mem::take(&mut p.aggregate), p.builder.take()));
        }
        self.counters.dropped_entry_cap += finished.iter().map(|f| f.2.dropped_samples).sum::<u64>();
        match &mut self.worker {
            Some(w) => {
                let processes = finished
                    .into_iter()
                    .enumerate()
                    .map(|(i, (key, id, aggregate, _))| Finished {
                        key,
                        resource: id.resource,
                        service_name: id.service_name,
                        aggregate,
                        exited: i >= tracked,
                    })
                    .collect();
                if !w.queue.push_end(WindowEnd { start_unix_ns, duration_ns, processes }) {
                    w.outstanding += 1;
                }
            }
            None => {
                let mut window = Window { start_unix_ns, duration_ns, processes: Vec::new() };
                for (i, (key, id, aggregate, own)) in finished.into_iter().enumerate() {
                    let exited = i >= tracked;
                    let profile = match own {
                        Some(mut b) => b.finish(aggregate),
                        None => match self.processes.get_mut(&key.pid).and_then(|p| p.builder.as_mut()) {
                            Some(b) => b.finish(aggregate),
                            None => continue,
                        },
                    };
                    window.processes.push(WindowProcess {
                        pid: key.pid,
                        service_name: id.service_name,
                        resource: id.resource,
                        profile,
                        exited,
                        cpu_throttling: None,
                        finish_ns: 0,
                    });
                }
                self.finished.push(window);
            }
        }
    }

    /// Windows finished since the last call (inline at once; the worker's as they come back).
    pub fn take_windows(&mut self) -> Vec<Window> {
        let mut out = std::mem::take(&mut self.finished);
        if let Some(w) = &mut self.worker {
            while let Ok(window) = w.windows_rx.try_recv() {
                w.outstanding = w.outstanding.saturating_sub(1);
                out.push(window);
            }
        }
        out
    }

    /// Windows handed to the worker and not back yet.
    pub fn outstanding(&self) -> usize {
        self.worker.as_ref().map_or(0, |w| w.outstanding)
    }

    /// Waits up to `wait` for the next window from the worker.
    pub fn wait_window(&mut self, wait: Duration) -> Option<Window> {
        let w = self.worker.as_mut()?;
        let window = w.windows_rx.recv_timeout(wait).ok()?;
        w.outstanding = w.outstanding.saturating_sub(1);
        Some(window)
    }

    /// The worker can no longer deliver windows (too many stuck reads).
    pub fn worker_dead(&self) -> bool {
        self.worker.as_ref().is_some_and(|w| w.supervised.dead)
    }

    /// Checks the worker's heartbeat: a worker stuck on one process past the timeout is
    /// replaced and that process dropped for good. Returns the process and a note for the user.
    pub fn supervise(&mut self) -> Option<(Stuck, String)> {
        let w = self.worker.as_mut()?;
        let stuck = w.supervised.check(w.process_timeout)?;
        let service = self
            .processes
            .get(&stuck.key.pid)
            .filter(|p| p.key == stuck.key)
            .map(|p| format!(" ({})", thread_ctx_discovery::printable::printable(&p.identity.service_name)))
            .unwrap_or_default();
        let mut note = watchdog::stuck_note(&stuck, &service, "symbolization");
        self.drop_process(stuck.key);
        let w = self.worker.as_mut()?;
        let (opts, queue, tx, counters) = (self.opts, w.queue.clone(), w.windows_tx.clone(), w.counters.clone());
        if let Err(e) = w.supervised.respawn("symbolization", "windows are no longer built", || spawn_worker(opts, &queue, &tx, &counters)) {
            note = format!("{note}; {e}");
        }
        // A window the stuck worker was building never comes back: count what is left.
        while let Ok(window) = w.windows_rx.try_recv() {
            self.finished.push(window);
        }
        w.outstanding = w.queue.windows_queued();
        Some((stuck, note))
    }

    /// Cache evictions and drops so far.
    pub fn counters(&self) -> PipelineCounters {
        let mut c = self.counters;
        c.attrs_evicted += self.processes.values().map(|p| p.decoder.attrs_evicted).sum::<u64>();
        if let Some(w) = &self.worker {
            c.native_names_evicted = w.counters.native_names_evicted.load(Ordering::Relaxed);
            c.js_names_evicted = w.counters.js_names_evicted.load(Ordering::Relaxed);
            c.thread_names_evicted = w.counters.thread_names_evicted.load(Ordering::Relaxed);
            let g = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
            c.cached.native_names = g(&w.counters.native_names);
            c.cached.native_name_bytes = g(&w.counters.native_name_bytes);
            c.cached.objects_open = g(&w.counters.objects_open);
            c.cached.js_functions = g(&w.counters.js_functions);
            c.cached.thread_names = g(&w.counters.thread_names);
            c.cached.v8_entries = g(&w.counters.v8_entries);
            c.cached.v8_bytes = g(&w.counters.v8_bytes);
            c.js_heap_reads = crate::js_names::HeapReads { calls: g(&w.counters.js_heap_reads), bytes: g(&w.counters.js_heap_read_bytes) };
            c.cached.kept_frames = g(&w.counters.kept_frames);
            c.cached.kept_names = g(&w.counters.kept_names);
            c.names = *w.counters.names.lock().unwrap_or_else(|e| e.into_inner());
        }
        c.cached.attr_sets = self.processes.values().map(|p| p.decoder.attrs_cached() as u64).sum();
        for b in self.processes.values().filter_map(|p| p.builder.as_ref()) {
            c.js_names_evicted += b.symbolizer().js_names_evicted();
            c.thread_names_evicted += b.thread_names_evicted;
            c.names += b.symbolizer().cache;
            let (frames, names) = b.symbolizer().names_cached();
            (c.cached.kept_frames, c.cached.kept_names) = (c.cached.kept_frames + frames as u64, c.cached.kept_names + names as u64);
            if let Some(js) = b.symbolizer().js_names() {
                c.js_heap_reads += js.reads();
                c.cached.v8_entries += js.cached().entries as u64;
                c.cached.v8_bytes += js.cached().bytes as u64;
            }
        }
        c
    }

    /// Stops the worker (it finishes nothing more).
    pub fn stop(&mut self) {
        if let Some(w) = &self.worker {
            w.supervised.beat.retire();
            w.queue.close();
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Hands what the process's aggregate saw first to the symbolize stage.
fn send_names(p: &mut TrackedProcess, worker: Option<&WorkerStage>, counters: &mut PipelineCounters) {
    p.last_named = Instant::now();
    let unnamed = p.aggregate.take_unnamed();
    if unnamed.is_empty() {
        return;
    }
    match (&mut p.builder, worker) {
        (Some(b), _) => b.name(&unnamed),
        (None, Some(w)) => {
            if let Err(n) = w.queue.push_names(p.key, unnamed) {
                counters.dropped_behind += n as u64;
            }
        }
        (None, None) => {}
    }
}

fn spawn_worker(opts: SamplerOptions, queue: &Arc<JobQueue>, tx: &Sender<Window>, counters: &Arc<WorkerCounters>) -> std::io::Result<Heartbeat> {
    let beat = Heartbeat::new();
    let cx = WorkerContext { opts, queue: queue.clone(), beat: beat.clone(), to_loop: tx.clone(), counters: counters.clone() };
    std::thread::Builder::new().name("symbolization".into()).spawn(move || worker::run(cx))?;
    Ok(beat)
}

/// The process exists (it may be a zombie whose threads are gone).
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks existence/permission.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 || *libc::__errno_location() != libc::ESRCH }
}
