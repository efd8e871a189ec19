//! `thread-ctx record PID`: samples the target's CPU with the eBPF sampler and
//! prints a summary (grouped by a record attribute, the trace or the span) or
//! JSON lines; with stacks, also the profile outputs of [`crate::profile_args`]
//! (pprof, flame graph, folded).
//!
//! A thin handler over library stages, as `agent` is: discovery finds the
//! target, a [`Recording`] runs the pipeline (decode, aggregate, the inline
//! symbolize stage) and shows each decoded sample to this command's
//! [`Observer`], which adds it to the summary and prints its jsonl line; the
//! recording's profile then goes to the output crate's files and tables.
//!
//! `record TID` with the id of a thread that is not its process's main
//! thread records that thread only (and says whose thread it is): the user
//! named one thread, so its samples alone answer the question, and the
//! sampler tracks processes, so the process is tracked and the thread kept.

use crate::console::{say, say_once};
use crate::duration::parse_duration;
use crate::exit_codes::usage;
use crate::profile_args::{ProfileArgs, ProfilePlan};
use crate::target::{self, Access};
use anyhow::{Context, Result};
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use thread_ctx_discovery::container::read_placement;
use thread_ctx_discovery::{process, Discovery};
use thread_ctx_output::jsonl::sample_line;
use thread_ctx_output::selection::selection_summary;
use thread_ctx_output::summary::{GroupBy, RunInfo, Summary};
use thread_ctx_output::{pprof, top};
use thread_ctx_profile::pipeline::{Identity, Symbolize, TrackedProcess};
use thread_ctx_profile::recording::{End, Observer, Recorded, Recording};
use thread_ctx_profile::symbolized::monotonic_to_unix_ns;
use thread_ctx_profile::{Profile, Sample};
use thread_ctx_sampler::alloc_probe::{published_interval, DEFAULT_INTERVAL};
use thread_ctx_sampler::Event;

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

pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let plan = args.plan()?;
    // A thread's id: record its process, keep that thread's samples.
    let (pid, tid) = match process::thread_group_of(args.pid) {
        Some(pid) => (pid, Some(args.pid as u32)),
        None => (args.pid, None),
    };
    let d = target::discover(pid, Access::Ebpf)?;
    if let Some(tid) = tid {
        say!("thread-ctx: {tid} is a thread of process {pid}: recording that thread only (`record {pid}` records them all)");
    }
    let writer = target::sampled_writer(&d, Access::Ebpf)?;
    for other in d.writers.iter().filter(|w| !std::ptr::eq(*w, writer)) {
        say!("thread-ctx: warning: also defined by {}, which is not sampled (one writer object per process)", other.path);
    }
    let by = group_by(args.by.clone(), &d)?;
    let identity = Identity { service_name: d.service_name().unwrap_or_default().to_string(), ..Default::default() };
    let options = args.profile.sampling.options(args.hz, !args.no_user_stacks);
    let symbolize = if plan.symbolize { Symbolize::Inline } else { Symbolize::Never };
    let mut recording = Recording::start(options, symbolize, &d, identity, tid)?;
    if args.bpf_stats {
        recording.pipeline_mut().sampler_mut().enable_run_time_stats()?;
    }
    warn_at_start(&mut recording, &d, &args);
    // SAFETY: installing an async-signal-safe handler that only stores an atomic.
    unsafe { libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t) };

    let mut live = Live {
        summary: Summary::new(by.clone()),
        out: std::io::BufWriter::new(std::io::stdout().lock()),
        jsonl: args.format == Format::Jsonl,
        frames: args.frames,
        monotonic_to_unix_ns: monotonic_to_unix_ns(),
        write_error: None,
    };
    live.summary.set_off_cpu_traced(args.profile.sampling.off_cpu);
    live.summary.set_alloc_traced(args.profile.sampling.alloc, alloc_interval(&d));
    let end = recording.run(args.duration, &mut live)?;
    let recorded = recording.finish(end)?;
    report(&args, &plan, &d, &by, recording, recorded, live)
}

impl RecordArgs {
    /// Checks the flags before anything is loaded; errors name the flag at fault.
    fn plan(&self) -> Result<ProfilePlan> {
        let plan = self.profile.plan(!self.no_user_stacks)?;
        if self.frames && (self.format != Format::Jsonl || self.no_user_stacks) {
            return Err(usage("--frames: gives each jsonl sample its frames: use it with --format jsonl and user stacks"));
        }
        if self.format == Format::Jsonl && (self.by.is_some() || self.top != 10) {
            return Err(usage("--by/--top: shape the summary: drop them for --format jsonl"));
        }
        Ok(plan)
    }
}

/// The summary's rows: `--by`, when the process's records can carry it, else the process's
/// default. A key the process never registered is refused before recording, naming those it did.
fn group_by(by: Option<GroupBy>, d: &Discovery) -> Result<GroupBy> {
    let Some(by) = by else { return Ok(GroupBy::default_for(d.key_map())) };
    if let (GroupBy::Attr(key), Some(keys)) = (&by, d.key_map()) {
        // `attr.N` names a key index the key map lacks (as the decode stage names it).
        let index_name = key.strip_prefix("attr.").is_some_and(|n| n.parse::<u8>().is_ok());
        if !keys.contains(key) && !index_name {
            let carried = if keys.is_empty() { "no attribute".to_string() } else { keys.join(", ") };
            return Err(usage(format!("--by {key}: no record of process {} carries {key}; they carry {carried}", d.pid)));
        }
    }
    Ok(by)
}

/// The mean heap sampling interval the process publishes (what its allocation samples were scaled by).
fn alloc_interval(d: &Discovery) -> Option<u64> {
    d.context().and_then(published_interval)
}

/// What the user should know before waiting for the recording: allocation probes that could
/// not be placed, and JS frames nothing will name.
fn warn_at_start(recording: &mut Recording, d: &Discovery, args: &RecordArgs) {
    let pid = d.pid;
    for line in recording.pipeline_mut().take_alloc_reports() {
        say!("thread-ctx: --alloc: {line}; the CPU profile goes on");
    }
    if args.profile.sampling.alloc && recording.pipeline().alloc_probed(pid as u32) && alloc_interval(d).is_none() {
        say!(
            "thread-ctx: --alloc: process {pid} publishes no heap sampling interval (is the package's `allocations` option on?); bytes assume {DEFAULT_INTERVAL}"
        );
    }
    let symbolizer = recording.process().and_then(TrackedProcess::symbolizer);
    if let Some(note) = symbolizer.and_then(|s| s.heap_fallback_note_once()) {
        say!("thread-ctx: {note}");
    }
    if let Some(note) = symbolizer.filter(|s| s.runs_v8()).and_then(|s| s.perf_map_note()) {
        say_once("thread-ctx: warning: ", &note);
    }
}

/// Everything the recording gives once it ended: files, the summary (or the jsonl closing
/// line), notes, and how it ended.
fn report<W: Write>(
    args: &RecordArgs,
    plan: &ProfilePlan,
    d: &Discovery,
    by: &GroupBy,
    recording: Recording,
    recorded: Recorded,
    live: Live<W>,
) -> Result<ExitCode> {
    let pid = d.pid;
    // A reader that closed our stdout (`| head`) ends the recording, quietly: it has what it wanted.
    let stdout_closed = live.stdout_closed();
    let Live { mut summary, mut out, write_error, .. } = live;
    if let Some(e) = write_error.filter(|_| !stdout_closed) {
        return Err(e).context("writing samples to stdout");
    }
    // No allocation sample, no interval published: the service never sampled its allocations.
    let alloc_off = args.profile.sampling.alloc && summary.alloc().total().samples == 0 && alloc_interval(d).is_none();
    if alloc_off {
        summary.set_alloc_traced(false, None);
    }
    let files = recorded.profile.as_ref().map_or(Ok(()), |p| write_files(args, plan, d, &recorded, p));
    let written = match args.format {
        Format::Summary => write!(out, "{}", summary_text(args, plan, d, by, &recording, &recorded, &summary)),
        Format::Jsonl if stdout_closed => Ok(()),
        Format::Jsonl => {
            say_jsonl_totals(args, &summary, recorded.dropped);
            Ok(())
        }
    };
    match written.and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {} // nobody reads stdout any more
        r => r.context("writing to stdout")?,
    }
    for note in recorded.profile.iter().flat_map(|p| &p.notes) {
        say_once("thread-ctx: note: ", note);
    }
    if let (GroupBy::Attr(key), None, false) = (by, d.key_map(), summary.key_carried()) {
        say!("thread-ctx: note: --by {key}: no record carried {key} (process {pid} publishes no attribute key map to name its keys)");
    }
    if recording.pipeline().undecodable > 0 {
        say!("thread-ctx: warning: {} ring-buffer events did not decode (sampler ABI mismatch)", recording.pipeline().undecodable);
    }
    if args.bpf_stats {
        print_bpf_stats(&recording, summary.total())?;
    }
    say_end(args, pid, &recorded, stdout_closed);
    files?;
    if alloc_off {
        return Err(usage(format!(
            "--alloc: process {pid} has not turned allocation sampling on (no allocation sample, and it publishes no heap sampling interval): \
             start it with the package's `allocations` option or OTEL_THREAD_CTX_ALLOCATIONS=1, or drop --alloc"
        )));
    }
    Ok(ExitCode::SUCCESS)
}

/// The profile files asked for, from the recording's profile.
fn write_files(args: &RecordArgs, plan: &ProfilePlan, d: &Discovery, recorded: &Recorded, profile: &Profile) -> Result<()> {
    let meta = pprof::Meta {
        service_name: d.service_name().map(str::to_string),
        start_unix_ns: recorded.start_unix_ns as i64,
        duration_ns: (recorded.seconds * 1e9) as i64,
        comments: vec![format!("thread-ctx record {} --hz {}", args.pid, args.hz)],
    };
    let subtitle = |counted: &str| format!("pid {} at {} Hz, {counted} over {:.1} s", d.pid, args.hz, recorded.seconds);
    args.profile.files.write(profile, &plan.filter, &meta, &subtitle)
}

/// The summary table, with each group's top frames, and the selection's own when one was made.
fn summary_text(
    args: &RecordArgs,
    plan: &ProfilePlan,
    d: &Discovery,
    by: &GroupBy,
    recording: &Recording,
    recorded: &Recorded,
    summary: &Summary,
) -> String {
    let placement = read_placement(d.pid).ok();
    let info = RunInfo {
        pid: d.pid as u32,
        tid: recording.tid(),
        hz: args.hz,
        cpus: recording.pipeline().sampler().cpus(),
        seconds: recorded.seconds,
        dropped: recorded.dropped,
        service_name: d.service_name(),
        placement: placement.as_ref(),
        top: args.top,
    };
    let profile = recorded.profile.as_ref();
    let top_frames = profile.map(|p| top::top_frames(p, by, 3));
    let selection = profile.and_then(|p| selection_summary(p, &plan.filter, args.profile.files.select.kind(p), by, args.hz, args.top));
    format!("{}{}", summary.render(&info, top_frames.as_ref()), selection.unwrap_or_default())
}

/// jsonl's closing line on stderr: what the lines on stdout add up to.
fn say_jsonl_totals(args: &RecordArgs, summary: &Summary, dropped: u64) {
    let alloc = summary.alloc();
    let alloc = if args.profile.sampling.alloc {
        format!(", {} allocation samples ({} without a span context)", alloc.total().samples, alloc.no_span().samples)
    } else {
        String::new()
    };
    say!("thread-ctx: {} samples ({} without a span context){alloc}, {dropped} dropped (ring buffer full)", summary.total(), summary.no_context());
}

/// How the recording ended, when not by its deadline (or by a reader that went away).
fn say_end(args: &RecordArgs, pid: i32, recorded: &Recorded, stdout_closed: bool) {
    let seconds = recorded.seconds;
    match recorded.end {
        End::TargetExited => say!("thread-ctx: process {pid} exited after {seconds:.1} s; sampling stopped"),
        End::ThreadExited => say!("thread-ctx: thread {} of process {pid} exited after {seconds:.1} s; sampling stopped", args.pid),
        End::Stopped if stdout_closed => {}
        End::Stopped => say!("thread-ctx: interrupted after {seconds:.1} s"),
        End::Deadline => {}
    }
}

/// What the recording shows of each sample as it arrives: the summary's counts and, for jsonl,
/// the sample's line.
struct Live<W: Write> {
    summary: Summary,
    out: W,
    jsonl: bool,
    /// `--frames`: each jsonl line names its stack, through the recording's own symbolize stage.
    frames: bool,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC: the samples' times as wall-clock times.
    monotonic_to_unix_ns: i64,
    write_error: Option<std::io::Error>,
}

impl<W: Write> Observer for Live<W> {
    fn sample(&mut self, process: &mut TrackedProcess, event: &Event, sample: &Sample) {
        self.summary.add(sample);
        if !self.jsonl || self.write_error.is_some() {
            return;
        }
        let frames = if self.frames { process.name_now(sample) } else { None };
        let line = sample_line(event.to_json(process.key_map()), sample, self.monotonic_to_unix_ns, frames.as_deref());
        if let Err(err) = writeln!(self.out, "{line}") {
            self.write_error = Some(err);
        }
    }

    fn stopped(&self) -> bool {
        INTERRUPTED.load(Ordering::Relaxed) || self.stdout_closed()
    }
}

impl<W: Write> Live<W> {
    fn stdout_closed(&self) -> bool {
        self.write_error.as_ref().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

fn print_bpf_stats(recording: &Recording, target_samples: u64) -> Result<()> {
    let sampler = recording.pipeline().sampler();
    let st = sampler.program_stats()?;
    let per = if st.run_cnt == 0 { 0.0 } else { st.run_time_ns as f64 / st.run_cnt as f64 };
    // run_cnt counts every cpu-clock tick on the sampled CPUs, the target's or not.
    say!("thread-ctx: BPF program: {} runs, {} ns total, {per:.0} ns per run", st.run_cnt, st.run_time_ns);
    if target_samples > 0 {
        // An upper bound: run_time_ns includes the cheap runs on other processes' ticks.
        say!("thread-ctx: BPF program: <= {:.0} ns per sample of the target", st.run_time_ns as f64 / target_samples as f64);
        // Exact for the target: the program's own clock around its runs on the target's ticks.
        let timed = sampler.counters()?;
        let ticks = timed.total() + timed.dropped;
        if ticks > 0 {
            say!("thread-ctx: BPF program: {:.0} ns per sample of the target (its own clock)", timed.cpu_sample_ns as f64 / ticks as f64);
        }
    }
    if let Some(st) = sampler.off_cpu_program_stats()? {
        let per = if st.run_cnt == 0 { 0.0 } else { st.run_time_ns as f64 / st.run_cnt as f64 };
        say!("thread-ctx: off-CPU program: {} context switches seen, {} ns total, {per:.0} ns per switch", st.run_cnt, st.run_time_ns);
        // Exact for the target, as for CPU samples: its own clock around the target's switches.
        let timed = sampler.counters()?;
        let intervals = timed.off_cpu_sent + timed.off_cpu_dropped;
        if intervals > 0 {
            say!(
                "thread-ctx: off-CPU program: {:.0} ns per off-CPU interval of the target (its own clock, out and in)",
                timed.off_cpu_ns as f64 / intervals as f64
            );
        }
    }
    Ok(())
}
