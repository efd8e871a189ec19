//! The profile flags of `thread-ctx record` (flattened into its arguments):
//! checked before anything is loaded, so bad input fails at once and names
//! the flag, and the files they ask for, written once the recording ends.
//! The files ([`ProfileFiles`]) are `report`'s too, and the selection
//! ([`FilterArgs`]: which samples, of which kind) `flamegraph`'s.

use crate::console::say;
use crate::exit_codes::usage;
#[cfg(feature = "ebpf")]
use crate::sampling_args::SamplingArgs;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use thread_ctx_model::{Entry, Filter, Profile};
use thread_ctx_output::kind::Kind;
use thread_ctx_output::{flame, pprof};

#[cfg(feature = "ebpf")]
#[derive(clap::Args, Debug, Default, Clone)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub files: ProfileFiles,
}

/// The profile files asked for, and which samples the flame graph and folded stacks show.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct ProfileFiles {
    /// Write a gzipped pprof profile (trace_id, span_id, attributes, thread and service.name labels):
    /// every sample of every kind, whatever --kind and --trace/--span/--attr say.
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Write an SVG flame graph of the samples --kind names.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Write folded stacks (`root;...;leaf VALUE`, one line per stack), as flamegraph.pl and inferno
    /// read them, of the samples --kind names: VALUE is a count of CPU samples (cpu), microseconds
    /// (off-cpu, and cpu+off-cpu, where a CPU sample counts as its sampling period and off-CPU
    /// stacks end in `[off-CPU: blocked]` or `[off-CPU: preempted]`), or allocated bytes (alloc).
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    #[command(flatten)]
    pub select: FilterArgs,
}

/// Which samples a flame graph, folded stacks and the selection's summary show (the pprof
/// always keeps all, labelled).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct FilterArgs {
    /// Which samples are drawn or folded, and counted in the selection's summary: `cpu`, `off-cpu`
    /// (recorded with --off-cpu), `cpu+off-cpu` (both on one time scale) or `alloc` (recorded with
    /// --alloc) [default: cpu+off-cpu when off-CPU time was recorded, else cpu].
    #[arg(long, value_enum, value_name = "KIND")]
    pub kind: Option<KindArg>,
    /// Flame graph and folded stacks: only this trace's samples (report --traces: its spans).
    #[arg(long, value_name = "TRACE_ID")]
    pub trace: Option<String>,
    /// Flame graph and folded stacks: only this span's samples (report --traces: that span).
    #[arg(long, value_name = "SPAN_ID")]
    pub span: Option<String>,
    /// Flame graph and folded stacks: only samples whose record carries this attribute
    /// (repeatable; all must match), e.g. http.route=/users/:id (report --traces: spans whose
    /// attributes, or their resource's, carry it).
    #[arg(long, value_name = "KEY=VALUE")]
    pub attr: Vec<String>,
}

/// `--kind`'s values, as [`Kind`] names them.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KindArg {
    Cpu,
    OffCpu,
    #[value(name = "cpu+off-cpu")]
    CpuAndOffCpu,
    Alloc,
}

impl KindArg {
    fn kind(self) -> Kind {
        match self {
            KindArg::Cpu => Kind::Cpu,
            KindArg::OffCpu => Kind::OffCpu,
            KindArg::CpuAndOffCpu => Kind::CpuAndOffCpu,
            KindArg::Alloc => Kind::Alloc,
        }
    }
}

impl FilterArgs {
    /// The filter; an error names the flag at fault.
    pub fn filter(&self) -> Result<Filter> {
        Filter::parse(self.trace.as_deref(), self.span.as_deref(), &self.attr).map_err(|e| usage(e.to_string()))
    }

    /// The kind drawn from `profile`: the one asked for, else its default.
    pub fn kind(&self, profile: &Profile) -> Kind {
        self.kind.map_or_else(|| Kind::default_for(profile), KindArg::kind)
    }

    /// The samples of the kind drawn that `filter` keeps in `profile`; none is a usage error
    /// naming the flags that chose them (not the output they were meant for), so that every
    /// drawn or folded output of an empty selection ends alike, and nothing is written.
    pub fn check_selection(&self, profile: &Profile, filter: &Filter) -> Result<u64> {
        let kind = self.kind(profile);
        let kept = kind.count(profile, filter);
        if kept > 0 {
            return Ok(kept);
        }
        let kind_flag = self.kind.map(|_| format!("--kind {}", kind.name()));
        let flags: Vec<String> = [(self.trace.is_some(), "--trace"), (self.span.is_some(), "--span"), (!self.attr.is_empty(), "--attr")]
            .into_iter()
            .filter(|(given, _)| *given)
            .map(|(_, flag)| flag.to_string())
            .chain(kind_flag.filter(|_| filter.is_empty()))
            .collect();
        let flags = if flags.is_empty() { "--flamegraph/--folded".to_string() } else { flags.join("/") };
        let traces: std::collections::HashSet<_> = profile.entries.iter().filter_map(|e| e.trace_id).collect();
        let what = kind.samples_name();
        let of = if filter.is_empty() { String::new() } else { format!(" of {}", filter.describe()) };
        Err(usage(format!(
            "{flags}: no {what}{of} in the profile ({} {what} of {} traces in all)",
            kind.count(profile, &Filter::default()),
            traces.len()
        )))
    }
}

/// What the run must do for the profile outputs.
#[cfg(feature = "ebpf")]
#[derive(Debug, Clone)]
pub struct ProfilePlan {
    pub filter: Filter,
    /// Stacks are captured, so they get symbolized (for the files and the summary's top frames).
    pub symbolize: bool,
}

#[cfg(feature = "ebpf")]
impl ProfileArgs {
    /// Validates the flags; errors name the flag at fault.
    pub fn plan(&self, user_stacks: bool) -> Result<ProfilePlan> {
        let filter = self.files.filter()?;
        if self.files.writes_files() && !user_stacks && !self.sampling.kernel {
            return Err(usage(
                "--no-user-stacks: --pprof, --flamegraph and --folded need stacks (drop --no-user-stacks, or add --kernel for kernel stacks only)",
            ));
        }
        match self.files.select.kind {
            Some(KindArg::OffCpu | KindArg::CpuAndOffCpu) if !self.sampling.off_cpu => {
                return Err(usage(format!("--kind {}: draws off-CPU time: record it with --off-cpu", self.files.select.kind.unwrap().kind().name())));
            }
            Some(KindArg::Alloc) if !self.sampling.alloc => return Err(usage("--kind alloc: draws allocations: record them with --alloc")),
            _ => {}
        }
        Ok(ProfilePlan { filter, symbolize: user_stacks || self.sampling.kernel })
    }
}

impl ProfileFiles {
    pub fn writes_files(&self) -> bool {
        self.pprof.is_some() || self.flamegraph.is_some() || self.folded.is_some()
    }

    /// The selection, checked with the files' paths; errors name the flag at fault.
    pub fn filter(&self) -> Result<Filter> {
        let filter = self.select.filter()?;
        let draws = self.flamegraph.is_some() || self.folded.is_some();
        if !draws && (!filter.is_empty() || self.select.kind.is_some()) {
            return Err(usage(
                "--kind/--trace/--span/--attr select what --flamegraph and --folded show: give one of them (--pprof keeps every sample, labelled)",
            ));
        }
        for (flag, path) in [("--pprof", &self.pprof), ("--flamegraph", &self.flamegraph), ("--folded", &self.folded)] {
            if let Some(p) = path {
                check_writable(flag, p)?;
            }
        }
        Ok(filter)
    }

    /// Writes every file asked for (the pprof unfiltered, first); each written path is reported
    /// on stderr. An empty selection writes neither the flame graph nor the folded stacks and is
    /// the error; otherwise all are attempted and the first failure is returned. `subtitle`
    /// makes the flame graph's subtitle from what it counts ("37 CPU samples").
    pub fn write(&self, profile: &Profile, filter: &Filter, meta: &pprof::Meta, subtitle: &dyn Fn(&str) -> String) -> Result<()> {
        let mut first_error = None;
        let mut keep = |r: Result<String>| match r {
            Ok(msg) => say!("thread-ctx: {msg}"),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        };
        if let Some(p) = &self.pprof {
            let sum = |keep: &dyn Fn(&Entry) -> bool| profile.entries.iter().filter(|e| keep(e)).map(|e| e.count).sum::<u64>();
            let off = if profile.off_cpu_traced { format!(", {} off-CPU intervals", sum(&|e| e.kind.is_off_cpu())) } else { String::new() };
            let alloc = if profile.alloc_traced { format!(", {} allocation samples", sum(&|e| e.kind.is_alloc())) } else { String::new() };
            let what = format!("{} CPU samples{off}{alloc}", sum(&|e| e.kind.is_cpu()));
            keep(pprof::write_file(p, profile, meta).context("--pprof").map(|_| format!("wrote pprof profile {} ({what})", p.display())));
        }
        if self.folded.is_none() && self.flamegraph.is_none() {
            return first_error.map_or(Ok(()), Err);
        }
        if let Err(e) = self.select.check_selection(profile, filter) {
            return Err(first_error.unwrap_or(e));
        }
        let kind = self.select.kind(profile);
        if let Some(p) = &self.folded {
            keep(flame::write_folded(p, profile, filter, kind).context("--folded").map(|n| {
                format!("wrote folded stacks {} ({n} stacks of {}, {}; {})", p.display(), kind.samples_name(), filter.describe(), kind.describe())
            }));
        }
        if let Some(p) = &self.flamegraph {
            let counted = kind.count_text(profile, filter);
            keep(
                flame::write_svg(p, profile, filter, kind, &subtitle(&counted))
                    .context("--flamegraph")
                    .map(|_| format!("wrote flame graph {} ({counted}, {})", p.display(), filter.describe())),
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

#[cfg(all(test, feature = "ebpf"))]
mod tests {
    use super::*;

    #[test]
    fn bad_combinations_name_the_flag() {
        let select = |trace: &str| FilterArgs { trace: Some(trace.into()), ..Default::default() };
        let files = |f: ProfileFiles| ProfileArgs { files: f, ..Default::default() };
        let filter_only = files(ProfileFiles { select: select(&"ab".repeat(16)), pprof: Some("/tmp/p.pb.gz".into()), ..Default::default() });
        assert!(filter_only.plan(true).unwrap_err().to_string().starts_with("--kind/--trace/--span/--attr select"));
        let bad_trace = files(ProfileFiles { select: select("xyz"), folded: Some("/tmp/f".into()), ..Default::default() });
        assert!(bad_trace.plan(true).unwrap_err().to_string().starts_with("--trace: expected 32 hex digits"));
        let no_stacks = files(ProfileFiles { pprof: Some("/tmp/p.pb.gz".into()), ..Default::default() });
        assert!(no_stacks.plan(false).unwrap_err().to_string().starts_with("--no-user-stacks"));
        let kernel_only = ProfileArgs { sampling: SamplingArgs { kernel: true, ..Default::default() }, ..no_stacks.clone() };
        assert!(kernel_only.plan(false).unwrap().symbolize);
        let bad_dir = files(ProfileFiles { flamegraph: Some("/nonexistent-dir/x.svg".into()), ..Default::default() });
        assert!(bad_dir.plan(true).unwrap_err().to_string().starts_with("--flamegraph: directory /nonexistent-dir does not exist"));
        let a_dir = files(ProfileFiles { folded: Some("/tmp".into()), ..Default::default() });
        assert!(a_dir.plan(true).unwrap_err().to_string().starts_with("--folded: \"/tmp\" is not a file path"));
        let alloc = FilterArgs { kind: Some(KindArg::Alloc), ..Default::default() };
        let unrecorded = files(ProfileFiles { select: alloc, folded: Some("/tmp/f".into()), ..Default::default() });
        assert!(unrecorded.plan(true).unwrap_err().to_string().starts_with("--kind alloc: draws allocations: record them with --alloc"));
    }
}
