//! `thread-ctx record PID`: samples the target's CPU with the eBPF sampler and
//! prints JSON lines or a per-trace/per-span summary.

use crate::discovery::{discover, Discovery};
use crate::sampler::summary::RunInfo;
use crate::sampler::{RunEnd, Sampler, SamplerOptions, Summary};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Same code `inspect`/`dump` use when the process has no otel_thread_ctx_v1.
const EXIT_NO_SYMBOL: u8 = 2;

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
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        bail!("PID {pid}: no such process (expected the pid of a running process)");
    }
    let d = discover(pid).with_context(|| format!("discovering otel_thread_ctx_v1 in process {pid}"))?;
    let Some(access) = pick_access(&d)? else {
        eprintln!("thread-ctx: process {pid} has no otel_thread_ctx_v1 (no mapped ELF object defines it)");
        return Ok(ExitCode::from(EXIT_NO_SYMBOL));
    };
    let mut sampler = Sampler::start(SamplerOptions { pid: pid as u32, access, hz: args.hz, user_stacks: !args.no_user_stacks })
        .with_context(|| format!("starting the eBPF sampler on process {pid}"))?;
    if args.bpf_stats {
        sampler.enable_run_time_stats()?;
    }
    // SAFETY: installing an async-signal-safe handler that only stores an atomic.
    unsafe { libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t) };

    let key_map = d.key_map();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut summary = Summary::default();
    let mut write_error = None;
    // A reader that closed our stdout (`| head`) ends the recording, quietly: it has what it wanted.
    let stdout_closed = std::cell::Cell::new(false);
    let started = Instant::now();
    let stop = || INTERRUPTED.load(Ordering::Relaxed) || stdout_closed.get();
    let outcome = sampler.run(started + args.duration, &stop, &mut |s| {
        summary.add(&s);
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
    let info = RunInfo { pid: pid as u32, hz: args.hz, cpus: sampler.cpus(), seconds, dropped: counters.dropped, key_map };
    let mut written = Ok(());
    match args.format {
        Format::Summary => written = write!(out, "{}", summary.render(&info)),
        Format::Jsonl if stdout_closed.get() => {}
        Format::Jsonl => eprintln!(
            "thread-ctx: {} samples ({} without a span context), {} dropped (ring buffer full)",
            summary.total(),
            summary.no_context(),
            counters.dropped
        ),
    }
    match written.and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {} // nobody reads stdout any more
        r => r.context("writing to stdout")?,
    }
    if outcome.undecodable > 0 {
        eprintln!("thread-ctx: warning: {} ring-buffer events did not decode (sampler ABI mismatch)", outcome.undecodable);
    }
    if args.bpf_stats {
        let st = sampler.program_stats()?;
        let per = if st.run_cnt == 0 { 0.0 } else { st.run_time_ns as f64 / st.run_cnt as f64 };
        // run_cnt counts every cpu-clock tick on the sampled CPUs, the target's or not.
        eprintln!("thread-ctx: BPF program: {} runs, {} ns total, {per:.0} ns per run", st.run_cnt, st.run_time_ns);
    }
    match outcome.end {
        RunEnd::TargetExited => eprintln!("thread-ctx: process {pid} exited after {seconds:.1} s; sampling stopped"),
        RunEnd::Stopped if stdout_closed.get() => {}
        RunEnd::Stopped => eprintln!("thread-ctx: interrupted after {seconds:.1} s"),
        RunEnd::Deadline => {}
    }
    Ok(ExitCode::SUCCESS)
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
