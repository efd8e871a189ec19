//! `thread-ctx record PID`: samples the target's CPU with the eBPF sampler and
//! prints a summary (grouped by a record attribute, the trace or the span) or
//! JSON lines; with stacks, also the profile outputs of [`crate::profile_args`]
//! (pprof, flame graph, folded).
//!
//! `record TID` with the id of a thread that is not its process's main
//! thread records that thread only (and says whose thread it is): the user
//! named one thread, so its samples alone answer the question, and the
//! sampler tracks processes, so the process is tracked and the thread kept.

use crate::duration::parse_duration;
use crate::exit_codes::{discover_live, no_symbol, thread_group_of, usage};
use crate::profile_args::ProfileArgs;
use anyhow::{Context, Result};
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use thread_ctx_discovery::container::read_placement;
use thread_ctx_discovery::host_scan::ProcessKey;
use thread_ctx_output::selection::selection_summary;
use thread_ctx_output::summary::{GroupBy, RunInfo, Summary};
use thread_ctx_output::{pprof, top};
use thread_ctx_profile::pipeline::{process_alive, Identity, Pipeline, Symbolize};
use thread_ctx_profile::symbolized::monotonic_to_unix_ns;
use thread_ctx_profile::{Frame, Symbolizer};
use thread_ctx_sampler::alloc_probe::{published_interval, unbiased_bytes, DEFAULT_INTERVAL};
use thread_ctx_sampler::{Event, SamplerOptions};

/// How often the run loop looks at the clock, Ctrl-C and the target.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// Target process id; the id of one of its threads records that thread only.
    #[arg(value_parser = clap::value_parser!(i32).range(1..))]
    pub pid: i32,
    /// Samples per second on each CPU (1..=999; a prime avoids lockstep with periodic work).
    #[arg(long, default_value_t = 49, value_parser = clap::value_parser!(u32).range(1..=999))]
    pub hz: u32,
    /// How long to sample, e.g. 10s, 500ms, 2m, 1h (a bare number is seconds). Ctrl-C ends early.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Output: a `summary` table, or `jsonl` (one JSON object per sample).
    #[arg(long, value_enum, default_value_t = Format::Summary)]
    pub format: Format,
    /// Summary rows: `span` (each span instance), `trace`, or a record attribute by its key,
    /// e.g. http.route [default: http.route when the process registered it, else trace].
    #[arg(long, value_name = "span|trace|ATTR", value_parser = GroupBy::parse)]
    pub by: Option<GroupBy>,
    /// Summary rows shown; the rest are added up in one "other" row (0: all).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// jsonl: each sample's symbolized frames too (leaf first).
    #[arg(long)]
    pub frames: bool,
    /// Do not capture user stacks (cheaper samples).
    #[arg(long)]
    pub no_user_stacks: bool,
    /// Measure the BPF program's own cost (run time per sample) and print it at the end.
    #[arg(long)]
    pub bpf_stats: bool,
    #[command(flatten)]
    pub profile: ProfileArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Summary,
    Jsonl,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Deadline,
    Stopped,
    TargetExited,
    ThreadExited,
}

pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let plan = args.profile.plan(!args.no_user_stacks)?;
    if args.frames && (args.format != Format::Jsonl || args.no_user_stacks) {
        return Err(usage("--frames: gives each jsonl sample its frames: use it with --format jsonl and user stacks"));
    }
    if args.format == Format::Jsonl && (args.by.is_some() || args.top != 10) {
        return Err(usage("--by/--top: shape the summary: drop them for --format jsonl"));
    }
    // A thread's id: record its process, keep that thread's samples.
    let (pid, tid) = match thread_group_of(args.pid) {
        Some(pid) => (pid, Some(args.pid as u32)),
        None => (args.pid, None),
    };
    let d = discover_live(pid)?;
    if let Some(tid) = tid {
        eprintln!("thread-ctx: {tid} is a thread of process {pid}: recording that thread only (`record {pid}` records them all)");
    }
    let writer = d.sampled_writer().map_err(anyhow::Error::msg)?;
    let Some(writer) = writer else {
        return Err(no_symbol(&d));
    };
    for other in d.writers.iter().filter(|w| !std::ptr::eq(*w, writer)) {
        eprintln!("thread-ctx: warning: also defined by {}, which is not sampled (one writer object per process)", other.path);
    }
    let opts = SamplerOptions {
        hz: args.hz,
        user_stacks: !args.no_user_stacks,
        kernel_stacks: args.profile.kernel,
        off_cpu: args.profile.off_cpu,
        alloc: args.profile.alloc,
    };
    let alloc_interval = d.context().and_then(published_interval);
    let key_map = d.key_map().map(<[String]>::to_vec);
    let service_name = d.service_name().map(str::to_string);
    let by = args.by.clone().unwrap_or_else(|| GroupBy::default_for(key_map.as_deref()));
    let key = ProcessKey::of(pid as u32).ok_or_else(|| anyhow::anyhow!("process {pid} exited before it could be sampled"))?;
    let mut pipeline =
        Pipeline::start(opts, if plan.symbolize { Symbolize::Inline } else { Symbolize::Never }).context("starting the eBPF sampler")?;
    if args.bpf_stats {
        pipeline.sampler_mut().enable_run_time_stats()?;
    }
    // The recording starts when tracking does: taken after it, a sample the kernel sent while
    // this thread was switched out between the two would carry a time before the profile's start.
    let started_unix = std::time::SystemTime::now();
    let started = Instant::now();
    let identity = Identity { service_name: service_name.clone().unwrap_or_default(), ..Default::default() };
    pipeline.track(key, &d, identity).with_context(|| format!("sampling process {pid}"))?;
    if let Some(tid) = tid {
        pipeline.keep_only_thread(pid as u32, tid);
    }
    pipeline.probe_allocations(pid as u32, None);
    for line in pipeline.take_alloc_reports() {
        eprintln!("thread-ctx: --alloc: {line}; the CPU profile goes on");
    }
    if args.profile.alloc && pipeline.alloc_probed(pid as u32) && alloc_interval.is_none() {
        eprintln!(
            "thread-ctx: --alloc: process {pid} publishes no heap sampling interval (is the package's `allocations` option on?); bytes assume {DEFAULT_INTERVAL}"
        );
    }
    if let Some(sym) = pipeline.get(pid as u32).and_then(|t| t.symbolizer()) {
        // Warn now, not after the recording, when a Node target's JS frames will stay unnamed.
        if sym.runs_v8() {
            if let Some(note) = sym.perf_map_note() {
                eprintln!("thread-ctx: warning: {note}");
            }
        }
    }
    // SAFETY: installing an async-signal-safe handler that only stores an atomic.
    unsafe { libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t) };

    let stdout = std::io::stdout();
    let mut live = Live {
        summary: Summary::new(by.clone(), key_map.as_deref()),
        out: std::io::BufWriter::new(stdout.lock()),
        jsonl: args.format == Format::Jsonl,
        key_map: key_map.clone(),
        tid,
        monotonic_to_unix_ns: monotonic_to_unix_ns(),
        alloc_interval: alloc_interval.unwrap_or(DEFAULT_INTERVAL),
        // Its own symbolizer: the pipeline's names samples in batches, a line needs its frames now.
        frames: if args.frames { Some(Symbolizer::new(pid).context("--frames: symbolizing")?) } else { None },
        write_error: None,
    };
    live.summary.set_off_cpu_traced(args.profile.off_cpu);
    live.summary.set_alloc_traced(args.profile.alloc, alloc_interval);
    let deadline = started + args.duration;
    let end = loop {
        if Instant::now() >= deadline {
            break End::Deadline;
        }
        if INTERRUPTED.load(Ordering::Relaxed) || live.stdout_closed() {
            break End::Stopped;
        }
        if !process_alive(pid as u32) {
            break End::TargetExited;
        }
        if tid.is_some_and(|t| !std::path::Path::new(&format!("/proc/{pid}/task/{t}")).exists()) {
            break End::ThreadExited;
        }
        let wait = POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now()));
        pipeline.poll(wait, &mut |_, e| live.on_event(e))?;
    };
    pipeline.poll(Duration::ZERO, &mut |_, e| live.on_event(e))?;
    let seconds = started.elapsed().as_secs_f64();
    // A reader that closed our stdout (`| head`) ends the recording, quietly: it has what it wanted.
    let stdout_closed = live.stdout_closed();
    let Live { summary, mut out, write_error, .. } = live;
    if let Some(e) = write_error.filter(|_| !stdout_closed) {
        return Err(e).context("writing samples to stdout");
    }
    let counters = pipeline.sampler().counters()?;
    let dropped = counters.all_dropped();
    let placement = read_placement(pid).ok();
    let info = RunInfo {
        pid: pid as u32,
        tid,
        hz: args.hz,
        cpus: pipeline.sampler().cpus(),
        seconds,
        dropped,
        service_name: service_name.as_deref(),
        placement: placement.as_ref(),
        top: args.top,
    };
    pipeline.end_window(started_unix.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64), (seconds * 1e9) as u64);
    let profile = pipeline.take_windows().into_iter().flat_map(|w| w.processes).map(|p| p.profile).next();
    let mut outputs = Ok(());
    if let Some(p) = &profile {
        let meta = pprof::Meta {
            service_name: service_name.clone(),
            start_unix_ns: started_unix.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64),
            duration_ns: (seconds * 1e9) as i64,
            comments: vec![format!("thread-ctx record {} --hz {}", args.pid, args.hz)],
        };
        let subtitle = if args.profile.alloc {
            let a = summary.alloc().total();
            format!("pid {pid}, {} allocation samples standing for {:.1} MB over {seconds:.1} s", a.samples, a.bytes as f64 / 1e6)
        } else {
            format!("pid {pid}, {} CPU samples at {} Hz over {seconds:.1} s", summary.total(), args.hz)
        };
        outputs = args.profile.files.write(p, &plan.filter, &meta, &subtitle);
    }
    let top_frames = profile.as_ref().map(|p| top::top_frames(p, &by, 3));
    let mut written = Ok(());
    match args.format {
        Format::Summary => {
            let selection = profile.as_ref().and_then(|p| selection_summary(p, &plan.filter, &by, args.hz, args.top)).unwrap_or_default();
            written = write!(out, "{}{selection}", summary.render(&info, top_frames.as_ref()));
        }
        Format::Jsonl if stdout_closed => {}
        Format::Jsonl => {
            let alloc = summary.alloc();
            let alloc = if args.profile.alloc {
                format!(", {} allocation samples ({} without a span context)", alloc.total().samples, alloc.no_span().samples)
            } else {
                String::new()
            };
            eprintln!(
                "thread-ctx: {} samples ({} without a span context){alloc}, {} dropped (ring buffer full)",
                summary.total(),
                summary.no_context(),
                dropped
            )
        }
    }
    match written.and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {} // nobody reads stdout any more
        r => r.context("writing to stdout")?,
    }
    for note in profile.iter().flat_map(|p| &p.notes) {
        eprintln!("thread-ctx: note: {note}");
    }
    if pipeline.undecodable > 0 {
        eprintln!("thread-ctx: warning: {} ring-buffer events did not decode (sampler ABI mismatch)", pipeline.undecodable);
    }
    if args.bpf_stats {
        print_bpf_stats(&pipeline, summary.total())?;
    }
    match end {
        End::TargetExited => eprintln!("thread-ctx: process {pid} exited after {seconds:.1} s; sampling stopped"),
        End::ThreadExited => eprintln!("thread-ctx: thread {} of process {pid} exited after {seconds:.1} s; sampling stopped", args.pid),
        End::Stopped if stdout_closed => {}
        End::Stopped => eprintln!("thread-ctx: interrupted after {seconds:.1} s"),
        End::Deadline => {}
    }
    outputs?;
    Ok(ExitCode::SUCCESS)
}

/// What the run prints as events arrive: the summary's counts and, for jsonl, each event.
struct Live<W: Write> {
    summary: Summary,
    out: W,
    jsonl: bool,
    key_map: Option<Vec<String>>,
    /// Only this thread's events count.
    tid: Option<u32>,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC: the events' times as wall-clock times.
    monotonic_to_unix_ns: i64,
    /// The process's mean heap sampling interval: the bytes an allocation sample stands for.
    alloc_interval: u64,
    /// `--frames`: names each jsonl sample's stack.
    frames: Option<Symbolizer>,
    write_error: Option<std::io::Error>,
}

impl<W: Write> Live<W> {
    fn on_event(&mut self, e: &Event) {
        if self.tid.is_some_and(|t| t != e.tid) {
            return;
        }
        self.summary.add(e);
        if self.jsonl && self.write_error.is_none() {
            let mut line = e.to_json(self.key_map.as_deref());
            line["time_unix_nano"] = json!((e.time_ns as i64).saturating_add(self.monotonic_to_unix_ns).max(0));
            if let Some(size) = e.alloc_size() {
                line["bytes"] = json!(unbiased_bytes(size, self.alloc_interval));
            }
            if let Some(sym) = self.frames.as_mut() {
                let kernel = e.kernel_stack.as_deref().map(|s| sym.kernel_frames(s)).unwrap_or_default();
                let user = e.user_stack.as_deref().map(|s| sym.user_frames(s)).unwrap_or_default();
                line["frames"] = kernel.iter().chain(&user).map(frame_json).collect();
            }
            if let Err(err) = writeln!(self.out, "{line}") {
                self.write_error = Some(err);
            }
        }
    }

    fn stdout_closed(&self) -> bool {
        self.write_error.as_ref().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// One frame of a `--frames` jsonl line.
fn frame_json(f: &Frame) -> serde_json::Value {
    json!({
        "kind": format!("{:?}", f.kind).to_lowercase(),
        "name": f.name,
        "file": f.file,
        "line": f.source_line(),
        "column": f.pos.map_or(f.column, |p| p.column),
        "function_line": f.line,
        // Source-mapped: where V8 ran it (file and lines above are the original source's).
        "generated": f.generated.as_ref().map(|g| json!({
            "file": g.file, "line": g.pos.map_or(g.line, |p| Some(p.line)), "column": g.pos.map_or(g.column, |p| p.column), "function_line": g.line,
        })),
    })
}

fn print_bpf_stats(pipeline: &Pipeline, target_samples: u64) -> Result<()> {
    let st = pipeline.sampler().program_stats()?;
    let per = if st.run_cnt == 0 { 0.0 } else { st.run_time_ns as f64 / st.run_cnt as f64 };
    // run_cnt counts every cpu-clock tick on the sampled CPUs, the target's or not.
    eprintln!("thread-ctx: BPF program: {} runs, {} ns total, {per:.0} ns per run", st.run_cnt, st.run_time_ns);
    if target_samples > 0 {
        // An upper bound: run_time_ns includes the cheap runs on other processes' ticks.
        eprintln!("thread-ctx: BPF program: <= {:.0} ns per sample of the target", st.run_time_ns as f64 / target_samples as f64);
        // Exact for the target: the program's own clock around its runs on the target's ticks.
        let timed = pipeline.sampler().counters()?;
        let ticks = timed.total() + timed.dropped;
        if ticks > 0 {
            eprintln!("thread-ctx: BPF program: {:.0} ns per sample of the target (its own clock)", timed.cpu_sample_ns as f64 / ticks as f64);
        }
    }
    if let Some(st) = pipeline.sampler().off_cpu_program_stats()? {
        let per = if st.run_cnt == 0 { 0.0 } else { st.run_time_ns as f64 / st.run_cnt as f64 };
        eprintln!("thread-ctx: off-CPU program: {} context switches seen, {} ns total, {per:.0} ns per switch", st.run_cnt, st.run_time_ns);
    }
    Ok(())
}
