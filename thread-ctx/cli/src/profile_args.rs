//! The profile flags of `thread-ctx record` (flattened into its arguments):
//! checked before anything is loaded, so bad input fails at once and names
//! the flag, and the files they ask for, written once the recording ends.
//! The files ([`ProfileFiles`]) are `report`'s too.

use crate::exit_codes::usage;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use thread_ctx_output::{flame, pprof};
use thread_ctx_profile::{Filter, Profile};

#[derive(clap::Args, Debug, Default, Clone)]
pub struct ProfileArgs {
    /// Also capture kernel stacks (symbolized from /proc/kallsyms).
    #[arg(long)]
    pub kernel: bool,
    /// Also trace off-CPU time (sched_switch): how long each thread was switched out,
    /// attributed to the span it had published when it left the CPU, as blocked (it waited: sleep,
    /// I/O, a lock) or preempted (runnable, it waited for a CPU): the summary's BLOCKED and
    /// PREEMPTED columns, folded frames `[off-CPU: blocked]`/`[off-CPU: preempted]`, pprof label
    /// `off_cpu`.
    #[arg(long)]
    pub off_cpu: bool,
    /// Also take allocation samples: V8's sampling heap profiler must run in the target (the
    /// package's `allocations` option, or OTEL_THREAD_CTX_ALLOCATIONS=1); a uprobe on its
    /// `node` reads each sample's size, stack and span. jsonl lines of kind `alloc` with `size`
    /// (the sampled object) and `bytes` (what the sample stands for, scaled by the interval
    /// the process publishes); the summary gets an allocation table in bytes; pprof gets
    /// alloc_objects/count and alloc_space/bytes; --flamegraph and --folded show allocated
    /// bytes. A `node` without the symbol (stripped) gets one line; the CPU profile goes on.
    #[arg(long)]
    pub alloc: bool,
    #[command(flatten)]
    pub files: ProfileFiles,
}

/// The profile files asked for, and which samples the flame graph and folded stacks show.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct ProfileFiles {
    /// Write a gzipped pprof profile (trace_id, span_id, attributes, thread and service.name labels).
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Write an SVG flame graph.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Write folded stacks (`root;...;leaf VALUE`, one line per stack), as flamegraph.pl and inferno read
    /// them. VALUE is a count of CPU samples; with --off-cpu, every line's is microseconds (a CPU sample
    /// counts as its sampling period) and off-CPU stacks end in `[off-CPU: blocked]` or `[off-CPU: preempted]`;
    /// with --alloc, only allocation samples, and VALUE is the bytes they stand for.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    #[command(flatten)]
    pub select: FilterArgs,
}

/// Which samples a flame graph shows (the pprof always keeps all, labelled).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct FilterArgs {
    /// Flame graph and folded stacks: only this trace's samples.
    #[arg(long, value_name = "TRACE_ID")]
    pub trace: Option<String>,
    /// Flame graph and folded stacks: only this span's samples.
    #[arg(long, value_name = "SPAN_ID")]
    pub span: Option<String>,
    /// Flame graph and folded stacks: only samples whose record carries this attribute
    /// (repeatable; all must match), e.g. http.route=/users/:id.
    #[arg(long, value_name = "KEY=VALUE")]
    pub attr: Vec<String>,
}

impl FilterArgs {
    /// The filter; an error names the flag at fault.
    pub fn filter(&self) -> Result<Filter> {
        Filter::parse(self.trace.as_deref(), self.span.as_deref(), &self.attr).map_err(usage)
    }

    /// The samples the flame graph shows (CPU, or allocations when traced) that `filter` keeps
    /// in `profile`; none is a usage error that names the selecting flags (not the output they
    /// were meant for).
    pub fn check_selection(&self, profile: &Profile, filter: &Filter) -> Result<u64> {
        let unit = flame::Unit::of(profile);
        let shown = |f: &dyn Fn(&thread_ctx_profile::Entry) -> bool| -> u64 {
            profile.entries.iter().filter(|e| unit.shows(e) && !e.kind.is_off_cpu() && f(e)).map(|e| e.count).sum()
        };
        let kept = shown(&|e| filter.matches(e));
        if kept > 0 || filter.is_empty() {
            return Ok(kept);
        }
        let flags: Vec<&str> = [(self.trace.is_some(), "--trace"), (self.span.is_some(), "--span"), (!self.attr.is_empty(), "--attr")]
            .into_iter()
            .filter_map(|(given, flag)| given.then_some(flag))
            .collect();
        let traces: std::collections::HashSet<_> = profile.entries.iter().filter_map(|e| e.trace_id).collect();
        let what = unit.samples_name();
        Err(usage(format!(
            "{}: no {what} of {} in the profile ({} {what} of {} traces in all)",
            flags.join("/"),
            filter.describe(),
            shown(&|_| true),
            traces.len()
        )))
    }
}

/// What the run must do for the profile outputs.
#[derive(Debug, Clone)]
pub struct ProfilePlan {
    pub filter: Filter,
    /// Stacks are captured, so they get symbolized (for the files and the summary's top frames).
    pub symbolize: bool,
}

impl ProfileArgs {
    /// Validates the flags; errors name the flag at fault.
    pub fn plan(&self, user_stacks: bool) -> Result<ProfilePlan> {
        let filter = self.files.filter()?;
        if self.files.writes_files() && !user_stacks && !self.kernel {
            return Err(usage(
                "--no-user-stacks: --pprof, --flamegraph and --folded need stacks (drop --no-user-stacks, or add --kernel for kernel stacks only)",
            ));
        }
        Ok(ProfilePlan { filter, symbolize: user_stacks || self.kernel })
    }
}

impl ProfileFiles {
    pub fn writes_files(&self) -> bool {
        self.pprof.is_some() || self.flamegraph.is_some() || self.folded.is_some()
    }

    /// The selection, checked with the files' paths; errors name the flag at fault.
    pub fn filter(&self) -> Result<Filter> {
        let filter = self.select.filter()?;
        if !filter.is_empty() && self.flamegraph.is_none() && self.folded.is_none() {
            return Err(usage(
                "--trace/--span/--attr select what --flamegraph and --folded show: give one of them (--pprof keeps every sample, labelled)",
            ));
        }
        for (flag, path) in [("--pprof", &self.pprof), ("--flamegraph", &self.flamegraph), ("--folded", &self.folded)] {
            if let Some(p) = path {
                check_writable(flag, p)?;
            }
        }
        Ok(filter)
    }

    /// Writes every file asked for (the pprof unfiltered); each written path is
    /// reported on stderr. All are attempted; the first failure is returned.
    pub fn write(&self, profile: &Profile, filter: &Filter, meta: &pprof::Meta, subtitle: &str) -> Result<()> {
        let mut first_error = None;
        let mut keep = |r: Result<String>| match r {
            Ok(msg) => eprintln!("thread-ctx: {msg}"),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        };
        let sum = |keep: &dyn Fn(&thread_ctx_profile::Entry) -> bool| profile.entries.iter().filter(|e| keep(e)).map(|e| e.count).sum::<u64>();
        let kept = match flame::Unit::of(profile) {
            flame::Unit::Bytes => format!("{} allocation samples", sum(&|e| filter.matches(e) && e.kind.is_alloc())),
            _ => match (sum(&|e| filter.matches(e) && e.kind.is_cpu()), sum(&|e| filter.matches(e) && e.kind.is_off_cpu())) {
                (cpu, 0) => format!("{cpu} CPU samples"),
                (cpu, off) => format!("{cpu} CPU samples, {off} off-CPU intervals"),
            },
        };
        if let Some(p) = &self.pprof {
            let off = if profile.off_cpu_traced { format!(", {} off-CPU intervals", sum(&|e| e.kind.is_off_cpu())) } else { String::new() };
            let alloc = if profile.alloc_traced { format!(", {} allocation samples", sum(&|e| e.kind.is_alloc())) } else { String::new() };
            let what = format!("{} CPU samples{off}{alloc}", sum(&|e| e.kind.is_cpu()));
            keep(pprof::write_file(p, profile, meta).context("--pprof").map(|_| format!("wrote pprof profile {} ({what})", p.display())));
        }
        if let Some(p) = &self.folded {
            keep(flame::write_folded(p, profile, filter).context("--folded").map(|n| {
                format!("wrote folded stacks {} ({n} stacks, {}; {})", p.display(), filter.describe(), flame::Unit::of(profile).describe())
            }));
        }
        if let Some(p) = &self.flamegraph {
            if let Err(e) = self.select.check_selection(profile, filter) {
                return Err(first_error.unwrap_or(e));
            }
            keep(
                flame::write_svg(p, profile, filter, subtitle)
                    .context("--flamegraph")
                    .map(|_| format!("wrote flame graph {} ({kept}, {})", p.display(), filter.describe())),
            );
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The file's directory must exist: a recording is not thrown away at the end for a typo.
pub fn check_writable(flag: &str, path: &Path) -> Result<()> {
    if path.as_os_str().is_empty() || path.is_dir() {
        return Err(usage(format!("{flag}: {:?} is not a file path", path)));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(usage(format!("{flag}: directory {} does not exist", dir.display())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_combinations_name_the_flag() {
        let select = |trace: &str| FilterArgs { trace: Some(trace.into()), ..Default::default() };
        let files = |f: ProfileFiles| ProfileArgs { files: f, ..Default::default() };
        let filter_only = files(ProfileFiles { select: select(&"ab".repeat(16)), pprof: Some("/tmp/p.pb.gz".into()), ..Default::default() });
        assert!(filter_only.plan(true).unwrap_err().to_string().starts_with("--trace/--span/--attr select"));
        let bad_trace = files(ProfileFiles { select: select("xyz"), folded: Some("/tmp/f".into()), ..Default::default() });
        assert!(bad_trace.plan(true).unwrap_err().to_string().starts_with("--trace: expected 32 hex digits"));
        let no_stacks = files(ProfileFiles { pprof: Some("/tmp/p.pb.gz".into()), ..Default::default() });
        assert!(no_stacks.plan(false).unwrap_err().to_string().starts_with("--no-user-stacks"));
        let kernel_only = ProfileArgs { kernel: true, ..no_stacks.clone() };
        assert!(kernel_only.plan(false).unwrap().symbolize);
        let bad_dir = files(ProfileFiles { flamegraph: Some("/nonexistent-dir/x.svg".into()), ..Default::default() });
        assert!(bad_dir.plan(true).unwrap_err().to_string().starts_with("--flamegraph: directory /nonexistent-dir does not exist"));
        let a_dir = files(ProfileFiles { folded: Some("/tmp".into()), ..Default::default() });
        assert!(a_dir.plan(true).unwrap_err().to_string().starts_with("--folded: \"/tmp\" is not a file path"));
    }
}
