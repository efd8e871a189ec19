//! `thread-ctx agent`: continuous profiling of every process on the host that
//! publishes span context (or of `--pid`s), one window every `--interval`,
//! streamed as OTLP/Profiles to a Collector and/or written as pprof files.
//! One status line per window on stderr, each line after its time (RFC 3339);
//! SIGTERM/SIGINT send the last window and exit 0.

use crate::console::say_stamped;
use crate::duration::{parse_duration, parse_interval};
use crate::exit_codes::usage;
use crate::metrics_server;
use crate::sampling_args::SamplingArgs;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use thread_ctx_agent::{Agent, AgentOptions};
use thread_ctx_otlp::{ConfigError, Exporter, ExporterConfig, OtlpSink, Overrides};
use thread_ctx_output::pprof_dir::PprofDir;
use thread_ctx_profile::sink::{SinkError, Sinks, WindowSink};
use thread_ctx_profile::window::Window;

/// How long the last window may take to reach the endpoint after SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Host-wide discovery looks for new processes at least this often.
const MAX_SCAN_INTERVAL: Duration = Duration::from_secs(5);

#[derive(clap::Args, Debug)]
pub struct AgentArgs {
    /// Profile only this process (repeatable). Without it: every process on the host that
    /// publishes an OTEP 4719 process context or maps an object defining otel_thread_ctx_v1.
    #[arg(long = "pid", value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pids: Vec<u32>,
    /// Samples per second on each CPU. The default, 19, is a prime: sampling does not fall into
    /// step with timers and periodic work (which run at round rates such as 10, 50 or 100 Hz)
    /// and so neither over- nor under-counts them; it is also the cheapest rate that still
    /// gives a few hundred samples per busy core per window.
    #[arg(long, default_value_t = 19, value_parser = clap::value_parser!(u32).range(1..=999))]
    pub hz: u32,
    /// Length of one window: one profile per process per window (at least 1s; 10s or more in production).
    #[arg(long, default_value = "10s", value_parser = parse_interval)]
    pub interval: Duration,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// OTLP endpoint (over OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT),
    /// e.g. http://localhost:4317 for gRPC or http://localhost:4318 for HTTP.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// OTLP protocol, `grpc` or `http/protobuf` (over OTEL_EXPORTER_OTLP_{PROFILES_,}PROTOCOL).
    #[arg(long, value_name = "PROTOCOL")]
    pub protocol: Option<String>,
    /// Also write one gzipped pprof per process per window into DIR. Given alone (no
    /// --endpoint and no OTEL_EXPORTER_OTLP_*ENDPOINT), nothing is sent over OTLP.
    #[arg(long, value_name = "DIR")]
    pub pprof_dir: Option<PathBuf>,
    /// Stop after this long (default: run until SIGTERM or SIGINT).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// How long reading one process (finding its writer, symbolizing its stacks) may block
    /// before that process is skipped for good, with one line saying so.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub process_timeout: Duration,
    /// Serve the agent's own metrics (Prometheus text, /metrics) and its health (/healthz) on
    /// this loopback address, e.g. 127.0.0.1:9465 (over THREAD_CTX_AGENT_METRICS_ADDR).
    #[arg(long, value_name = "IP:PORT", env = "THREAD_CTX_AGENT_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Let --metrics-addr be an address other than loopback (a pod's own IP for its probes).
    #[arg(long, env = "THREAD_CTX_AGENT_METRICS_ALLOW_REMOTE")]
    pub metrics_allow_remote: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

pub fn run(args: AgentArgs) -> Result<ExitCode> {
    // Before the BPF programs load: a bad or busy address is a usage error.
    let metrics = match &args.metrics_addr {
        Some(addr) => metrics_server::start(metrics_server::parse_addr(addr, args.metrics_allow_remote)?, args.interval)
            .map_err(|e| say_stamped!("thread-ctx agent: {e}"))
            .ok(),
        None => None,
    };
    if let Some(dir) = args.pprof_dir.as_ref().filter(|d| !d.is_dir()) {
        return Err(usage(format!("--pprof-dir: {} is not a directory", dir.display())));
    }
    // Before the BPF programs load: a directory the agent cannot read the mode of is a usage error.
    let mut files_sink = match args.pprof_dir.clone().map(PprofDir::open).transpose() {
        Ok(sink) => sink.map(|(sink, note)| {
            if let Some(note) = note {
                say_stamped!("thread-ctx agent: {note}");
            }
            sink
        }),
        Err(e) => return Err(usage(format!("--pprof-dir: {e}"))),
    };
    let exporter = exporter_for(&args)?;
    let opts = AgentOptions {
        sampler: args.sampling.options(args.hz, true),
        interval: args.interval,
        scan_interval: args.interval.min(MAX_SCAN_INTERVAL),
        pids: args.pids.clone(),
        process_timeout: args.process_timeout,
    };
    let mut agent = Agent::start(opts).context("starting the agent")?;
    if let Some(m) = &metrics {
        m.lock().unwrap_or_else(|e| e.into_inner()).ready();
    }
    // SAFETY: installing async-signal-safe handlers that only store an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_stop_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_stop_signal as *const () as libc::sighandler_t);
    }
    let target = if args.pids.is_empty() { "every process that publishes span context".to_string() } else { format!("pids {:?}", args.pids) };
    let sink = match &exporter {
        Some(e) => format!("OTLP {}", e.description()),
        None => "no OTLP export".into(),
    };
    let files = args.pprof_dir.as_ref().map(|d| format!(", pprof files in {}", d.display())).unwrap_or_default();
    let alloc = if args.sampling.alloc { ", allocations" } else { "" };
    say_stamped!("thread-ctx agent: sampling {target} at {} Hz{alloc}, {}s windows, {sink}{files}", args.hz, args.interval.as_secs_f64());
    let end = args.duration.map(|d| Instant::now() + d);
    let stop = || STOP.load(Ordering::Relaxed) || end.is_some_and(|e| Instant::now() >= e);
    let mut last_error = None;
    // The exporter's counters are read through this handle; the sink owns the exporter.
    let mut otlp = exporter.map(|exporter| OtlpSink { exporter });
    let mut notes = ProcessNotes;
    loop {
        let until = end.map_or(agent.window_end(), |e| e.min(agent.window_end()));
        agent.run_until(until, &stop, &mut sinks(&mut notes, &mut otlp, &mut files_sink))?;
        let stats = agent.end_window()?;
        for note in agent.take_notes() {
            say_stamped!("thread-ctx agent: {note}");
        }
        let export = otlp.as_ref().map(|o| o.exporter.stats());
        say_stamped!("{}", stats.status_line(export.as_ref(), &mut last_error));
        if let Some(m) = &metrics {
            let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
            m.metrics.add_window(&stats, export.as_ref(), agent.pipeline().outstanding());
            m.window_ended();
        }
        if stop() || agent.all_given_exited() {
            break;
        }
    }
    // The last window: symbolized and handed over, then sent.
    let unfinished = agent.finish(SHUTDOWN_GRACE, &mut sinks(&mut notes, &mut otlp, &mut files_sink));
    if unfinished > 0 {
        say_stamped!("thread-ctx agent: {unfinished} windows were still being symbolized at exit and are lost");
    }
    if let Some(o) = otlp {
        let stats = o.exporter.shutdown(SHUTDOWN_GRACE);
        say_stamped!("thread-ctx agent: stopped; {stats}");
    } else {
        say_stamped!("thread-ctx agent: stopped");
    }
    Ok(ExitCode::SUCCESS)
}

/// The sinks every window goes to: the once-per-process notes on stderr, OTLP and/or pprof files.
fn sinks<'a>(notes: &'a mut ProcessNotes, otlp: &'a mut Option<OtlpSink>, files: &'a mut Option<PprofDir>) -> Sinks<'a> {
    Sinks(
        std::iter::once(notes as &mut dyn WindowSink)
            .chain(otlp.as_mut().map(|s| s as &mut dyn WindowSink))
            .chain(files.as_mut().map(|s| s as &mut dyn WindowSink))
            .collect(),
    )
}

/// Notes that hold for a process's life (e.g. JS frames nothing can name), printed once per
/// process: they come with the first window they apply to.
struct ProcessNotes;

impl WindowSink for ProcessNotes {
    fn write(&mut self, w: &Window) -> Result<(), SinkError> {
        for note in w.processes.iter().flat_map(|p| &p.profile.process_notes) {
            say_stamped!("thread-ctx agent: {note}");
        }
        Ok(())
    }
}

/// The exporter, None when only pprof files were asked for; a bad setting is a usage error
/// naming it.
fn exporter_for(args: &AgentArgs) -> Result<Option<Exporter>> {
    let env_endpoint =
        ["OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"].iter().any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()));
    if args.pprof_dir.is_some() && args.endpoint.is_none() && !env_endpoint {
        return Ok(None);
    }
    let overrides = Overrides { endpoint: args.endpoint.clone(), protocol: args.protocol.clone(), ..Default::default() };
    let config = ExporterConfig::from_env(&overrides).map_err(|e| {
        // Name our flag where the transport says "override".
        let flag = match &e {
            ConfigError::Endpoint { .. } => "--endpoint",
            ConfigError::Protocol { .. } => "--protocol",
            _ => "override",
        };
        usage(e.to_string().replacen("override", flag, 1))
    })?;
    if let Some(note) = config.port_note() {
        say_stamped!("thread-ctx agent: note: {note}");
    }
    Exporter::start(config).map(Some).map_err(|e| usage(e.to_string()))
}
