//! The README's demo (`node demo/run.js`) end to end: as root it samples the
//! demo service with eBPF and names the routes and spans that burned the CPU;
//! without root it falls back to `thread-ctx dump` snapshots and says so (run
//! here as uid 65534 through setpriv when the tests run as root).

mod common;
mod sampler_common;

use common::package_dir;
use sampler_common::*;
use std::io::Write;
use std::process::Command;

/// Demo lengths tried in turn until a run has what the test needs: on a busy machine the service
/// gets less CPU (and its start-up is a larger share of a short run), so the demo runs longer.
const SECONDS: [&str; 3] = ["4", "12", "30"];
/// Event-loop CPU samples a run needs for its shares to mean something.
const MIN_SAMPLES: u64 = 600;
/// ptrace snapshots a run without root needs.
const MIN_SNAPSHOTS: u64 = 3;

struct DemoRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `node demo/run.js --seconds S` for each S of SECONDS until `enough` holds (or the last ran).
fn run_demo_until(as_user: Option<&[&str]>, enough: impl Fn(&DemoRun) -> bool) -> DemoRun {
    let mut run = run_demo(as_user, SECONDS[0]);
    for seconds in &SECONDS[1..] {
        if run.code != Some(0) || enough(&run) {
            break;
        }
        run = run_demo(as_user, seconds);
    }
    run
}

/// `node demo/run.js --seconds SECONDS`, optionally under `setpriv` (as another user), once.
fn run_demo(as_user: Option<&[&str]>, seconds: &str) -> DemoRun {
    let root = package_dir();
    let demo = root.join("demo/run.js");
    let mut cmd = match as_user {
        Some(setpriv_args) => {
            let mut c = Command::new("setpriv");
            c.args(setpriv_args).arg("node");
            c
        }
        None => Command::new("node"),
    };
    // HOME: the unprivileged user's may not exist.
    cmd.arg(&demo).args(["--seconds", seconds]).current_dir(&root).env("THREAD_CTX_BIN", env!("CARGO_BIN_EXE_thread-ctx")).env("HOME", "/tmp");
    let out = cmd.output().unwrap_or_else(|e| panic!("running the demo ({cmd:?}): {e}"));
    DemoRun { code: out.status.code(), stdout: String::from_utf8_lossy(&out.stdout).into(), stderr: String::from_utf8_lossy(&out.stderr).into() }
}

/// N in a "PREFIX...): N ..." line, e.g. "CPU samples of the event-loop thread (tid 7): 6934".
fn first_number_after(stdout: &str, prefix: &str) -> Option<u64> {
    stdout.lines().find_map(|l| l.strip_prefix(prefix)?.split_once("): ")?.1.split(' ').next()?.parse().ok())
}

fn snapshots(stdout: &str) -> Option<u64> {
    first_number_after(stdout, "snapshots of the event-loop thread (tid ")
}

/// The count in a `| ROUTE | N | P% |` row of the routes table, when present.
fn route_count(stdout: &str, route: &str) -> Option<u64> {
    stdout.lines().find_map(|l| l.strip_prefix(&format!("| {route} | "))?.split(' ').next()?.parse().ok())
}

fn assert_ran(test: &str, r: &DemoRun) {
    assert_eq!(r.code, Some(0), "{test}: expected the demo to exit 0\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
}

#[test]
fn demo_names_routes_and_spans_with_ebpf() {
    let test = "demo_names_routes_and_spans_with_ebpf";
    if !ebpf_or_skip(test) {
        return;
    }
    let _serial = one_at_a_time();
    let r = run_demo_until(None, |r| first_number_after(&r.stdout, "CPU samples of the event-loop thread (tid ").is_some_and(|n| n >= MIN_SAMPLES));
    assert_ran(test, &r);
    let out = &r.stdout;
    assert!(out.contains("sampling with eBPF"), "{test}: expected the eBPF path as root:\n{out}");
    for route in ["/api/search", "/api/report"] {
        let n = route_count(out, route).unwrap_or(0);
        assert!(n > 0, "{test}: expected CPU samples for route {route} in the routes table, saw {n}:\n{out}");
    }
    assert!(out.contains("| db.search | /api/search |"), "{test}: expected the child span db.search in the spans table:\n{out}");
    // The service does little besides requests: nearly all of its event-loop CPU is inside spans.
    let tagged: f64 = out
        .lines()
        .find_map(|l| l.split_once("% of event-loop CPU samples carry a span").map(|(p, _)| p))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{test}: no \"% of event-loop CPU samples carry a span\" line:\n{out}"));
    assert!(tagged >= 80.0, "{test}: expected >= 80% of event-loop CPU samples to carry a span, saw {tagged}%:\n{out}");
    // The service registers http.route as a record attribute: samples carry their request's route,
    // and it is the route of the exported server span of the same trace.
    let percent_before = |marker: &str| -> f64 {
        out.lines()
            .find_map(|l| l.split_once(marker).map(|(p, _)| p.rsplit(' ').next().unwrap_or("").to_string()))
            .and_then(|p| p.trim_end_matches('%').parse().ok())
            .unwrap_or_else(|| panic!("{test}: no \"{marker}\" in the summary line:\n{out}"))
    };
    let carried = percent_before(" carry the route in the record");
    assert!(carried >= 80.0, "{test}: expected >= 80% of span samples to carry http.route in the record, saw {carried}%:\n{out}");
    let agrees = percent_before(" of those it is the route the exported server span reports");
    assert!(agrees >= 99.0, "{test}: expected the record's route to match the exported span's, saw {agrees}%:\n{out}");
    assert!(out.contains("flame graph of the slowest trace"), "{test}: expected the slowest trace's flame graph:\n{out}");
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
    let r = run_demo_until(as_root.then_some(nobody), |r| snapshots(&r.stdout).is_some_and(|n| n >= MIN_SNAPSHOTS));
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
