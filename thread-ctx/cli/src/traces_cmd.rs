//! `thread-ctx report --traces FILE`: the slow requests of enriched spans, read from the
//! Collector's file exporter (`thread_ctx_otlp::traces`) and explained per route
//! (`thread_ctx_output::slow_requests`), as text or JSON.

use crate::console::{print_stdout, println_stdout, say};
use crate::exit_codes::{existing_file, usage};
use anyhow::Result;
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;
use thread_ctx_otlp::traces::{scan_traces_file, SpanSelection, TracesScan, HELD_SHOWN};
use thread_ctx_output::slow_requests::{mean, Explanation, Latencies, Report};

/// How `report --traces` was asked to run: `selected_by` names the flags behind `selection`.
pub struct TracesReport<'a> {
    pub selection: SpanSelection,
    pub selected_by: Vec<&'static str>,
    pub slowest: usize,
    pub top: usize,
    pub json: bool,
    pub path: &'a Path,
}

/// `report --traces`: the file is read twice, a message at a time (each route's latency first,
/// then its slowest 1 % explained), so memory does not grow with the spans' contents.
pub fn run(how: TracesReport) -> Result<ExitCode> {
    let path = how.path;
    existing_file("--traces", path)?;
    let mut latencies = Latencies::new(how.slowest);
    let scan = scan_traces_file(path, &how.selection, None, |s| latencies.add(&s))?;
    if scan.incomplete_tail > 0 {
        say!(
            "thread-ctx: note: the last {} bytes of {} are not a whole message yet (is the Collector still writing?): left out",
            scan.incomplete_tail,
            path.display()
        );
    }
    check_selection(&how.selected_by, &scan, path)?;
    let mut tails = latencies.tails();
    scan_traces_file(path, &how.selection, Some(scan.whole_bytes), |s| tails.add(&s))?;
    // --top 0 means all, as for the profile summary.
    let r = tails.finish(if how.top == 0 { usize::MAX } else { how.top });
    let source = if scan.selected < scan.spans {
        format!("{} (selected {} of its {} spans)", path.display(), scan.selected, scan.spans)
    } else {
        path.display().to_string()
    };
    if how.json {
        println_stdout(&serde_json::to_string_pretty(&to_json(&r, path))?)?;
    } else {
        print_stdout(&r.render(&source))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A selection that kept no span is a usage error naming its flags and what the file holds.
fn check_selection(given: &[&str], scan: &TracesScan, path: &Path) -> Result<()> {
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
        // null: not measured (no sample of their threads supported a CPU figure; the agent ran
        // without --off-cpu / --alloc).
        "own_cpu_ms": mean(e.own_cpu_ms, e.cpu_measured),
        "other_requests_cpu_ms": mean(e.other_requests_cpu_ms, e.cpu_measured),
        "other_requests_off_cpu_ms": mean(e.other_requests_off_cpu_ms, e.off_cpu_measured),
        "no_span_cpu_ms": mean(e.no_span_cpu_ms, e.cpu_measured),
        "blocked_in_it_ms": mean(e.blocked_in_it_ms, e.off_cpu_measured),
        "idle_ms": mean(e.idle_ms, e.off_cpu_measured),
        "cpu_starved_ms": mean(e.cpu_starved_ms, e.runnable_measured),
        "alloc_bytes": mean(e.alloc_bytes as f64, e.alloc_measured).map(|b| b.round() as i64),
        "samples": e.samples,
        "own_frames": e.own_frames.iter().map(|(f, ms)| json!({ "frame": f, "ms": mean(*ms, e.cpu_measured) })).collect::<Vec<_>>(),
        "held_by": e.held_by.iter().map(|(who, ms, frame)| json!({ "who": who, "ms": per(*ms), "top_frame": frame })).collect::<Vec<_>>(),
        // The rest of the other requests' time: with held_by, it adds up to it.
        "held_by_others_ms": per(e.held_by_rest_ms),
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
            // Where the route came from when the spans had no http.route: "samples" or "path".
            "route_source": x.route_source,
            "requests": x.requests,
            "enriched": x.enriched,
            "p50_ms": x.p50_ms, "p90_ms": x.p90_ms, "p99_ms": x.p99_ms, "max_ms": x.max_ms,
            "slowest_1_percent": { "from_ms": x.slowest_from_ms, "per_request": explanation(&x.slowest) },
        })).collect::<Vec<_>>(),
        "waiting_ms": r.waiting_ms,
        "who_made_others_wait": r.inflicted.iter().map(|i| json!({
            "route": i.route, "top_frame": i.frame, "inflicted_ms": i.ms, "delayed_requests": i.delayed, "share": i.share,
        })).collect::<Vec<_>>(),
        "slowest": r.slowest.iter().map(|(s, e)| json!({
            "trace_id": s.trace_id, "span_id": s.span_id, "service": s.service, "route": s.route_or_name(),
            "duration_ms": s.duration_ms(), "explanation": explanation(e),
        })).collect::<Vec<_>>(),
    })
}
