//! Continuous profiling of every process that publishes span context (or of
//! given pids), in windows.
//!
//! Three threads, so that nothing a target process does can stall sampling:
//! - the sampling loop (the caller's thread: [`Agent::run_until`],
//!   [`Agent::end_window`]) drains the eBPF ring buffer, decodes each event
//!   into a sample of its process, and ends windows on time. It never reads a
//!   target process: the status line comes every window whatever discovery or
//!   symbolization does;
//! - the discovery thread ([`discovery_worker`]) finds new processes, exited
//!   ones and changed process contexts, and tells the loop;
//! - the profile thread ([`profile_worker`]) symbolizes and aggregates the
//!   samples, and hands each finished window back to the loop.
//!
//! Both workers read targets one process at a time under a [`Heartbeat`];
//! the loop checks it every poll and skips for good a process whose read
//! blocks past `process_timeout` (see [`watchdog`]), replacing the worker.

mod discovery_worker;
mod profile_worker;
mod registry;
pub mod watchdog;

use crate::discovery::host_scan::ProcessKey;
use crate::discovery::{discover, Discovery};
use crate::output::otlp::{host_name, resource_of};
use crate::output::printable::printable;
use crate::pipeline::{self, Pipeline};
use crate::profile::builder::{sample_of, StackLosses};
use crate::profile::{Profile, ProfileSettings, Sample};
use crate::sampler::{Counters, Event, SamplerOptions, MAX_TARGETS};
use discovery_worker::{DiscoveryConfig, Found};
use opentelemetry_proto::tonic::resource::v1::Resource;
use profile_worker::{JobQueue, WindowEnd, WindowMeta};
use registry::{Registry, State};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use watchdog::Heartbeat;

/// How long the loop waits for events at most before looking at the clock again.
const POLL: Duration = Duration::from_millis(100);
/// A process's decoded samples go to the profile thread this often, or at this many.
const BATCH_INTERVAL: Duration = Duration::from_millis(250);
const BATCH_SAMPLES: usize = 1024;
/// Workers replaced after a stuck read, at most; each stuck one is a thread
/// blocked in the kernel for as long as its target keeps it there.
const MAX_WORKER_RESTARTS: usize = 16;

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

/// One process's profile over one window.
pub struct WindowProcess {
    pub pid: u32,
    pub service_name: String,
    pub resource: Resource,
    pub profile: Profile,
    /// It exited during the window: this is its last profile.
    pub exited: bool,
}

/// What happened during a window, for the status line.
#[derive(Debug, Clone, Default)]
pub struct WindowStats {
    pub duration_ns: u64,
    /// Processes tracked at the window's end, and those that started or stopped being tracked in it.
    pub processes: usize,
    pub new: usize,
    pub exited: usize,
    /// Processes that publish but could not be tracked (with why), and over the target limit.
    pub skipped: usize,
    /// Processes skipped because reading them blocked past the timeout.
    pub stuck: usize,
    /// Events delivered (CPU samples and off-CPU intervals) and lost.
    pub cpu_samples: u64,
    /// CPU samples whose thread had published a span.
    pub with_span: u64,
    pub off_cpu_intervals: u64,
    pub dropped_ring_full: u64,
    /// Samples left out because a profile already held its maximum of distinct entries
    /// (counted when the profile thread finishes a window: they show in the next line).
    pub dropped_entry_cap: u64,
    /// Samples dropped because the profile thread was behind.
    pub dropped_behind: u64,
}

/// The profiles of one window, finished by the profile thread.
pub struct Window {
    /// Wall clock, ns since the Unix epoch.
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    pub processes: Vec<WindowProcess>,
}

/// A tracked process, as the sampling loop knows it.
struct Process {
    key: ProcessKey,
    key_map: Option<Vec<String>>,
    resource: Resource,
    service_name: String,
    /// Decoded samples not yet sent to the profile thread.
    pending: Vec<Sample>,
    losses: StackLosses,
    last_sent: Instant,
}

/// A worker thread and the heartbeat the loop watches it by.
struct Supervised {
    beat: Heartbeat,
    restarts: usize,
    /// Given up on after too many stuck reads.
    dead: bool,
}

pub struct Agent {
    pipeline: Pipeline,
    opts: AgentOptions,
    settings: ProfileSettings,
    host_name: String,
    registry: Arc<Registry>,
    tracked: HashMap<u32, Process>,
    /// Processes untracked during this window, their last profile still to hand over.
    exited: Vec<WindowMeta>,
    discovery: Supervised,
    profiles: Supervised,
    found_tx: Sender<Found>,
    found_rx: Receiver<Found>,
    windows_tx: Sender<Window>,
    windows_rx: Receiver<Window>,
    queue: Arc<JobQueue>,
    entry_cap_drops: Arc<AtomicU64>,
    entry_cap_reported: u64,
    /// Windows handed to the profile thread and not back yet.
    outstanding: usize,
    window_start: Instant,
    window_start_unix_ns: u64,
    counters_at_start: Counters,
    stats: WindowStats,
    /// Things worth a line on stderr (a process tracked, skipped, or gone), taken by the caller.
    notes: Vec<String>,
}

impl Agent {
    /// Loads the sampler, tracks the given pids (an error when one cannot be
    /// tracked) and starts the workers; host-wide discovery finds the rest.
    pub fn start(opts: AgentOptions) -> anyhow::Result<Agent> {
        let pipeline = Pipeline::start_unsymbolized(opts.sampler)?;
        let settings = pipeline.settings();
        // Samples waiting for the profile thread: ten seconds of every CPU sampling, at least 10k.
        let max_queued = (10 * opts.sampler.hz as usize * pipeline.sampler().cpus()).max(10_000);
        let (found_tx, found_rx) = mpsc::channel();
        let (windows_tx, windows_rx) = mpsc::channel();
        let mut agent = Agent {
            pipeline,
            settings,
            host_name: host_name(),
            registry: Arc::new(Registry::default()),
            tracked: HashMap::new(),
            exited: Vec::new(),
            discovery: Supervised { beat: Heartbeat::new(), restarts: 0, dead: false },
            profiles: Supervised { beat: Heartbeat::new(), restarts: 0, dead: false },
            found_tx,
            found_rx,
            windows_tx,
            windows_rx,
            queue: Arc::new(JobQueue::new(max_queued)),
            entry_cap_drops: Arc::new(AtomicU64::new(0)),
            entry_cap_reported: 0,
            outstanding: 0,
            window_start: Instant::now(),
            window_start_unix_ns: unix_now_ns(),
            counters_at_start: Counters::default(),
            stats: WindowStats::default(),
            notes: Vec::new(),
            opts,
        };
        agent.profiles.beat = agent.spawn_profile_worker()?;
        for pid in agent.opts.pids.clone() {
            let key = ProcessKey::of(pid).ok_or_else(|| anyhow::anyhow!("--pid {pid}: no such process (expected the pid of a running process)"))?;
            let d = discover_within(pid, agent.opts.process_timeout).map_err(|e| anyhow::anyhow!("--pid {pid}: {e}"))?;
            let resource = resource_of(&d, &agent.host_name);
            agent.track(key, d, resource).map_err(|e| anyhow::anyhow!("--pid {pid}: {e:#}"))?;
        }
        agent.discovery.beat = agent.spawn_discovery_worker()?;
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
        !self.opts.pids.is_empty() && self.tracked.is_empty()
    }

    /// Lines for stderr since the last call.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Samples until `deadline` or until `stop` says so: takes what the
    /// workers found, replaces a stuck one, and hands each window the profile
    /// thread finished to `on_window`.
    pub fn run_until(&mut self, deadline: Instant, stop: &dyn Fn() -> bool, on_window: &mut dyn FnMut(Window)) -> anyhow::Result<()> {
        while Instant::now() < deadline && !stop() {
            let wait = POLL.min(deadline.saturating_duration_since(Instant::now()));
            self.poll(wait)?;
            self.send_due_batches(false);
            while let Ok(found) = self.found_rx.try_recv() {
                self.on_found(found)?;
            }
            self.supervise(on_window);
            self.deliver_windows(on_window);
        }
        Ok(())
    }

    /// Ends the current window: its samples go to the profile thread, which
    /// hands the profiles back through [`Agent::run_until`]; returns what the
    /// status line says about it, at once.
    pub fn end_window(&mut self) -> anyhow::Result<WindowStats> {
        self.poll(Duration::ZERO)?;
        self.send_due_batches(true);
        let duration_ns = self.window_start.elapsed().as_nanos() as u64;
        let mut processes: Vec<WindowMeta> = self
            .tracked
            .values()
            .map(|t| WindowMeta { key: t.key, resource: t.resource.clone(), service_name: t.service_name.clone(), exited: false })
            .collect();
        processes.append(&mut self.exited);
        if !self.queue.push_end(WindowEnd { start_unix_ns: self.window_start_unix_ns, duration_ns, processes }) {
            self.outstanding += 1;
        }
        let counters = self.pipeline.sampler().counters()?;
        let delta = counters.since(&self.counters_at_start);
        let mut stats = std::mem::take(&mut self.stats);
        stats.duration_ns = duration_ns;
        stats.processes = self.tracked.len();
        stats.cpu_samples = delta.total();
        stats.off_cpu_intervals = delta.off_cpu_sent;
        stats.dropped_ring_full = delta.all_dropped();
        let cap = self.entry_cap_drops.load(Ordering::Relaxed);
        stats.dropped_entry_cap = cap - self.entry_cap_reported;
        self.entry_cap_reported = cap;
        self.counters_at_start = counters;
        self.begin_window();
        Ok(stats)
    }

    /// Waits up to `grace` for the windows the profile thread still has, hands
    /// them to `on_window`, then stops the workers.
    pub fn finish(mut self, grace: Duration, on_window: &mut dyn FnMut(Window)) -> usize {
        let deadline = Instant::now() + grace;
        while self.outstanding > 0 && Instant::now() < deadline && !self.profiles.dead {
            if let Ok(w) = self.windows_rx.recv_timeout(POLL) {
                self.outstanding = self.outstanding.saturating_sub(1);
                on_window(w);
            }
            self.supervise(on_window);
        }
        self.registry.stop();
        self.queue.close();
        self.outstanding
    }

    fn begin_window(&mut self) {
        self.window_start = Instant::now();
        self.window_start_unix_ns = unix_now_ns();
    }

    /// Waits up to `wait` for events and decodes each into its process's pending samples.
    fn poll(&mut self, wait: Duration) -> anyhow::Result<()> {
        let Agent { pipeline, tracked, settings, stats, .. } = self;
        pipeline.poll(wait, &mut decoder(tracked, *settings, stats))?;
        Ok(())
    }

    /// Hands each process's pending samples to the profile thread once due (or all of them).
    fn send_due_batches(&mut self, all: bool) {
        for t in self.tracked.values_mut() {
            let due = t.pending.len() >= BATCH_SAMPLES || t.last_sent.elapsed() >= BATCH_INTERVAL;
            if (all || due) && !t.pending.is_empty() {
                Self::send_batch(&self.queue, &mut self.stats, t);
            }
        }
    }

    fn send_batch(queue: &JobQueue, stats: &mut WindowStats, t: &mut Process) {
        let samples = std::mem::take(&mut t.pending);
        let losses = std::mem::take(&mut t.losses);
        t.last_sent = Instant::now();
        if let Err(n) = queue.push_samples(t.key, samples, losses) {
            stats.dropped_behind += n as u64;
        }
    }

    fn on_found(&mut self, found: Found) -> anyhow::Result<()> {
        match found {
            Found::Track { key, discovery, resource } => {
                if self.tracked.len() >= MAX_TARGETS {
                    self.stats.skipped += 1;
                    self.registry.set(key, State::Refused);
                    self.notes.push(format!("process {}: not sampled: already sampling {MAX_TARGETS} processes", key.pid));
                } else if let Err(e) = self.track(key, *discovery, resource) {
                    self.stats.skipped += 1;
                    self.registry.set(key, State::Refused);
                    self.notes.push(format!("process {}: not sampled: {}", key.pid, printable(&format!("{e:#}"))));
                }
            }
            Found::Refused { key, reason } => {
                self.stats.skipped += 1;
                self.registry.set(key, State::Refused);
                self.notes.push(format!("process {}: not sampled: {}", key.pid, printable(&reason)));
            }
            Found::Exited { key } => {
                if self.tracked.get(&key.pid).is_some_and(|t| t.key == key) {
                    self.untrack(key.pid, true)?;
                    self.notes.push(format!("process {} exited; its last samples go out with this window", key.pid));
                    self.stats.exited += 1;
                }
            }
            Found::Updated { key, key_map, resource } => {
                if let Some(t) = self.tracked.get_mut(&key.pid).filter(|t| t.key == key) {
                    t.key_map = key_map;
                    t.service_name = service_name_of(&resource);
                    t.resource = resource;
                }
            }
        }
        Ok(())
    }

    /// Starts sampling a discovered process (no read of the target here: discovery did that).
    fn track(&mut self, key: ProcessKey, mut d: Discovery, resource: Resource) -> anyhow::Result<()> {
        let mut what = match d.sampled_writer() {
            Ok(Some(w)) => format!("{} ({})", w.path, w.access.as_ref().map(|a| a.to_string()).unwrap_or_default()),
            Ok(None) => "no otel_thread_ctx_v1: stacks only".into(),
            Err(e) => format!("{e}: stacks only"),
        };
        // What the process got wrong goes on the same line: one line per process.
        if let Some(first) = d.skipped_objects.first() {
            what += &format!("; {} mapped object(s) skipped, first: {first}", d.skipped_objects.len());
        }
        let service = match &d.process_context {
            None => "no process context".to_string(),
            Some(Ok(_)) => d.service_name().unwrap_or("no service.name").to_string(),
            Some(Err(e)) => format!("process context unreadable: {e}"),
        };
        if d.sampled_writer().is_err() {
            // Writers that do not resolve still leave the process's stacks worth sampling.
            d.writers.clear();
        }
        let key_map = d.key_map().map(<[String]>::to_vec);
        self.pipeline.track(d)?;
        self.registry.set(key, State::Tracked);
        self.queue.push_track(key);
        let service_name = service_name_of(&resource);
        self.tracked.insert(
            key.pid,
            Process { key, key_map, resource, service_name, pending: Vec::new(), losses: StackLosses::default(), last_sent: Instant::now() },
        );
        self.stats.new += 1;
        self.notes.push(format!("tracking process {} ({}): {}", key.pid, printable(&service), printable(&what)));
        Ok(())
    }

    /// Stops sampling `pid`; with `last_window`, its samples so far go out with this window.
    fn untrack(&mut self, pid: u32, last_window: bool) -> anyhow::Result<()> {
        // Its events still in the ring buffer are decoded first.
        let Agent { pipeline, tracked, settings, stats, .. } = self;
        pipeline.untrack(pid, &mut decoder(tracked, *settings, stats))?;
        self.registry.remove(pid);
        let Some(mut t) = self.tracked.remove(&pid) else { return Ok(()) };
        if last_window {
            if !t.pending.is_empty() {
                Self::send_batch(&self.queue, &mut self.stats, &mut t);
            }
            self.exited.push(WindowMeta { key: t.key, resource: t.resource, service_name: t.service_name, exited: true });
        }
        Ok(())
    }

    /// Hands over the windows the profile thread finished.
    fn deliver_windows(&mut self, on_window: &mut dyn FnMut(Window)) {
        while let Ok(w) = self.windows_rx.try_recv() {
            self.outstanding = self.outstanding.saturating_sub(1);
            on_window(w);
        }
    }

    /// Replaces a worker stuck on one process, which is skipped from then on.
    fn supervise(&mut self, on_window: &mut dyn FnMut(Window)) {
        for role in [Role::Discovery, Role::Profiles] {
            let w = match role {
                Role::Discovery => &self.discovery,
                Role::Profiles => &self.profiles,
            };
            if w.dead {
                continue;
            }
            let Some(stuck) = w.beat.stuck(self.opts.process_timeout) else { continue };
            w.beat.retire();
            let key = stuck.key;
            let service =
                self.tracked.get(&key.pid).filter(|t| t.key == key).map(|t| format!(" ({})", printable(&t.service_name))).unwrap_or_default();
            if self.tracked.get(&key.pid).is_some_and(|t| t.key == key) {
                if let Err(e) = self.untrack(key.pid, false) {
                    self.notes.push(format!("untracking process {}: {e:#}", key.pid));
                }
            }
            self.registry.set(key, State::Stuck);
            self.stats.stuck += 1;
            self.notes.push(format!(
                "process {}{service}: skipped: {} blocked for {:.0}s while {} (the target holds the read: a hung file system, \
                 a FIFO, memory it guards with userfaultfd); it is not read again",
                key.pid,
                role.thread(),
                stuck.for_.as_secs_f64(),
                stuck.what
            ));
            let respawned = match role {
                Role::Discovery => self.respawn(role, |a| a.spawn_discovery_worker()),
                Role::Profiles => self.respawn(role, |a| a.spawn_profile_worker()),
            };
            if let Err(e) = respawned {
                self.notes.push(e);
            }
            if let Role::Profiles = role {
                // A window the stuck worker was building never comes back: count what is left.
                self.deliver_windows(on_window);
                self.outstanding = self.queue.windows_queued();
            }
        }
    }

    fn respawn(&mut self, role: Role, spawn: impl FnOnce(&Self) -> anyhow::Result<Heartbeat>) -> Result<(), String> {
        let restarts = match role {
            Role::Discovery => self.discovery.restarts,
            Role::Profiles => self.profiles.restarts,
        };
        let outcome = if restarts >= MAX_WORKER_RESTARTS {
            Err(format!("{}: {MAX_WORKER_RESTARTS} processes blocked it; no longer restarted ({})", role.thread(), role.without()))
        } else {
            spawn(self).map_err(|e| format!("{}: cannot restart: {e:#} ({})", role.thread(), role.without()))
        };
        let w = match role {
            Role::Discovery => &mut self.discovery,
            Role::Profiles => &mut self.profiles,
        };
        match outcome {
            Ok(beat) => {
                w.beat = beat;
                w.restarts += 1;
                Ok(())
            }
            Err(e) => {
                w.dead = true;
                Err(e)
            }
        }
    }

    fn spawn_discovery_worker(&self) -> anyhow::Result<Heartbeat> {
        let beat = Heartbeat::new();
        let config =
            DiscoveryConfig { scan_interval: self.opts.scan_interval, host_wide: self.opts.pids.is_empty(), host_name: self.host_name.clone() };
        let (registry, b, tx) = (self.registry.clone(), beat.clone(), self.found_tx.clone());
        std::thread::Builder::new().name("discovery".into()).spawn(move || discovery_worker::run(config, registry, b, tx))?;
        Ok(beat)
    }

    fn spawn_profile_worker(&self) -> anyhow::Result<Heartbeat> {
        let beat = Heartbeat::new();
        let (settings, queue, registry, b, tx, drops) =
            (self.settings, self.queue.clone(), self.registry.clone(), beat.clone(), self.windows_tx.clone(), self.entry_cap_drops.clone());
        std::thread::Builder::new().name("profiles".into()).spawn(move || profile_worker::run(settings, queue, registry, b, tx, drops))?;
        Ok(beat)
    }
}

#[derive(Clone, Copy)]
enum Role {
    Discovery,
    Profiles,
}

impl Role {
    fn thread(self) -> &'static str {
        match self {
            Role::Discovery => "discovery",
            Role::Profiles => "symbolization",
        }
    }

    fn without(self) -> &'static str {
        match self {
            Role::Discovery => "tracked processes are still sampled; new ones are not found",
            Role::Profiles => "windows are no longer built",
        }
    }
}

/// Decodes each event into its process's pending samples.
fn decoder<'a>(
    tracked: &'a mut HashMap<u32, Process>,
    settings: ProfileSettings,
    stats: &'a mut WindowStats,
) -> impl FnMut(&pipeline::Tracked, &Event) + 'a {
    move |t, e| {
        let Some(p) = tracked.get_mut(&t.pid) else { return };
        let s = sample_of(e, p.key_map.as_deref(), settings, &mut p.losses);
        if s.span_id.is_some() && !s.kind.is_off_cpu() {
            stats.with_span += 1;
        }
        p.pending.push(s);
    }
}

/// `discover(pid)` on a thread of its own, given up after `timeout` (the thread is left behind).
fn discover_within(pid: u32, timeout: Duration) -> Result<Discovery, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("discover".into())
        .spawn(move || {
            // Nobody may be listening any more (timed out): nothing to do then.
            let _ = tx.send(discover(pid as i32));
        })
        .map_err(|e| e.to_string())?;
    match rx.recv_timeout(timeout) {
        Ok(Ok(d)) => Ok(d),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("reading the process did not finish within {:.0}s (the target blocks the read)", timeout.as_secs_f64())),
    }
}

fn service_name_of(resource: &Resource) -> String {
    resource
        .attributes
        .iter()
        .find(|kv| kv.key == "service.name")
        .and_then(|kv| kv.value.as_ref())
        .and_then(crate::discovery::process_context_proto::as_str)
        .unwrap_or("unknown_service")
        .to_string()
}

fn unix_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
