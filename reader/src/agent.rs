//! Continuous profiling of every process that publishes span context (or of
//! given pids), in windows: the [`Pipeline`] samples them all with one set of
//! per-CPU events, [`HostScanner`] finds new ones every scan interval, exited
//! ones are dropped once their last samples are in a window, and every
//! interval [`Agent::take_window`] hands over one profile per process for the
//! outputs (OTLP, pprof files).

use crate::discovery::host_scan::{HostScanner, ProcessKey};
use crate::output::printable::printable;
use crate::discovery::{discover, process_context::read_process_context, maps::read_maps};
use crate::output::otlp::{host_name, resource_of};
use crate::pipeline::{Pipeline, Tracked};
use crate::profile::Profile;
use crate::sampler::{Counters, SamplerOptions, MAX_TARGETS};
use opentelemetry_proto::tonic::resource::v1::Resource;
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the loop waits for events at most before looking at the clock again.
const POLL: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub sampler: SamplerOptions,
    /// Length of a window.
    pub interval: Duration,
    /// How often host-wide discovery looks for new processes (and every mode for exited ones).
    pub scan_interval: Duration,
    /// Only these processes; empty: every process on the host that publishes.
    pub pids: Vec<u32>,
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
    /// Processes tracked at the window's end, and those that started or stopped being tracked in it.
    pub processes: usize,
    pub new: usize,
    pub exited: usize,
    /// Processes that publish but could not be tracked (with why), and over the target limit.
    pub skipped: usize,
    /// Events delivered (CPU samples and off-CPU intervals) and lost.
    pub cpu_samples: u64,
    pub off_cpu_intervals: u64,
    pub dropped_ring_full: u64,
    /// Samples left out because a profile already held its maximum of distinct entries.
    pub dropped_entry_cap: u64,
}

pub struct Window {
    /// Wall clock, ns since the Unix epoch.
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    pub processes: Vec<WindowProcess>,
    pub stats: WindowStats,
}

pub struct Agent {
    pipeline: Pipeline,
    opts: AgentOptions,
    scanner: Option<HostScanner>,
    keys: HashMap<u32, ProcessKey>,
    /// Each tracked process's OTLP resource, made while it runs (its /proc entries go with it).
    resources: HashMap<u32, Resource>,
    /// Processes that publish but could not be tracked: not tried again.
    refused: HashMap<u32, ProcessKey>,
    /// Processes untracked during this window, their last profile still to hand over.
    exited: Vec<Tracked>,
    host_name: String,
    window_start: Instant,
    window_start_unix_ns: u64,
    next_scan: Instant,
    counters_at_start: Counters,
    stats: WindowStats,
    /// Things worth a line on stderr (a process tracked, skipped, or gone), taken by the caller.
    notes: Vec<String>,
}

impl Agent {
    /// Loads the sampler and tracks what there is to track now (the given pids,
    /// or every publishing process). A given pid that cannot be tracked is an error.
    pub fn start(opts: AgentOptions) -> anyhow::Result<Agent> {
        let pipeline = Pipeline::start(opts.sampler)?;
        let mut agent = Agent {
            pipeline,
            scanner: opts.pids.is_empty().then(HostScanner::new),
            keys: HashMap::new(),
            refused: HashMap::new(),
            resources: HashMap::new(),
            exited: Vec::new(),
            host_name: host_name(),
            window_start: Instant::now(),
            window_start_unix_ns: unix_now_ns(),
            next_scan: Instant::now(),
            counters_at_start: Counters::default(),
            stats: WindowStats::default(),
            notes: Vec::new(),
            opts,
        };
        for pid in agent.opts.pids.clone() {
            let key = ProcessKey::of(pid).ok_or_else(|| anyhow::anyhow!("--pid {pid}: no such process (expected the pid of a running process)"))?;
            agent.track(key).map_err(|e| anyhow::anyhow!("--pid {pid}: {e}"))?;
        }
        agent.scan();
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
        !self.opts.pids.is_empty() && self.keys.is_empty()
    }

    /// Lines for stderr since the last call.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Samples until `deadline` or until `stop` says so, tracking new
    /// processes and untracking exited ones along the way.
    pub fn run_until(&mut self, deadline: Instant, stop: &dyn Fn() -> bool) -> anyhow::Result<()> {
        while Instant::now() < deadline && !stop() {
            let wait = POLL.min(deadline.saturating_duration_since(Instant::now()));
            self.pipeline.poll(wait, &mut |_, _| {})?;
            if Instant::now() >= self.next_scan {
                self.scan();
            }
        }
        Ok(())
    }

    /// Ends the current window: every process's profile since the window
    /// began (exited ones included, for the last time), and starts the next.
    pub fn take_window(&mut self) -> anyhow::Result<Window> {
        self.pipeline.poll(Duration::ZERO, &mut |_, _| {})?;
        self.drop_exited()?;
        let duration_ns = self.window_start.elapsed().as_nanos() as u64;
        let mut processes = Vec::new();
        for pid in self.pipeline.pids() {
            let Some(t) = self.pipeline.get_mut(pid) else { continue };
            let profile = t.builder.as_mut().map(|b| b.take());
            let t = self.pipeline.get(pid).unwrap();
            if let Some(profile) = profile {
                processes.push(self.window_process(t, profile, false));
            }
        }
        for mut t in std::mem::take(&mut self.exited) {
            if let Some(profile) = t.builder.as_mut().map(|b| b.take()) {
                processes.push(self.window_process(&t, profile, true));
            }
            self.resources.remove(&t.pid);
        }
        let counters = self.pipeline.sampler().counters()?;
        let delta = counters.since(&self.counters_at_start);
        let mut stats = std::mem::take(&mut self.stats);
        stats.processes = self.keys.len();
        stats.cpu_samples = delta.total();
        stats.off_cpu_intervals = delta.off_cpu_sent;
        stats.dropped_ring_full = delta.all_dropped();
        stats.dropped_entry_cap = processes.iter().map(|p| p.profile.dropped_samples).sum();
        processes.retain(|p| p.profile.total_count() > 0);
        let window = Window { start_unix_ns: self.window_start_unix_ns, duration_ns, processes, stats };
        self.counters_at_start = counters;
        self.begin_window();
        Ok(window)
    }

    fn begin_window(&mut self) {
        self.window_start = Instant::now();
        self.window_start_unix_ns = unix_now_ns();
    }

    fn window_process(&self, t: &Tracked, profile: Profile, exited: bool) -> WindowProcess {
        let resource = self.resources.get(&t.pid).cloned().unwrap_or_else(|| resource_of(&t.discovery, &self.host_name));
        let service_name = resource
            .attributes
            .iter()
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref())
            .and_then(crate::discovery::process_context_proto::as_str)
            .unwrap_or("unknown_service")
            .to_string();
        WindowProcess { pid: t.pid, service_name, resource, profile, exited }
    }

    /// Looks for exited processes and (host-wide) new ones; refreshes the key
    /// maps of tracked ones (a service registers attribute keys as it goes).
    fn scan(&mut self) {
        self.next_scan = Instant::now() + self.opts.scan_interval;
        if let Err(e) = self.drop_exited() {
            self.notes.push(format!("untracking exited processes: {e:#}"));
        }
        self.refresh_key_maps();
        let Some(mut scanner) = self.scanner.take() else { return };
        self.refused.retain(|_, k| k.alive());
        let found = scanner.scan(&|pid| self.keys.contains_key(&pid) || self.refused.contains_key(&pid));
        self.scanner = Some(scanner);
        for key in found {
            if self.keys.len() >= MAX_TARGETS {
                self.stats.skipped += 1;
                continue;
            }
            if let Err(e) = self.track(key) {
                self.stats.skipped += 1;
                self.refused.insert(key.pid, key);
                self.notes.push(format!("process {}: not sampled: {}", key.pid, printable(&format!("{e:#}"))));
            }
        }
    }

    fn track(&mut self, key: ProcessKey) -> anyhow::Result<()> {
        let d = discover(key.pid as i32)?;
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
        let mut d = d;
        if d.sampled_writer().is_err() {
            // Writers that do not resolve still leave the process's stacks worth sampling.
            d.writers.clear();
        }
        let resource = resource_of(&d, &self.host_name);
        self.pipeline.track(d)?;
        self.keys.insert(key.pid, key);
        self.resources.insert(key.pid, resource);
        self.stats.new += 1;
        self.notes.push(format!("tracking process {} ({}): {}", key.pid, printable(&service), printable(&what)));
        Ok(())
    }

    fn drop_exited(&mut self) -> anyhow::Result<()> {
        let gone: Vec<u32> = self.keys.iter().filter(|(_, k)| !k.alive()).map(|(pid, _)| *pid).collect();
        for pid in gone {
            self.keys.remove(&pid);
            if let Some(t) = self.pipeline.untrack(pid, &mut |_, _| {})? {
                self.notes.push(format!("process {pid} exited; its last samples go out with this window"));
                self.stats.exited += 1;
                self.exited.push(t);
            }
        }
        Ok(())
    }

    fn refresh_key_maps(&mut self) {
        for pid in self.pipeline.pids() {
            let Ok(maps) = read_maps(pid as i32) else { continue };
            let Ok(Some(pc)) = read_process_context(pid as i32, &maps) else { continue };
            if let Some(t) = self.pipeline.get_mut(pid) {
                let changed = t.discovery.key_map() != pc.attribute_key_map.as_deref()
                    || t.discovery.context().map(|c| c.published_at_ns) != Some(pc.published_at_ns);
                if changed {
                    if let Some(b) = t.builder.as_mut() {
                        b.set_key_map(pc.attribute_key_map.as_deref());
                    }
                    t.discovery.process_context = Some(Ok(pc));
                    let resource = resource_of(&t.discovery, &self.host_name);
                    self.resources.insert(pid, resource);
                }
            }
        }
    }
}

fn unix_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
