//! The README's demo (`node demo/run.js`) end to end. As root: the demo service (NodeSDK with
//! otel-thread-ctx's context manager, its spans over OTLP) under load, `thread-ctx agent`
//! streaming to the project's OpenTelemetry Collector (spanprofiles, spanmetrics, Jaeger), and
//! `thread-ctx report` on what the Collector received, then `report --traces` on the spans it
//! enriched. The test reads the Collector's files itself too (the library's decoders) and checks
//! the demo's claims against them: routes with plausible shares, >= 90 % of the samples in the
//! service's request code linked to a trace and span, the service's name and pid in the resource,
//! build ids, a flame graph, >= 90 % of the requests' spans enriched, and the slowest requests
//! explained with the lines that held them.
//! Without root the demo falls back to `thread-ctx dump` snapshots and says so (run here as uid
//! 65534 through setpriv when the tests run as root).

use thread_ctx_test_support::process as common;
use thread_ctx_test_support::sampler as sampler_common;

use common::package_dir;
use sampler_common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use thread_ctx_otlp::into_profile::{processes, ReceivedProcess};
use thread_ctx_otlp::received::{read_exporter_file, resolve};
use thread_ctx_otlp::traces::read_traces_file;
use thread_ctx_output::slow_requests::Span;

/// Demo lengths tried in turn until a run has what the test needs: on a busy machine the service
/// gets less CPU (and its start-up is a larger share of a short run), so the demo runs longer.
const SECONDS: [&str; 3] = ["6", "15", "30"];
/// CPU samples of the service's own request code (frames in demo/service.js) a run needs for
/// its shares to mean something.
const MIN_REQUEST_SAMPLES: u64 = 300;
/// ptrace snapshots a run without root needs.
const MIN_SNAPSHOTS: u64 = 3;
/// The service's file: every function in it runs inside a request's span (its span log is in
/// span-log.js), so samples with a frame of it should link to a trace and span.
const SERVICE_FILE: &str = "demo/service.js";

struct DemoRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// What the Collector wrote (--otlp-out).
    received: PathBuf,
    /// The spans it enriched (--traces-out).
    traces: PathBuf,
}

/// `node demo/run.js --seconds S` for each S of SECONDS until `enough` holds (or the last ran).
fn run_demo_until(as_user: Option<&[&str]>, extra: &[&str], enough: impl Fn(&DemoRun) -> bool) -> DemoRun {
    let mut run = run_demo(as_user, SECONDS[0], extra);
    for seconds in &SECONDS[1..] {
        if run.code != Some(0) || enough(&run) {
            break;
        }
        run = run_demo(as_user, seconds, extra);
    }
    run
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("demo-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `node demo/run.js --seconds SECONDS EXTRA...`, optionally under `setpriv` (as another user), once.
fn run_demo(as_user: Option<&[&str]>, seconds: &str, extra: &[&str]) -> DemoRun {
    let root = package_dir();
    let demo = root.join("demo/run.js");
    let received = scratch().join(format!("received-{seconds}s.pb"));
    let traces = scratch().join(format!("traces-{seconds}s.pb"));
    let mut cmd = match as_user {
        Some(setpriv_args) => {
            let mut c = Command::new("setpriv");
            c.args(setpriv_args).arg("node");
            c
        }
        None => Command::new("node"),
    };
    // HOME: the unprivileged user's may not exist.
    cmd.arg(&demo)
        .args(["--seconds", seconds])
        .args(extra)
        .current_dir(&root)
        .env("THREAD_CTX_BIN", env!("CARGO_BIN_EXE_thread-ctx"))
        .env("HOME", "/tmp");
    if as_user.is_none() {
        cmd.arg("--otlp-out").arg(&received).arg("--traces-out").arg(&traces);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("running the demo ({cmd:?}): {e}"));
    DemoRun {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
        received,
        traces,
    }
}

/// N in a "PREFIX...): N ..." line, e.g. "snapshots of the event-loop thread (tid 7): 64".
fn first_number_after(stdout: &str, prefix: &str) -> Option<u64> {
    stdout.lines().find_map(|l| l.strip_prefix(prefix)?.split_once("): ")?.1.split(' ').next()?.parse().ok())
}

fn snapshots(stdout: &str) -> Option<u64> {
    first_number_after(stdout, "snapshots of the event-loop thread (tid ")
}

fn assert_ran(test: &str, r: &DemoRun) {
    assert_eq!(r.code, Some(0), "{test}: expected the demo to exit 0\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
}

/// The service's pid, from "demo service pid N on ...".
fn service_pid(stdout: &str) -> Option<u32> {
    stdout.lines().find_map(|l| l.strip_prefix("demo service pid ")?.split(' ').next()?.parse().ok())
}

/// What the Collector received from the demo's service.
fn received_from_service(r: &DemoRun) -> Option<ReceivedProcess> {
    let pid = service_pid(&r.stdout)?;
    let file = read_exporter_file(&r.received).ok()?;
    let samples: Vec<_> = file.messages.iter().flat_map(|m| resolve(m).expect("a well-formed message")).collect();
    processes(&samples).into_iter().find(|p| p.pid() == Some(pid))
}

/// (CPU samples with a frame in the service's file, how many of them link to a trace and span).
fn request_code_samples(p: &ReceivedProcess) -> (u64, u64) {
    let in_service =
        |e: &thread_ctx_profile::Entry| e.stack.iter().any(|f| p.profile.frame(f).file.as_deref().is_some_and(|file| file.ends_with(SERVICE_FILE)));
    let cpu = p.profile.entries.iter().filter(|e| !e.kind.is_off_cpu() && in_service(e));
    cpu.fold((0, 0), |(all, linked), e| (all + e.count, linked + if e.trace_id.is_some() && e.span_id.is_some() { e.count } else { 0 }))
}

/// The SAMPLES and % columns of the report's row for `label` (a route, "(no span)", "total").
fn row(stdout: &str, label: &str) -> Option<(u64, f64)> {
    stdout.lines().find_map(|l| {
        let rest = l.strip_prefix(label)?.trim_start();
        let mut cols = rest.split_whitespace();
        Some((cols.next()?.parse().ok()?, cols.next()?.trim_end_matches('%').parse().ok()?))
    })
}

/// The GNU build id `readelf -n` reports for a file.
fn readelf_build_id(path: &Path) -> Option<String> {
    let out = Command::new("readelf").arg("-n").arg(path).output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
}

#[test]
fn demo_streams_through_the_agent_and_collector_and_reports_what_arrived() {
    let test = "demo_streams_through_the_agent_and_collector_and_reports_what_arrived";
    if !ebpf_or_skip(test) {
        return;
    }
    let _serial = one_at_a_time();
    let dir = scratch();
    let all_svg = dir.join("all.svg");
    let extra = ["--flamegraph-all", all_svg.to_str().unwrap()];
    let r = run_demo_until(None, &extra, |r| received_from_service(r).is_some_and(|p| request_code_samples(&p).0 >= MIN_REQUEST_SAMPLES));
    assert_ran(test, &r);
    let out = &r.stdout;
    for step in [
        "Jaeger v2 (memory storage)",
        "OpenTelemetry Collector ",
        "thread-ctx agent --pid ",
        "agent: SIGTERM after ",
        "what the Collector received (thread-ctx report --otlp ",
        "why the slowest requests were slow",
    ] {
        assert!(out.contains(step), "{test}: expected {step:?} in the demo's output:\n{out}");
    }
    let pid = service_pid(out).unwrap_or_else(|| panic!("{test}: no service pid:\n{out}"));
    let p = received_from_service(&r)
        .unwrap_or_else(|| panic!("{test}: the Collector received nothing from pid {pid} ({}):\n{out}", r.received.display()));

    // >= 90 % of the samples in the service's request code link to a trace and span.
    let (in_requests, linked) = request_code_samples(&p);
    assert!(in_requests >= MIN_REQUEST_SAMPLES / 2, "{test}: only {in_requests} samples in {SERVICE_FILE} reached the Collector:\n{out}");
    assert!(linked * 10 >= in_requests * 9, "{test}: only {linked} of {in_requests} samples in {SERVICE_FILE} link to a span:\n{out}");

    // The resource is the service's, from its process context (NodeSDK's resource).
    assert_eq!(p.service_name(), Some("demo-shop"), "{test}: resource {:?}", p.resource);
    assert!(out.contains("  resource: service.name=demo-shop service.version=1.0.0 "), "{test}: the report names the service:\n{out}");
    // The report's figures are those of the file.
    let total = p.cpu_samples();
    assert_eq!(row(out, "total").map(|r| r.0), Some(total), "{test}: the report's total is what the Collector received:\n{out}");
    let with_span: u64 = p.profile.entries.iter().filter(|e| !e.kind.is_off_cpu() && e.trace_id.is_some()).map(|e| e.count).sum();
    let carried = format!("{:.1}% of CPU samples carry a span", 100.0 * with_span as f64 / total as f64);
    assert!(out.contains(&carried), "{test}: expected {carried:?}:\n{out}");

    // Routes from the samples' http.route: the two CPU-heavy routes carry most of the CPU.
    let (search, report) = (row(out, "/api/search"), row(out, "/api/report"));
    let (Some(search), Some(report)) = (search, report) else { panic!("{test}: expected rows for /api/search and /api/report:\n{out}") };
    assert!(search.1 >= 10.0 && report.1 >= 5.0 && search.1 + report.1 >= 50.0, "{test}: implausible route shares {search:?} {report:?}:\n{out}");
    assert!(row(out, "/api/users/:id").is_some_and(|r| r.1 < search.1), "{test}: /api/users/:id burns little:\n{out}");

    // Build ids: node's, as readelf reads it (node's own code is on every stack).
    if let Some(node) = which_node() {
        let id = readelf_build_id(&node).unwrap_or_else(|| panic!("{test}: no build id in {}", node.display()));
        assert!(out.contains(&format!("{} {id}", node.display())), "{test}: expected node's build id {id} in the report:\n{out}");
    }

    // Flame graphs drawn from what the Collector received.
    let all = std::fs::read_to_string(&all_svg).unwrap_or_default();
    assert!(
        all.contains("rankSearchResults") && all.contains("renderReport"),
        "{test}: the flame graph of everything names the hot functions ({})",
        all_svg.display()
    );

    // The spans the connector enriched: the requests' spans carry what their thread did.
    let (spans, _) = read_traces_file(&r.traces).unwrap_or_else(|e| panic!("{test}: reading {}: {e}", r.traces.display()));
    let requests: Vec<&Span> = spans.iter().filter(|s| s.entry && s.service == "demo-shop").collect();
    let enriched = requests.iter().filter(|s| s.joined.is_some()).count();
    assert!(!requests.is_empty() && enriched * 10 >= requests.len() * 9, "{test}: {enriched} of {} request spans enriched", requests.len());
    // The explanation of the slowest requests: per route and per request, the parts of their time,
    // and who held the loop, named by a line of the service.
    let why = out.split("why the slowest requests were slow").nth(1).unwrap_or_default();
    for part in ["own CPU", "other requests on its thread, on CPU", "idle (waiting for I/O, timers)", "the 3 slowest requests:"] {
        assert!(why.contains(part), "{test}: expected {part:?} in the explanation:\n{why}");
    }
    let slowest = requests.iter().filter(|s| s.joined.is_some()).map(|s| s.duration_ns).max().unwrap_or(0);
    let first =
        why.split("the 3 slowest requests:").nth(1).and_then(|t| t.trim_start().split(" ms").next()).and_then(|ms| ms.trim().parse::<f64>().ok());
    assert!(
        first.is_some_and(|ms| (ms - slowest as f64 / 1e6).abs() < 0.1),
        "{test}: the first of the slowest requests ({first:?} ms) is the slowest enriched span ({} ms):\n{why}",
        slowest as f64 / 1e6
    );
    assert!(
        why.lines().any(|l| l.trim_start().starts_with("held by") && l.contains("(service.js:")),
        "{test}: expected the requests that held the loop named with a line of the service:\n{why}"
    );
    // Who made others wait, read back from Prometheus, and an exemplar opening its trace in
    // Jaeger: where setup built Prometheus (scripts/test.sh builds it beside the Rust tests).
    if package_dir().join("target/prometheus/prometheus").exists() {
        for part in [
            "who made others wait, read back from Prometheus (PromQL: ",
            "an exemplar of the slowest latency bucket",
            "opens in Jaeger (/api/v3/traces/",
        ] {
            assert!(out.contains(part), "{test}: expected {part:?} in the demo's output:\n{out}");
        }
        let table = out.split("who made others wait, read back from Prometheus").nth(1).unwrap_or_default();
        assert!(table.lines().nth(3).is_some_and(|l| l.contains("(service.js:")), "{test}: the top holder is a line of the service:\n{table}");
        // One truth: the report's top holder route and line (from the spans) and the same route
        // and line in Prometheus (its kinds together) agree: each span's entries are rounded to
        // 0.1 ms, and Prometheus was read just before the Collector's last send.
        let report_rows = table_rows(why, "who made others wait: the time requests waited", 2);
        let prom_rows = table_rows(table, "", 3);
        let (route, line, ms) = report_rows
            .first()
            .map(|r| (r[0].clone(), r[1..r.len() - 4].join(" "), r[r.len() - 4].parse::<f64>().unwrap_or(0.0)))
            .unwrap_or_default();
        let prom: f64 = prom_rows
            .iter()
            .filter(|r| r.len() > 5 && r[0] == route && line.starts_with(&r[1..r.len() - 5].join(" ")))
            .map(|r| r[r.len() - 4].parse::<f64>().unwrap_or(0.0))
            .sum();
        assert!(
            ms > 0.0 && (prom - ms).abs() <= 0.05 * ms,
            "{test}: report --traces says {route} {line} inflicted {ms} ms, Prometheus {prom} ms:\n{why}\n{table}"
        );
        let _ = writeln!(std::io::stderr(), "{test}: {route} {line} inflicted {ms} ms (report --traces), {prom:.1} ms (Prometheus)");
    } else {
        // scripts/test.sh builds Prometheus before the Rust tests run: under CI a missing one is a failure.
        assert!(std::env::var("REQUIRE_EBPF").as_deref() != Ok("1"), "{test}: target/prometheus/prometheus is not built (REQUIRE_EBPF=1)");
        let _ = writeln!(std::io::stderr(), "SKIPPED part of {test}: target/prometheus/prometheus is not built, the demo left Prometheus out");
    }
    let _ = writeln!(
        std::io::stderr(),
        "{test}: {total} CPU samples received from pid {pid}; {linked}/{in_requests} in {SERVICE_FILE} linked; /api/search {:.1}%, /api/report {:.1}%",
        search.1,
        report.1
    );
}

/// The rows of the table whose title line contains `title` (the text's start where empty), the
/// first `skip` lines from the title on left out: each row's words, up to the first blank line.
fn table_rows(text: &str, title: &str, skip: usize) -> Vec<Vec<String>> {
    let from = text.find(title).unwrap_or(text.len());
    text[from..].lines().skip(skip).take_while(|l| !l.trim().is_empty()).map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
}

/// The node binary the demo ran (the service, gone by now, ran the same: process.execPath).
fn which_node() -> Option<PathBuf> {
    let out = Command::new("node").args(["-p", "process.execPath"]).output().ok()?;
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

#[test]
fn demo_without_root_falls_back_to_dump_snapshots() {
    let test = "demo_without_root_falls_back_to_dump_snapshots";
    // SAFETY: geteuid has no preconditions.
    let as_root = unsafe { libc::geteuid() } == 0;
    let nobody: &[&str] = &["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"];
    if as_root {
        let demo = package_dir().join("demo/run.js");
        let readable = Command::new("setpriv").args(nobody).args(["test", "-r"]).arg(&demo).status();
        if !readable.is_ok_and(|s| s.success()) {
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: uid 65534 cannot read {} (or setpriv is missing)", demo.display());
            return;
        }
    }
    let _serial = one_at_a_time();
    let r = run_demo_until(as_root.then_some(nobody), &[], |r| snapshots(&r.stdout).is_some_and(|n| n >= MIN_SNAPSHOTS));
    assert_ran(test, &r);
    let out = &r.stdout;
    assert!(
        out.contains("not root: eBPF sampling needs root; falling back to thread-ctx dump snapshots"),
        "{test}: expected the demo to say it falls back to dump snapshots:\n{out}"
    );
    let snapshots = snapshots(out).unwrap_or_else(|| panic!("{test}: no \"snapshots of the event-loop thread\" line:\n{out}"));
    assert!(snapshots >= MIN_SNAPSHOTS, "{test}: expected >= {MIN_SNAPSHOTS} snapshots within {} s, saw {snapshots}:\n{out}", SECONDS[2]);
    assert!(out.contains("Routes:\n| route | snapshots |"), "{test}: expected the routes table over snapshots:\n{out}");
}
