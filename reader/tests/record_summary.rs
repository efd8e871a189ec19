//! `thread-ctx record`'s summary modes on a real Node workload (our addon,
//! the OpenTelemetry SDK, http.route registered as a record attribute), as
//! root: by http.route (the default when the process registered it), by
//! trace, by span, and `--top` folding the rest into one "other" row, each
//! with its groups' top frames.

mod common;
mod profile_common;

use common::*;
use profile_common::*;

/// Records until `done` holds for the summary (the machine may be busy), at most 6 times.
fn summary_until(pid: i32, extra: &[&str], what: &str, done: impl Fn(&str) -> bool) -> String {
    let pid = pid.to_string();
    let mut last = String::new();
    for _ in 0..6 {
        let args = [&["record", pid.as_str(), "--hz", "199", "--duration", "1500ms"][..], extra].concat();
        let r = thread_ctx(&args);
        assert_eq!(r.code, 0, "`thread-ctx {}` failed: {}", args.join(" "), r.stderr);
        if done(&r.stdout) {
            return r.stdout;
        }
        last = r.stdout;
    }
    panic!("{what}: 6 recordings of the workload never gave the expected summary; the last:\n{last}");
}

/// The summary's rows: (first word, samples) of each line between the header and the "(no span)" row.
fn rows(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .skip(2)
        .take_while(|l| !l.starts_with("(no span)"))
        .filter(|l| !l.starts_with("    top: "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let samples = w.iter().find_map(|x| x.parse::<u64>().ok()).unwrap_or(0);
            (w[0].to_string(), samples)
        })
        .collect()
}

#[test]
fn summary_groups_by_route_trace_and_span_with_top_frames() {
    if !ebpf_or_skip("summary_groups_by_route_trace_and_span_with_top_frames") {
        return;
    }
    let _one = one_at_a_time();
    let w = workload("cpu");
    let spans = spans(&w, 2, STARTUP);
    let by_name = |n: &str| spans.iter().find(|s| s.name == n).unwrap().clone();
    let (alpha, beta) = (by_name("alpha"), by_name("beta"));
    let has = |text: &str, a: &str, b: &str| text.contains(a) && text.contains(b);

    let by_route = summary_until(w.pid, &[], "default (http.route)", |t| has(t, "top: burnAlpha", "top: burnBeta"));
    let _ = writeln_stderr(&format!("summary by http.route (default):\n{by_route}"));
    let lines: Vec<&str> = by_route.lines().collect();
    assert!(lines[0].starts_with(&format!("pid {} (profile-fixture): ", w.pid)) && lines[0].contains("CPU samples at 199 Hz"), "{by_route}");
    assert!(lines[1].starts_with("HTTP.ROUTE") && lines[1].contains("TRACES"), "{by_route}");
    let routes: Vec<String> = rows(&by_route).into_iter().map(|r| r.0).collect();
    assert!(routes.contains(&"/alpha".into()) && routes.contains(&"/beta".into()), "{by_route}");
    let alpha_row = by_route.lines().position(|l| l.starts_with("/alpha ")).unwrap();
    assert!(lines[alpha_row + 1].starts_with("    top: burnAlpha (profile_workload.js:"), "each route's top frames follow it:\n{by_route}");
    assert!(by_route.lines().any(|l| l.starts_with("total ")), "{by_route}");
    assert!(by_route.contains("% of CPU samples carry a span; ") && by_route.contains("% of those carry http.route"), "{by_route}");

    let by_trace = summary_until(w.pid, &["--by", "trace"], "--by trace", |t| has(t, &alpha.trace_id, &beta.trace_id));
    assert!(by_trace.lines().nth(1).unwrap().starts_with("TRACE ") && by_trace.contains("SPANS"), "{by_trace}");
    let alpha_line = by_trace.lines().find(|l| l.starts_with(&alpha.trace_id)).unwrap();
    assert!(alpha_line.split_whitespace().nth(4) == Some("1"), "the alpha trace has one span: {alpha_line}");

    let by_span = summary_until(w.pid, &["--by", "span"], "--by span", |t| has(t, &alpha.span_id, &beta.span_id));
    let alpha_line = by_span.lines().find(|l| l.starts_with(&format!("{} {}", alpha.trace_id, alpha.span_id))).unwrap();
    assert!(alpha_line.ends_with("http.route=/alpha"), "a span row shows its record attributes: {alpha_line}");

    let top1 = summary_until(w.pid, &["--top", "1"], "--top 1", |t| t.contains("(other: 1 more)"));
    let r = rows(&top1);
    assert_eq!(r.len(), 2, "one route and the other row:\n{top1}");
    assert!(r[0].1 >= r[1].1, "the row shown is the bigger one:\n{top1}");
}
