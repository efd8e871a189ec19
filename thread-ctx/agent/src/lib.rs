//! Continuous profiling of every process that publishes span context (or of
//! given pids), in windows, each handed to a [`WindowSink`].
//!
//! Three threads, so that nothing a target process does can stall sampling:
//! - the sampling loop (the caller's thread: [`Agent::run_until`],
//!   [`Agent::end_window`]) runs the [`Pipeline`]'s decode and aggregate
//!   stages and ends windows on time. It never reads a target process: the
//!   status line comes every window whatever discovery or symbolization does;
//! - the discovery thread ([`discovery_worker`]) finds new processes, exited
//!   ones and changed process contexts, and tells the loop;
//! - the pipeline's symbolization thread names addresses and finishes windows.
//!
//! Both workers read targets one process at a time under a heartbeat; the
//! loop checks them every poll and skips for good a process whose read
//! blocks past `process_timeout` (see [`thread_ctx_profile::pipeline::watchdog`]).

mod cpu_throttling;
mod discovery_worker;
mod heap;
mod object_sites;
mod registry;
mod window_stats;

pub use heap::HeapStats;
pub use window_stats::{WindowStats, SLOWEST_SERVICES};

use discovery_worker::{DiscoveryConfig, Found};
use object_sites::ObjectSites;
use registry::{Registry, State};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thread_ctx_discovery::error::ErrorKind;
use thread_ctx_discovery::host_scan::ProcessKey;
use thread_ctx_discovery::printable::printable;
use thread_ctx_discovery::resource::{host_name, resource_of, service_name_of};
use thread_ctx_discovery::{discover, Discovery, WriterError};
use thread_ctx_profile::pipeline::watchdog::{stuck_note, Heartbeat, Supervised};
use thread_ctx_profile::pipeline::{Identity, Pipeline, PipelineError, Symbolize};
use thread_ctx_profile::sink::WindowSink;
use thread_ctx_sampler::alloc_probe::{ProbeSite, ProbeSiteError};
use thread_ctx_sampler::{Counters, SamplerOptions, V8FramesError, V8Process, MAX_TARGETS};

/// How long the loop waits for events at most before looking at the clock again. The ring buffer
/// holds a second of events and wakes the loop a quarter full; this bounds how late a stop, a
/// found process or a finished window is seen, for 4 wake-ups a second when idle.
const POLL: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub sampler: SamplerOptions,
    /// Length of a window.
    pub interval: Duration,
    /// How often host-wide discovery looks for new processes (and every mode for exited ones).
    pub scan_interval: Duration,
    /// Only these processes; empty: every process on the host that publishes.
    pub pids: Vec<u32>,
    /// How long reading one process (discovery, symbolization) may block
    /// before that process is skipped for good.
    pub process_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error("--pid {pid}: {cause}")]
    Pid { pid: u32, cause: PidError },
    #[error("starting the discovery thread: {0}")]
    Thread(std::io::Error),
}

impl AgentError {
    /// What the error means for the caller (no permission to load eBPF, a `--pid` gone, ...).
    pub fn kind(&self) -> ErrorKind {
        match self {
            AgentError::Pipeline(e) | AgentError::Pid { cause: PidError::Track(e), .. } => e.kind(),
            AgentError::Pid { cause: PidError::NoProcess, .. } => ErrorKind::TargetGone,
            AgentError::Pid { cause: PidError::Read(e), .. } => e.kind(),
            AgentError::Thread(_) => ErrorKind::Other,
        }
    }
}

/// Why a process the agent was told to sample (`--pid`) is not sampled.
#[derive(Debug, thiserror::Error)]
pub enum PidError {
    #[error("no such process (expected the pid of a running process)")]
    NoProcess,
    #[error(transparent)]
    Read(ReadError),
    #[error(transparent)]
    Track(PipelineError),
}

/// Why a process could not be read within the time given.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("starting the discover thread: {0}")]
    Thread(std::io::Error),
    #[error(transparent)]
    Discovery(thread_ctx_discovery::error::Error),
    #[error("reading the process did not finish within {0:.0}s (the target blocks the read)")]
    TimedOut(f64),
}

impl ReadError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            ReadError::Discovery(e) => e.kind(),
            _ => ErrorKind::Other,
        }
    }
}

pub struct Agent {
    pipeline: Pipeline,
    opts: AgentOptions,
    host_name: String,
    registry: Arc<Registry>,
    discovery: Supervised,
    found_tx: Sender<Found>,
    found_rx: Receiver<Found>,
    window_start: Instant,
    window_start_unix_ns: u64,
    counters_at_start: Counters,
    stats: WindowStats,
    /// Probe sites and V8 layouts by `node` object, for every discovery.
    sites: ObjectSites,
    /// Things worth a line on stderr (a process tracked, skipped, or gone), taken by the caller.
    notes: Vec<String>,
    /// Each process's cgroup CPU throttling, put on its window before a sink gets it.
    throttling: cpu_throttling::ThrottlingReader,
}

impl Agent {
    /// Loads the sampler, tracks the given pids (an error when one cannot be
    /// tracked) and starts the workers; host-wide discovery finds the rest.
    pub fn start(opts: AgentOptions) -> Result<Agent, AgentError> {
        let pipeline = Pipeline::start(opts.sampler, Symbolize::OnWorker { process_timeout: opts.process_timeout })?;
        let (found_tx, found_rx) = mpsc::channel();
        let mut agent = Agent {
            pipeline,
            host_name: host_name(),
            registry: Arc::new(Registry::default()),
            discovery: Supervised::new(Heartbeat::new()),
            found_tx,
            found_rx,
            window_start: Instant::now(),
            window_start_unix_ns: unix_now_ns(),
            counters_at_start: Counters::default(),
            stats: WindowStats::default(),
            sites: ObjectSites::default(),
            notes: Vec::new(),
            throttling: cpu_throttling::ThrottlingReader::new(),
            opts,
        };
        for pid in agent.opts.pids.clone() {
            let key = ProcessKey::of(pid).ok_or(AgentError::Pid { pid, cause: PidError::NoProcess })?;
            let (d, alloc_site, v8) = discover_within(pid, agent.sites.clone(), agent.opts.sampler.alloc, agent.opts.process_timeout)
                .map_err(|e| AgentError::Pid { pid, cause: PidError::Read(e) })?;
            let resource = resource_of(&d, &agent.host_name);
            agent.track(key, d, resource, alloc_site, v8).map_err(|e| AgentError::Pid { pid, cause: PidError::Track(e) })?;
        }
        agent.discovery = Supervised::new(agent.spawn_discovery_worker().map_err(AgentError::Thread)?);
        agent.begin_window();
        Ok(agent)
    }

    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// When the current window ends.
    pub fn window_end(&self) -> Instant {
        self.window_start + self.opts.interval
    }

    /// Fixed pids were given and every one of them has exited.
    pub fn all_given_exited(&self) -> bool {
        !self.opts.pids.is_empty() && self.pipeline.is_empty()
    }

    /// Lines for stderr since the last call.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Samples until `deadline` or until `stop` says so: takes what discovery found,
    /// replaces a stuck worker, and hands each finished window to `sink`.
    pub fn run_until(&mut self, deadline: Instant, stop: &dyn Fn() -> bool, sink: &mut dyn WindowSink) -> Result<(), AgentError> {
        while Instant::now() < deadline && !stop() {
            let wait = POLL.min(deadline.saturating_duration_since(Instant::now()));
            self.pipeline.poll(wait, &mut |_, _, _| {})?;
            while let Ok(found) = self.found_rx.try_recv() {
                self.on_found(found)?;
            }
            self.supervise();
            self.deliver(sink);
        }
        Ok(())
    }

    /// Ends the current window: its samples go to the symbolization thread, which hands
    /// the profiles back through [`Agent::run_until`]; returns what the status line says
    /// about it, at once.
    pub fn end_window(&mut self) -> Result<WindowStats, AgentError> {
        self.pipeline.poll(Duration::ZERO, &mut |_, _, _| {})?;
        let duration_ns = self.window_start.elapsed().as_nanos() as u64;
        self.pipeline.end_window(self.window_start_unix_ns, duration_ns);
        let counters = self.pipeline.sampler().counters().map_err(PipelineError::from)?;
        let delta = counters.since(&self.counters_at_start);
        let mut stats = std::mem::take(&mut self.stats);
        stats.duration_ns = duration_ns;
        stats.processes = self.pipeline.len();
        stats.cpu_samples = delta.total();
        stats.with_span = delta.get(thread_ctx_sampler::CtxState::Valid);
        stats.off_cpu_intervals = delta.off_cpu_sent;
        stats.alloc_samples = delta.alloc_sent;
        stats.dropped_ring_full = delta.all_dropped();
        stats.counters = self.pipeline.counters();
        stats.heap = HeapStats::now();
        self.counters_at_start = counters;
        self.begin_window();
        Ok(stats)
    }

    /// Waits up to `grace` for the windows the symbolization thread still has, hands
    /// them to `sink`, then stops the workers. Returns the windows that did not come back.
    pub fn finish(mut self, grace: Duration, sink: &mut dyn WindowSink) -> usize {
        let deadline = Instant::now() + grace;
        self.deliver(sink);
        while self.pipeline.outstanding() > 0 && Instant::now() < deadline && !self.pipeline.worker_dead() {
            if let Some(mut w) = self.pipeline.wait_window(POLL) {
                self.throttling.annotate(&mut w);
                self.write(sink, &w);
            }
            self.supervise();
        }
        self.registry.stop();
        let left = self.pipeline.outstanding();
        self.pipeline.stop();
        left
    }

    fn begin_window(&mut self) {
        self.window_start = Instant::now();
        self.window_start_unix_ns = unix_now_ns();
    }

    fn deliver(&mut self, sink: &mut dyn WindowSink) {
        for mut w in self.pipeline.take_windows() {
            self.throttling.annotate(&mut w);
            self.write(sink, &w);
        }
    }

    fn write(&mut self, sink: &mut dyn WindowSink, w: &thread_ctx_profile::window::Window) {
        for p in &w.processes {
            self.stats.js_naming.add(&p.profile.js_naming, 1);
            self.stats.finished(&p.service_name, p.finish_ns);
        }
        self.stats.delivered += 1;
        let lag = unix_now_ns().saturating_sub(w.start_unix_ns + w.duration_ns);
        self.stats.delivery_lag_ns = self.stats.delivery_lag_ns.max(lag);
        if let Err(e) = sink.write(w) {
            self.notes.push(e.to_string());
        }
    }

    fn on_found(&mut self, found: Found) -> Result<(), AgentError> {
        match found {
            Found::Track { key, discovery, resource, alloc_site, v8 } => {
                if self.pipeline.len() >= MAX_TARGETS {
                    self.refuse(key, format!("already sampling {MAX_TARGETS} processes"));
                } else if let Err(e) = self.track(key, *discovery, resource, alloc_site, v8) {
                    self.refuse(key, e.to_string());
                }
            }
            Found::Refused { key, reason } => self.refuse(key, reason),
            Found::Exited { key } => {
                if self.pipeline.get(key.pid).is_some_and(|p| p.key == key) {
                    self.pipeline.untrack(key.pid, &mut |_, _, _| {})?;
                    self.registry.remove(key.pid);
                    self.notes.push(format!("process {} exited; its last samples go out with this window", key.pid));
                    self.stats.exited += 1;
                }
            }
            Found::Updated { key, key_map, resource } => {
                let identity = Identity { service_name: service_name_of(&resource), resource };
                self.pipeline.update(key, key_map.as_deref(), identity);
            }
        }
        Ok(())
    }

    fn refuse(&mut self, key: ProcessKey, reason: String) {
        self.stats.skipped += 1;
        self.registry.set(key, State::Refused);
        self.notes.push(format!("process {}: not sampled: {}", key.pid, printable(&reason)));
    }

    /// Starts sampling a discovered process (no read of the target here: discovery did that).
    fn track(
        &mut self,
        key: ProcessKey,
        mut d: Discovery,
        resource: thread_ctx_discovery::process_context_proto::Resource,
        alloc_site: Option<Result<ProbeSite, ProbeSiteError>>,
        v8: Result<V8Process, V8FramesError>,
    ) -> Result<(), PipelineError> {
        let writer = d.sampled_writer();
        let mut what = match &writer {
            Ok(w) => format!("{} ({})", w.path, w.access.as_ref().map(|a| a.to_string()).unwrap_or_default()),
            Err(WriterError::None(_)) => "no otel_thread_ctx_v1: stacks only".into(),
            Err(e) => format!("{e}: stacks only"),
        };
        let unusable = matches!(writer, Err(WriterError::Unusable { .. }));
        // What the process got wrong goes on the same line: one line per process.
        if let Some(first) = d.skipped_objects.first() {
            what += &format!("; {} mapped object(s) skipped, first: {first}", d.skipped_objects.len());
        }
        let service = match &d.process_context {
            None => "no process context".to_string(),
            Some(Ok(_)) => d.service_name().unwrap_or("no service.name").to_string(),
            Some(Err(e)) => format!("process context unreadable: {e}"),
        };
        if unusable {
            // Writers that do not resolve still leave the process's stacks worth sampling.
            d.writers.clear();
        }
        let identity = Identity { service_name: service_name_of(&resource), resource };
        self.pipeline.track(key, &d, identity, v8)?;
        if let Some(site) = alloc_site {
            self.pipeline.probe_allocations(key.pid, Some(site));
        }
        for line in self.pipeline.take_alloc_reports() {
            self.notes.push(format!("allocations: {}", printable(&line)));
        }
        if self.opts.sampler.alloc && self.pipeline.alloc_probed(key.pid) {
            what += "; allocations probed";
        }
        self.registry.set(key, State::Tracked);
        self.stats.new += 1;
        self.notes.push(format!("tracking process {} ({}): {}", key.pid, printable(&service), printable(&what)));
        Ok(())
    }

    /// Replaces a worker stuck on one process, which is skipped from then on.
    fn supervise(&mut self) {
        if let Some((stuck, note)) = self.pipeline.supervise() {
            self.registry.set(stuck.key, State::Stuck);
            self.stats.stuck += 1;
            self.notes.push(note);
        }
        if let Some(stuck) = self.discovery.check(self.opts.process_timeout) {
            let key = stuck.key;
            let service = self
                .pipeline
                .get(key.pid)
                .filter(|p| p.key == key)
                .map(|p| format!(" ({})", printable(&p.identity.service_name)))
                .unwrap_or_default();
            if self.pipeline.get(key.pid).is_some_and(|p| p.key == key) {
                if let Err(e) = self.pipeline.untrack(key.pid, &mut |_, _, _| {}) {
                    self.notes.push(format!("untracking process {}: {e}", key.pid));
                }
            }
            self.registry.set(key, State::Stuck);
            self.stats.stuck += 1;
            self.notes.push(stuck_note(&stuck, &service, "discovery"));
            let (config, registry, tx) = (self.discovery_config(), self.registry.clone(), self.found_tx.clone());
            if let Err(e) = self
                .discovery
                .respawn("discovery", "tracked processes are still sampled; new ones are not found", || spawn_discovery(config, registry, tx))
            {
                self.notes.push(e.to_string());
            }
        }
    }

    fn discovery_config(&self) -> DiscoveryConfig {
        DiscoveryConfig {
            scan_interval: self.opts.scan_interval,
            host_wide: self.opts.pids.is_empty(),
            host_name: self.host_name.clone(),
            alloc: self.opts.sampler.alloc,
            sites: self.sites.clone(),
        }
    }

    fn spawn_discovery_worker(&self) -> std::io::Result<Heartbeat> {
        spawn_discovery(self.discovery_config(), self.registry.clone(), self.found_tx.clone())
    }
}

fn spawn_discovery(config: DiscoveryConfig, registry: Arc<Registry>, tx: Sender<Found>) -> std::io::Result<Heartbeat> {
    let beat = Heartbeat::new();
    let b = beat.clone();
    std::thread::Builder::new().name("discovery".into()).spawn(move || discovery_worker::run(config, registry, b, tx))?;
    Ok(beat)
}

/// What sampling a process needs read of it.
type Discovered = (Discovery, Option<Result<ProbeSite, ProbeSiteError>>, Result<V8Process, V8FramesError>);

/// The process's discovery, its allocation probe site (allocations on) and its V8 layout: read
/// on a thread of their own, given up after `timeout` (the thread is left behind).
fn discover_within(pid: u32, sites: ObjectSites, alloc: bool, timeout: Duration) -> Result<Discovered, ReadError> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("discover".into())
        .spawn(move || {
            let found = discover(pid as i32).map(|d| {
                let s = sites.of(pid, alloc);
                (d, s.alloc, s.v8)
            });
            // Nobody may be listening any more (timed out): nothing to do then.
            let _ = tx.send(found);
        })
        .map_err(ReadError::Thread)?;
    match rx.recv_timeout(timeout) {
        Ok(Ok(d)) => Ok(d),
        Ok(Err(e)) => Err(ReadError::Discovery(e)),
        Err(_) => Err(ReadError::TimedOut(timeout.as_secs_f64())),
    }
}

fn unix_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
