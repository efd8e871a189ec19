//! `thread-ctx record`'s summary modes on a real Node workload (our addon,
//! the OpenTelemetry SDK, http.route registered as a record attribute), as
//! root: by http.route (the default when the process registered it), by
//! trace, by span, and `--top` folding the rest into one "other" row, each
//! with its groups' top frames.

use thread_ctx_test_support::process as common;
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

/// The off-CPU workload with `--off-cpu --folded`: the total row's BLOCKED and PREEMPTED
/// milliseconds are the sums of the rows above it, and the folded file (microseconds, as --help
/// says, with the two kinds marked) holds the same time and the CPU samples at one period each.
#[test]
fn off_cpu_totals_add_up_in_the_table_and_in_the_folded_file() {
    if !ebpf_or_skip("off_cpu_totals_add_up_in_the_table_and_in_the_folded_file") {
        return;
    }
    let _one = one_at_a_time();
    let w = workload("offcpu");
    spans(&w, 2, STARTUP);
    let dir = scratch("off_cpu_totals");
    let folded = dir.join("offcpu.folded");
    let (hz, pid) = (99u32, w.pid.to_string());
    let r = thread_ctx(&["record", &pid, "--hz", "99", "--duration", "2s", "--off-cpu", "--top", "0", "--folded", folded.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = r.stdout;
    let header = text.lines().nth(1).unwrap();
    assert!(header.contains("BLOCKED ms  PREEMPTED ms"), "{text}");
    // The last two columns of every row, in ms; the rows are those between the header and "total".
    let off = |l: &str| {
        let w: Vec<f64> = l.split_whitespace().rev().take(2).map(|v| v.parse().unwrap_or(f64::NAN)).collect();
        (w[1], w[0])
    };
    let body: Vec<&str> = text.lines().skip(2).take_while(|l| !l.starts_with("total")).filter(|l| !l.starts_with("    top: ")).collect();
    let total = off(text.lines().find(|l| l.starts_with("total")).expect(&text));
    let summed = body.iter().map(|l| off(l)).fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    // Each cell is rounded to 0.1 ms.
    let slack = 0.05 * (body.len() + 1) as f64;
    assert!(total.0 > 0.0, "the workload blocks: {text}");
    assert!((total.0 - summed.0).abs() <= slack && (total.1 - summed.1).abs() <= slack, "total {total:?} vs rows {summed:?}:\n{text}");

    let lines = std::fs::read_to_string(&folded).unwrap();
    let (mut blocked_us, mut preempted_us, mut cpu_us) = (0u64, 0u64, 0u64);
    for l in lines.lines() {
        let (stack, value) = l.rsplit_once(' ').unwrap();
        let v: u64 = value.parse().unwrap();
        if stack.ends_with("[off-CPU: blocked]_[k]") {
            blocked_us += v;
        } else if stack.ends_with("[off-CPU: preempted]_[k]") {
            preempted_us += v;
        } else {
            cpu_us += v;
        }
    }
    // Each folded line is rounded to 1 µs.
    let n = lines.lines().count() as f64;
    for (what, table_ms, folded_us) in [("blocked", total.0, blocked_us), ("preempted", total.1, preempted_us)] {
        assert!((table_ms - folded_us as f64 / 1000.0).abs() <= slack + n / 1000.0, "{what}: table {table_ms} ms, folded {folded_us} µs");
    }
    let samples: u64 = text.lines().find(|l| l.starts_with("total")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    let period_us = 1_000_000 / u64::from(hz);
    assert!(cpu_us.abs_diff(samples * period_us) <= samples + n as u64, "{samples} CPU samples at {period_us} µs each vs {cpu_us} µs folded");
}

/// `--by KEY` with a key the process never registered as a record attribute: refused before
/// recording, naming the keys its records can carry (its process context's key map).
#[test]
fn by_a_key_no_record_carries_names_the_keys_they_carry() {
    if !ebpf_or_skip("by_a_key_no_record_carries_names_the_keys_they_carry") {
        return;
    }
    let _one = one_at_a_time();
    let w = workload("cpu");
    let r = thread_ctx(&["record", &w.pid.to_string(), "--duration", "10s", "--by", "route"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("--by route: no record of process") && r.stderr.contains("carries route; they carry http.route"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "nothing recorded: {}", r.stdout);
}
