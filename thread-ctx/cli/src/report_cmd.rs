//! `thread-ctx report --otlp FILE`: what an OpenTelemetry Collector received from `thread-ctx
//! agent`, read back from its file exporter's output: per process, the resource, the build ids of
//! the mapped files, and the summary `record` prints (CPU per route, trace or span, with its top
//! frames and the share of samples linked to a span); and, for one process, the profile files
//! `record` writes (pprof, flame graph, folded stacks), restricted by --trace/--span/--attr.
//! The proof that the pipeline works end to end is drawn from what arrived, not from what was sent.

use crate::console::{print_stdout, say};
use crate::exit_codes::{existing_file, usage};
use crate::page::{self, PageArgs};
use crate::profile_args::ProfileFiles;
use crate::report_tally::{self, PassPlan, Tally};
use crate::traces_cmd::{self, TracesReport};
use anyhow::Result;
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use thread_ctx_discovery::printable::printable;
use thread_ctx_model::Filter;
use thread_ctx_otlp::into_profile::{ProcessKey, ReceivedProcess};
use thread_ctx_otlp::received::ResolvedSample;
use thread_ctx_otlp::traces::SpanSelection;
use thread_ctx_output::pprof;
use thread_ctx_output::selection::selection_summary;
use thread_ctx_output::summary::{GroupBy, NO_ROUTE_HINT, ROUTE_KEY};

/// Resource attributes shown first, in this order; the others are counted.
const RESOURCE_SHOWN: [&str; 12] = [
    "service.name",
    "service.namespace",
    "service.version",
    "service.instance.id",
    "deployment.environment.name",
    "process.pid",
    "process.vpid",
    "container.id",
    "k8s.pod.uid",
    "process.executable.name",
    "host.name",
    "telemetry.sdk.language",
];

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// What the Collector's file exporter wrote (its `proto` format: size-prefixed OTLP ProfilesData).
    /// With --serve/--html beside --traces: the flame graphs of the page.
    #[arg(long, value_name = "FILE", required_unless_present = "traces")]
    pub otlp: Option<PathBuf>,
    /// Enriched spans the Collector's spanprofiles connector wrote through a file exporter (its
    /// `proto` format: size-prefixed OTLP TracesData): per route the latency, and where the
    /// slowest 1 % spent their time.
    #[arg(long, value_name = "FILE")]
    pub traces: Option<PathBuf>,
    /// With --traces: also explain the N slowest requests one by one.
    #[arg(long, value_name = "N", requires = "traces", default_value_t = 0)]
    pub slowest: usize,
    /// With --traces: the report as JSON, for scripts.
    #[arg(long, requires = "traces")]
    pub json: bool,
    /// Only this process (its resource's process.pid); repeatable. With --traces: only its spans.
    #[arg(long, value_name = "PID")]
    pub pid: Vec<u32>,
    /// Only processes of this service.name (with --traces: only its spans).
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// Summary rows: `span` (each span instance), `trace`, or a sample attribute by its key,
    /// e.g. http.route [default: http.route when samples carry it, else trace].
    #[arg(long, value_name = "span|trace|ATTR", value_parser = GroupBy::parse)]
    pub by: Option<GroupBy>,
    /// Summary rows shown; the rest are added up in one "other" row (0: all).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// The files of one process (select it with --pid when the file holds several).
    #[command(flatten)]
    pub files: ProfileFiles,
    /// The page: --serve ADDR, --html FILE, --jaeger URL.
    #[command(flatten)]
    pub page: PageArgs,
}

pub fn run(args: ReportArgs) -> Result<ExitCode> {
    let (otlp, traces) = (args.otlp.clone(), args.traces.clone());
    if args.page.wanted() {
        // The page shows every process, route and request, to choose from in it.
        let select = &args.files.select;
        let refused = [
            (args.slowest > 0, "--slowest"),
            (args.json, "--json"),
            (!args.pid.is_empty(), "--pid"),
            (args.service.is_some(), "--service"),
            (args.by.is_some(), "--by"),
            (args.files.writes_files(), "--pprof/--flamegraph/--folded"),
            (select.trace.is_some() || select.span.is_some() || !select.attr.is_empty() || select.kind.is_some(), "--trace/--span/--attr/--kind"),
        ];
        if let Some((_, flag)) = refused.into_iter().find(|(given, _)| *given) {
            return Err(usage(format!("{flag}: not with --serve/--html: the page shows every route and request, to choose from in it")));
        }
        return page::run(&args.page, traces.as_deref(), otlp.as_deref());
    }
    if args.page.jaeger.is_some() {
        return Err(usage("--jaeger: it links the page's requests to Jaeger: give --serve ADDR or --html FILE"));
    }
    if otlp.is_some() && traces.is_some() {
        return Err(usage("--otlp and --traces: one report at a time (both together are for the page: --serve ADDR or --html FILE)"));
    }
    match (otlp, traces) {
        (_, Some(file)) => traces_report(&args, &file),
        (Some(otlp), None) => profiles(args, otlp),
        (None, None) => Err(usage("--otlp FILE or --traces FILE: what should be read?")),
    }
}

/// `report --traces`: the selection flags choose spans; the flags of a profile are refused.
fn traces_report(args: &ReportArgs, path: &Path) -> Result<ExitCode> {
    let files = &args.files;
    let refused = [
        (args.by.is_some(), "--by", "it chooses the rows of a profile's summary; --traces reports requests by route"),
        (files.pprof.is_some(), "--pprof", "spans are not samples: draw a profile with report --otlp"),
        (files.flamegraph.is_some(), "--flamegraph", "spans are not samples: draw a profile with report --otlp"),
        (files.folded.is_some(), "--folded", "spans are not samples: fold a profile with report --otlp"),
        (files.select.kind.is_some(), "--kind", "it chooses which samples of a profile are drawn; spans have no kind"),
    ];
    if let Some((_, flag, why)) = refused.into_iter().find(|(given, _, _)| *given) {
        return Err(usage(format!("{flag}: not with --traces: {why}")));
    }
    let select = &files.select;
    let filter = select.filter()?;
    let selected_by = [
        (!args.pid.is_empty(), "--pid"),
        (args.service.is_some(), "--service"),
        (select.trace.is_some(), "--trace"),
        (select.span.is_some(), "--span"),
        (!select.attr.is_empty(), "--attr"),
    ]
    .into_iter()
    .filter_map(|(on, flag)| on.then_some(flag))
    .collect();
    let selection = SpanSelection {
        pids: args.pid.clone(),
        service: args.service.clone(),
        trace_id: filter.trace_id,
        span_id: filter.span_id,
        attrs: filter.attrs,
    };
    traces_cmd::run(TracesReport { selection, selected_by, slowest: args.slowest, top: args.top, json: args.json, path })
}

/// `report --otlp`: what the Collector received of the agent's profiles.
fn profiles(args: ReportArgs, otlp: PathBuf) -> Result<ExitCode> {
    let files = &args.files;
    let filter = files.filter()?;
    existing_file("--otlp", &otlp)?;
    // One message at a time, each sample added up as it is resolved into what the report prints
    // (report_tally): memory holds the tables, not the file (881 MiB for a 3 MB file when every
    // message and sample was held at once), nor an entry per (stack, span) pair (611 MiB for a
    // 30 MB file whose every sample was a new pair). The files (and the selection drawn in them)
    // need whole profiles: only then are entries kept, and only of the processes --pid lets through.
    let whole = files.writes_files() || !filter.is_empty();
    let keep = |s: &ResolvedSample| {
        whole && (args.pid.is_empty() || s.resource.get("process.pid").and_then(|p| p.parse().ok()).is_some_and(|pid| args.pid.contains(&pid)))
    };
    let shown_process = |p: &ReceivedProcess| {
        (args.pid.is_empty() || p.pid().is_some_and(|pid| args.pid.contains(&pid)))
            && args.service.as_deref().is_none_or(|s| p.service_name() == Some(s))
    };
    // The rows are chosen by what the shown processes' samples carry, known once read: the first
    // pass adds up rows by --by, else by http.route (what most files carry); when they carry no
    // route, a second pass over the same bytes adds up rows by trace. Both exact.
    let guess = args.by.clone().unwrap_or_else(|| GroupBy::Attr(ROUTE_KEY.into()));
    // A process is keyed by its pid when it has one: --pid leaves the others untallied.
    let maybe_shown = |k: &ProcessKey| args.pid.is_empty() || k.1.parse().is_ok_and(|pid| args.pid.contains(&pid));
    let mut pass = report_tally::read(&otlp, &PassPlan { by: guess, tallied: &maybe_shown, keep: &keep, within: None })?;
    let file = pass.file;
    if file.incomplete_tail > 0 {
        say!(
            "thread-ctx: note: the last {} bytes of {} are not a whole message yet (is the Collector still writing?): left out",
            file.incomplete_tail,
            otlp.display()
        );
    }
    let total = pass.processes.len();
    let shown_keys: Vec<ProcessKey> = pass.processes.iter().filter(|(_, p)| shown_process(p)).map(|(k, _)| k.clone()).collect();
    if shown_keys.is_empty() && total > 0 && (!args.pid.is_empty() || args.service.is_some()) {
        let flag = if args.pid.is_empty() { "--service" } else { "--pid" };
        let held: Vec<String> = pass.processes.iter().map(|(_, p)| who(p)).collect();
        return Err(usage(format!("{flag}: no such process in {} (it holds {})", otlp.display(), held.join(", "))));
    }
    let shown_tallies: Vec<&Tally> = shown_keys.iter().filter_map(|k| pass.tallies.get(k)).collect();
    let by = group_by(&args, &shown_tallies)?;
    if by != pass.by {
        let shown: HashSet<ProcessKey> = shown_keys.iter().cloned().collect();
        let plan = PassPlan { by: by.clone(), tallied: &|k| shown.contains(k), keep: &keep, within: Some(file.whole_bytes) };
        pass = report_tally::read(&otlp, &plan)?;
    }
    let all: Vec<&ReceivedProcess> = pass.processes.iter().map(|(_, p)| p).collect();
    let shown: Vec<(&ReceivedProcess, Option<&Tally>)> =
        pass.processes.iter().filter(|(_, p)| shown_process(p)).map(|(k, p)| (p, pass.tallies.get(k))).collect();
    let mut out = format!(
        "{}: {} requests, {} CPU samples of {total} process{}{}\n",
        otlp.display(),
        file.messages,
        all.iter().map(|p| p.cpu_samples()).sum::<u64>(),
        if total == 1 { "" } else { "es" },
        if shown.len() < total { format!(" ({} shown)", shown.len()) } else { String::new() }
    );
    for (p, tally) in &shown {
        out += &format!("\n{}", describe(p, *tally, &args, &by, &filter));
    }
    print_stdout(&out)?;
    if files.writes_files() {
        let [(p, _)] = shown.as_slice() else {
            let held: Vec<String> = shown.iter().map(|(p, _)| who(p)).collect();
            return Err(usage(format!(
                "--pprof/--flamegraph/--folded: draw one process: select it with --pid (the file holds {})",
                if held.is_empty() { "none".into() } else { held.join(", ") }
            )));
        };
        let meta = pprof::Meta {
            service_name: p.service_name().map(str::to_string),
            start_unix_ns: p.start_unix_ns as i64,
            duration_ns: p.end_unix_ns.saturating_sub(p.start_unix_ns) as i64,
            comments: vec![format!("thread-ctx report --otlp {}", otlp.display())],
        };
        let subtitle = |counted: &str| format!("{}, {counted}, as the OpenTelemetry Collector received it", who(p));
        files.write(&p.profile, &filter, &meta, &subtitle)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The summary's rows: `--by`, when some sample carries it, else `http.route` when samples carry
/// it, else traces (with a note of what sets a route).
fn group_by(args: &ReportArgs, shown: &[&Tally]) -> Result<GroupBy> {
    let keys: BTreeSet<&str> = shown.iter().flat_map(|t| &t.keys).map(String::as_str).collect();
    match &args.by {
        Some(GroupBy::Attr(key)) if !keys.contains(key.as_str()) => {
            let carried = if keys.is_empty() { "no attribute".to_string() } else { keys.into_iter().collect::<Vec<_>>().join(", ") };
            Err(usage(format!("--by {key}: no sample carries {key}; they carry {carried}")))
        }
        Some(by) => Ok(by.clone()),
        None if keys.contains(ROUTE_KEY) => Ok(GroupBy::Attr(ROUTE_KEY.into())),
        None => {
            if shown.iter().any(|t| t.traced) {
                say!("thread-ctx: note: rows are traces: {NO_ROUTE_HINT}, and the package's `attributes` must include it");
            }
            Ok(GroupBy::Trace)
        }
    }
}

/// "pid 4242 (shop)".
fn who(p: &ReceivedProcess) -> String {
    let pid = p.pid().map_or_else(|| "pid ?".to_string(), |pid| format!("pid {pid}"));
    match p.service_name() {
        Some(s) => format!("{pid} ({})", printable(s)),
        None => pid,
    }
}

/// One process: what it is, then the summary table, and the selection's own when
/// --trace/--span/--attr chose what the flame graph or folded stacks show.
fn describe(p: &ReceivedProcess, tally: Option<&Tally>, args: &ReportArgs, by: &GroupBy, filter: &Filter) -> String {
    let period = p.profile.cpu_period_ns;
    let hz = if period == 0 { 0 } else { (1e9 / period as f64).round() as u32 };
    let seconds = p.end_unix_ns.saturating_sub(p.start_unix_ns) as f64 / 1e9;
    let cpu = p.cpu_samples();
    let mut out = format!(
        "{}: {cpu} CPU samples at {hz} Hz (~{:.2} s on CPU) in {} window{} over {seconds:.1} s\n",
        who(p),
        cpu as f64 / hz.max(1) as f64,
        p.windows,
        if p.windows == 1 { "" } else { "s" }
    );
    let mut shown: Vec<String> = RESOURCE_SHOWN.iter().filter_map(|k| Some(format!("{k}={}", printable(p.resource.get(*k)?)))).collect();
    let others = p.resource.len() - shown.len();
    if others > 0 {
        shown.push(format!("(+{others} more)"));
    }
    out += &format!("  resource: {}\n", shown.join(" "));
    let ids: Vec<String> = p.build_ids().iter().map(|(file, id)| format!("{} {id}", printable(file))).collect();
    out += &format!("  build ids: {}\n", if ids.is_empty() { "none".to_string() } else { ids.join(", ") });
    // A process with no entry at all has no tally (its samples were all of no kind counted).
    let empty = Tally::new(by);
    let tally = tally.unwrap_or(&empty);
    out += &tally.summary.render_table(hz, args.top, Some(&tally.top.notes(&p.profile, 3)));
    let kind = args.files.select.kind(&p.profile);
    if let Some(selection) = selection_summary(&p.profile, filter, kind, by, hz, args.top) {
        out += &selection;
    }
    out
}
