//! `thread-ctx report --traces FILE`: the slow requests of enriched spans, read from the
//! Collector's file exporter (`thread_ctx_otlp::traces`) and explained per route
//! (`thread_ctx_output::slow_requests`), as text or JSON.

use crate::console::{print_stdout, println_stdout, say};
use crate::exit_codes::existing_file;
use anyhow::Result;
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;
use thread_ctx_otlp::traces::read_traces_file;
use thread_ctx_output::slow_requests::{mean, report, Explanation, Report};

pub fn run(path: &Path, slowest: usize, top: usize, as_json: bool) -> Result<ExitCode> {
    existing_file("--traces", path)?;
    let (spans, tail) = read_traces_file(path)?;
    if tail > 0 {
        say!("thread-ctx: note: the last {tail} bytes of {} are not a whole message yet (is the Collector still writing?): left out", path.display());
    }
    // --top 0 means all, as for the profile summary.
    let r = report(&spans, slowest, if top == 0 { usize::MAX } else { top });
    if as_json {
        println_stdout(&serde_json::to_string_pretty(&to_json(&r, path))?)?;
    } else {
        print_stdout(&r.render(&path.display().to_string()))?;
    }
    Ok(ExitCode::SUCCESS)
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
