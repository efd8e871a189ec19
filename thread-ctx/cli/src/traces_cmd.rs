//! `thread-ctx report --traces FILE`: the slow requests of enriched spans, read from the
//! Collector's file exporter (`thread_ctx_otlp::traces`) and explained per route
//! (`thread_ctx_output::slow_requests`), as text or JSON.

use crate::console::{print_stdout, println_stdout, say};
use crate::exit_codes::{existing_file, usage};
use crate::report_cmd::ReportArgs;
use anyhow::Result;
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;
use thread_ctx_otlp::traces::{scan_traces_file, SpanSelection, TracesScan, HELD_SHOWN};
use thread_ctx_output::slow_requests::{mean, Explanation, Latencies, Report};

/// `report --traces`: the file is read twice, a message at a time (each route's latency first,
/// then its slowest 1 % explained), so memory does not grow with the spans' contents.
pub fn run(path: &Path, args: &ReportArgs) -> Result<ExitCode> {
    refuse_profile_flags(args)?;
    existing_file("--traces", path)?;
    let selection = selection(args)?;
    let mut latencies = Latencies::new(args.slowest);
    let scan = scan_traces_file(path, &selection, None, |s| latencies.add(&s))?;
    if scan.incomplete_tail > 0 {
        say!(
            "thread-ctx: note: the last {} bytes of {} are not a whole message yet (is the Collector still writing?): left out",
            scan.incomplete_tail,
            path.display()
        );
    }
    check_selection(args, &scan, path)?;
    let mut tails = latencies.tails();
    scan_traces_file(path, &selection, Some(scan.whole_bytes), |s| tails.add(&s))?;
    // --top 0 means all, as for the profile summary.
    let r = tails.finish(if args.top == 0 { usize::MAX } else { args.top });
    let source = if scan.selected < scan.spans {
        format!("{} (selected {} of its {} spans)", path.display(), scan.selected, scan.spans)
    } else {
        path.display().to_string()
    };
    if args.json {
        println_stdout(&serde_json::to_string_pretty(&to_json(&r, path))?)?;
    } else {
        print_stdout(&r.render(&source))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The flags of `report --otlp`'s profile that spans do not have, refused by name.
fn refuse_profile_flags(args: &ReportArgs) -> Result<()> {
    let files = &args.files;
    let refused = [
        (args.by.is_some(), "--by", "it chooses the rows of a profile's summary; --traces reports requests by route"),
        (files.pprof.is_some(), "--pprof", "spans are not samples: draw a profile with report --otlp"),
        (files.flamegraph.is_some(), "--flamegraph", "spans are not samples: draw a profile with report --otlp"),
        (files.folded.is_some(), "--folded", "spans are not samples: fold a profile with report --otlp"),
        (files.select.kind.is_some(), "--kind", "it chooses which samples of a profile are drawn; spans have no kind"),
    ];
    match refused.into_iter().find(|(given, _, _)| *given) {
        Some((_, flag, why)) => Err(usage(format!("{flag}: not with --traces: {why}"))),
        None => Ok(()),
    }
}

/// `--pid`, `--service`, `--trace`, `--span`, `--attr` as a selection of spans.
fn selection(args: &ReportArgs) -> Result<SpanSelection> {
    let filter = args.files.select.filter()?;
    Ok(SpanSelection {
        pids: args.pid.clone(),
        service: args.service.clone(),
        trace_id: filter.trace_id,
        span_id: filter.span_id,
        attrs: filter.attrs,
    })
}

/// A selection that kept no span is a usage error naming its flags and what the file holds.
fn check_selection(args: &ReportArgs, scan: &TracesScan, path: &Path) -> Result<()> {
    let select = &args.files.select;
    let given: Vec<&str> = [
        (!args.pid.is_empty(), "--pid"),
        (args.service.is_some(), "--service"),
        (select.trace.is_some(), "--trace"),
        (select.span.is_some(), "--span"),
        (!select.attr.is_empty(), "--attr"),
    ]
    .into_iter()
    .filter_map(|(on, flag)| on.then_some(flag))
    .collect();
    if given.is_empty() || scan.selected > 0 {
        return Ok(());
    }
    let list = |items: Vec<String>| {
        let more = if items.len() >= HELD_SHOWN { ", …" } else { "" };
        if items.is_empty() {
            "none".to_string()
        } else {
            format!("{}{more}", items.join(", "))
        }
    };
    Err(usage(format!(
        "{}: no span of {} matches ({} spans; services {}; process.pid {})",
        given.join("/"),
        path.display(),
        scan.spans,
        list(scan.services.iter().cloned().collect()),
        list(scan.pids.iter().map(i64::to_string).collect()),
    )))
}

fn explanation(e: &Explanation) -> Value {
    let per = |ms: f64| if e.enriched == 0 { 0.0 } else { ms / e.enriched as f64 };
    json!({
        "requests": e.requests,
        "enriched": e.enriched,
        "mean_ms": per(e.duration_ms),
        "own_cpu_ms": per(e.own_cpu_ms),
        "other_requests_cpu_ms": per(e.other_requests_cpu_ms),
        // null: not measured (the agent ran without --off-cpu / --alloc).
        "other_requests_off_cpu_ms": mean(e.other_requests_off_cpu_ms, e.off_cpu_measured),
        "no_span_cpu_ms": per(e.no_span_cpu_ms),
        "blocked_in_it_ms": mean(e.blocked_in_it_ms, e.off_cpu_measured),
        "idle_ms": mean(e.idle_ms, e.off_cpu_measured),
        "alloc_bytes": mean(e.alloc_bytes as f64, e.alloc_measured).map(|b| b.round() as i64),
        "samples": e.samples,
        "own_frames": e.own_frames.iter().map(|(f, ms)| json!({ "frame": f, "ms": per(*ms) })).collect::<Vec<_>>(),
        "held_by": e.held_by.iter().map(|(who, ms, frame)| json!({ "who": who, "ms": per(*ms), "top_frame": frame })).collect::<Vec<_>>(),
        "alloc_frames": e.alloc_frames.iter().map(|(f, bytes)| json!({ "frame": f, "bytes": mean(*bytes, e.alloc_measured) })).collect::<Vec<_>>(),
    })
}

/// The report as JSON: per request, ms (means over the requests a block covers).
fn to_json(r: &Report, path: &Path) -> Value {
    json!({
        "file": path.display().to_string(),
        "spans": r.spans,
        "routes": r.routes.iter().map(|x| json!({
            "route": x.route,
            "requests": x.requests,
            "enriched": x.enriched,
            "p50_ms": x.p50_ms, "p90_ms": x.p90_ms, "p99_ms": x.p99_ms, "max_ms": x.max_ms,
            "slowest_1_percent": { "from_ms": x.slowest_from_ms, "per_request": explanation(&x.slowest) },
        })).collect::<Vec<_>>(),
        "slowest": r.slowest.iter().map(|(s, e)| json!({
            "trace_id": s.trace_id, "span_id": s.span_id, "service": s.service, "route": s.route_or_name(),
            "duration_ms": s.duration_ms(), "explanation": explanation(e),
        })).collect::<Vec<_>>(),
    })
}
