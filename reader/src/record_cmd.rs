//! `thread-ctx record PID`: samples the target's CPU with the eBPF sampler and
//! prints JSON lines or a per-trace/per-span summary; with stacks, also the
//! profile outputs of [`crate::profile::cli`] (pprof, flame graph, folded).

use crate::cli_support::{discover_live, report_no_symbol, EXIT_NO_SYMBOL};
use crate::discovery::Discovery;
use crate::profile::cli::ProfileArgs;
use crate::profile::{pprof, top, Collector, Symbolizer};
use crate::sampler::loader::ProfileOptions;
use crate::sampler::summary::RunInfo;
use crate::sampler::{RunEnd, Sampler, SamplerOptions, Summary};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};


#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// Target process id.
    #[arg(value_parser = clap::value_parser!(i32).range(1..))]
    pub pid: i32,
    /// Samples per second on each CPU (1..=999; a prime avoids lockstep with periodic work).
    #[arg(long, default_value_t = 49, value_parser = clap::value_parser!(u32).range(1..=999))]
    pub hz: u32,
    /// How long to sample, e.g. 10s, 500ms, 2m (a bare number is seconds). Ctrl-C ends early.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Output: a per-trace/per-span `summary` table, or `jsonl` (one JSON object per sample).
    #[arg(long, value_enum, default_value_t = Format::Summary)]
    pub format: Format,
    /// Do not capture user stack ids (cheaper samples).
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

pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("{s:?}: expected a duration like 10s, 500ms or 2m"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}, expected ms, s or m")),
    };
    let secs = value * scale;
    if !(secs > 0.0 && secs <= 86_400.0) {
        return Err(format!("{s:?}: expected a duration above 0 and at most 24 hours"));
    }
    Ok(Duration::from_secs_f64(secs))
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let pid = args.pid;
    let plan = args.profile.plan(!args.no_user_stacks)?;
    let d = discover_live(pid)?;
    let Some(access) = pick_access(&d)? else {
        report_no_symbol(pid);
        return Ok(ExitCode::from(EXIT_NO_SYMBOL));
    };
    let extra = ProfileOptions { kernel_stacks: args.profile.kernel, off_cpu: args.profile.off_cpu };
    let opts = SamplerOptions { pid: pid as u32, access, hz: args.hz, user_stacks: !args.no_user_stacks };
    let mut sampler = Sampler::start_with(opts, extra).with_context(|| format!("starting the eBPF sampler on process {pid}"))?;
    let mut collector = match plan.symbolize {
        true => Some(start_collector(pid, &d, &args)?),
        false => None,
    };
    let started_unix = std::time::SystemTime::now();
    if args.bpf_stats {
        sampler.enable_run_time_stats()?;
    }
    // SAFETY: installing an async-signal-safe handler that only stores an atomic.
    unsafe { libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t) };

    let key_map = d.key_map();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut summary = Summary::default();
    summary.set_off_cpu_traced(args.profile.off_cpu);
    let mut write_error = None;
    // A reader that closed our stdout (`| head`) ends the recording, quietly: it has what it wanted.
    let stdout_closed = std::cell::Cell::new(false);
    let started = Instant::now();
    let stop = || INTERRUPTED.load(Ordering::Relaxed) || stdout_closed.get();
    let outcome = sampler.run(started + args.duration, &stop, &mut |s| {
        summary.add(&s);
        if let Some(c) = collector.as_mut() {
            c.add(&sampler, &s);
        }
        if args.format == Format::Jsonl && write_error.is_none() {
            if let Err(e) = writeln!(out, "{}", s.to_json(key_map)) {
                stdout_closed.set(e.kind() == std::io::ErrorKind::BrokenPipe);
                write_error = Some(e);
            }
        }
    })?;
    let seconds = started.elapsed().as_secs_f64();
    if let Some(e) = write_error.filter(|_| !stdout_closed.get()) {
        return Err(e).context("writing samples to stdout");
    }
    let counters = sampler.counters()?;
    let off_cpu_dropped = sampler.off_cpu_counters()?.map_or(0, |c| c.dropped);
    let dropped = counters.dropped + off_cpu_dropped;
    let info = RunInfo { pid: pid as u32, hz: args.hz, cpus: sampler.cpus(), seconds, dropped, key_map };
    let profile = collector.map(Collector::finish);
    let mut outputs = Ok(());
    if let Some(p) = &profile {
        let meta = pprof::Meta {
            service_name: service_name(&d),
            start_unix_ns: started_unix.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64),
            duration_ns: (seconds * 1e9) as i64,
            comments: vec![format!("thread-ctx record {pid} --hz {}", args.hz)],
        };
        let subtitle = format!("pid {pid}, {} CPU samples at {} Hz over {seconds:.1} s", summary.total(), args.hz);
        outputs = args.profile.write(p, &plan.filter, &meta, &subtitle);
    }
    let top_frames = profile.as_ref().map(|p| top::top_frames(p, 3));
    let mut written = Ok(());
    match args.format {
        Format::Summary => written = write!(out, "{}", summary.render_with(&info, top_frames.as_ref())),
        Format::Jsonl if stdout_closed.get() => {}
        Format::Jsonl => eprintln!(
            "thread-ctx: {} samples ({} without a span context), {} dropped (ring buffer full)",
            summary.total(),
            summary.no_context(),
            dropped
        ),
    }
    match written.and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {} // nobody reads stdout any more
        r => r.context("writing to stdout")?,
    }
    for note in profile.iter().flat_map(|p| &p.notes) {
        eprintln!("thread-ctx: note: {note}");
    }
    if outcome.undecodable > 0 {
        eprintln!("thread-ctx: warning: {} ring-buffer events did not decode (sampler ABI mismatch)", outcome.undecodable);
    }
    if args.bpf_stats {
        let st = sampler.program_stats()?;
        let per = if st.run_cnt == 0 { 0.0 } else { st.run_time_ns as f64 / st.run_cnt as f64 };
        // run_cnt counts every cpu-clock tick on the sampled CPUs, the target's or not.
        eprintln!("thread-ctx: BPF program: {} runs, {} ns total, {per:.0} ns per run", st.run_cnt, st.run_time_ns);
        if summary.total() > 0 {
            // An upper bound: run_time_ns includes the cheap runs on other processes' ticks.
            eprintln!("thread-ctx: BPF program: <= {:.0} ns per sample of the target", st.run_time_ns as f64 / summary.total() as f64);
        }
        if let Some(st) = sampler.off_cpu_program_stats()? {
            let per = if st.run_cnt == 0 { 0.0 } else { st.run_time_ns as f64 / st.run_cnt as f64 };
            eprintln!("thread-ctx: off-CPU program: {} context switches seen, {} ns total, {per:.0} ns per switch", st.run_cnt, st.run_time_ns);
        }
    }
    match outcome.end {
        RunEnd::TargetExited => eprintln!("thread-ctx: process {pid} exited after {seconds:.1} s; sampling stopped"),
        RunEnd::Stopped if stdout_closed.get() => {}
        RunEnd::Stopped => eprintln!("thread-ctx: interrupted after {seconds:.1} s"),
        RunEnd::Deadline => {}
    }
    outputs?;
    Ok(ExitCode::SUCCESS)
}

/// The symbolizer for the profile outputs; warns now, not after the recording,
/// when a Node target's JS frames will stay unnamed.
fn start_collector(pid: i32, d: &Discovery, args: &RecordArgs) -> Result<Collector> {
    let symbolizer = Symbolizer::new(pid)?;
    if symbolizer.runs_v8() {
        if let Some(note) = symbolizer.perf_map_note() {
            eprintln!("thread-ctx: warning: {note}");
        }
    }
    let p = &args.profile;
    Ok(Collector::new(symbolizer, d.key_map(), args.hz, !args.no_user_stacks, p.kernel, p.off_cpu))
}

/// `service.name` of the process context's resource, for the pprof labels.
fn service_name(d: &Discovery) -> Option<String> {
    match &d.process_context {
        Some(Ok(pc)) => pc.resource.get("service.name").and_then(|v| v.as_str()).map(str::to_string),
        _ => None,
    }
}

/// The access of the process's writer object. One object is sampled: with
/// several (e.g. two addons) the first resolvable one is used and the others named.
fn pick_access(d: &Discovery) -> Result<Option<crate::access::TlsAccess>> {
    if d.writers.is_empty() {
        return Ok(None);
    }
    let Some(chosen) = d.writers.iter().find(|w| w.access.is_ok()) else {
        let why: Vec<String> =
            d.writers.iter().map(|w| format!("{}: {}", w.path, w.access.as_ref().unwrap_err())).collect();
        bail!("process {}: otel_thread_ctx_v1 found but its TLS access could not be resolved: {}", d.pid, why.join("; "));
    };
    for other in d.writers.iter().filter(|w| !std::ptr::eq(*w, chosen)) {
        eprintln!("thread-ctx: warning: also defined by {}, which is not sampled (one writer object per process)", other.path);
    }
    Ok(chosen.access.clone().ok())
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0s").unwrap_err().contains("above 0"));
        assert!(parse_duration("5h").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("abc").unwrap_err().contains("expected a duration"));
    }
}
