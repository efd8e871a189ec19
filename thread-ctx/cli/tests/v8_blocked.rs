//! Blocked time names the JS function that blocked, to the line, on every
//! supported Node whose V8 layout says where the isolate keeps its last exit
//! from JS, sampled from outside by the eBPF sampler (`thread-ctx record
//! --off-cpu --format jsonl --frames`, as root, no profiling flags): one process
//! per version blocks its main thread in phases (the fixture prints each one's
//! CLOCK_MONOTONIC start) in Atomics.wait, a synchronous fs read of a FIFO, a
//! synchronous child process and a native addon's nanosleep. libc has no frame
//! pointers, so the walk stops there; the sampler goes on from V8's exit frame.
//! Per route, at least 90 % of the main thread's off-CPU time in that phase must
//! name the route's function at the line of its blocking call.

use thread_ctx_test_support::process as common;
mod profile_common;

use common::*;
use profile_common::{record_frames, Phases};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const ROUTES: [(&str, &str); 4] =
    [("Atomics", "blockInAtomicsWait"), ("Fs", "blockInFsRead"), ("Exec", "blockInChildProcess"), ("Addon", "blockInAddon")];
/// Off-CPU intervals and time wanted per route (each blocking call is ~20 ms).
const WANTED_INTERVALS: usize = 20;
const WANTED_NS: u64 = 400_000_000;
/// Recordings stop once every route has its time, or after this long.
const CAP: Duration = Duration::from_secs(60);
/// An interval switched out this close to a phase's start may belong to the one before.
const EDGE_NS: u64 = 3_000_000;

fn v8_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../v8/tests/fixtures")
}

/// The 1-based line of the blocked fixture ending with `// MARK`.
fn marked_line(mark: &str) -> u64 {
    let src = std::fs::read_to_string(v8_fixture().join("blocked.js")).unwrap();
    src.lines().position(|l| l.trim_end().ends_with(&format!("// {mark}"))).unwrap_or_else(|| panic!("no line marked {mark}")) as u64 + 1
}

/// The fixture's Node-API addon, built against `node`'s headers (Node-API is the same on every version).
fn addon(node: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("blocking_addon.node");
    let include = node.parent().unwrap().join("../include/node");
    cc(&[
        "-shared",
        "-fPIC",
        "-O2",
        "-I",
        include.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        v8_fixture().join("blocking_addon.c").to_str().unwrap(),
    ]);
    out
}

#[derive(Default, Debug)]
struct Tally {
    intervals: usize,
    ns: u64,
    named_ns: u64,
    /// Innermost JS frame of the intervals that did not name the route's function, with their time.
    other: BTreeMap<String, u64>,
}

fn run(major: &'static str) {
    let node = NodeRuntime { major: Some(major), flags: &[] }.binary();
    let dir = tempfile::tempdir().unwrap();
    let addon = addon(&node, dir.path());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf();
    let routes: Vec<&str> = ROUTES.iter().map(|(r, _)| *r).collect();
    let mut cmd = std::process::Command::new(&node);
    cmd.arg(test_file("fixtures/v8_blocked.js")).arg(&root).arg(routes.join(",")).arg("600").arg(&addon).arg(dir.path());
    let w = start_writer(cmd, false);
    let mut phases = Phases::new(EDGE_NS);
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let start = Instant::now();
    let enough = |t: &BTreeMap<String, Tally>| routes.iter().all(|r| t.get(*r).is_some_and(|x| x.intervals >= WANTED_INTERVALS && x.ns >= WANTED_NS));
    let mut recordings = 0;
    while !enough(&tallies) && start.elapsed() < CAP {
        recordings += 1;
        for sample in record_frames(&w, &format!("Node {major}"), &["--off-cpu"], &mut phases) {
            if sample["kind"] != "off_cpu" || sample["tid"].as_i64() != Some(w.pid as i64) {
                continue; // the FIFO's writer is a worker thread
            }
            // The time an interval was switched out at.
            let Some(route) = phases.at(sample["time_ns"].as_u64().unwrap_or(0)) else { continue };
            let function = ROUTES.iter().find(|(r, _)| *r == route).unwrap().1;
            let ns = sample["duration_ns"].as_u64().unwrap_or(0);
            let frames = sample["frames"].as_array().cloned().unwrap_or_default();
            let js: Vec<&Value> = frames.iter().filter(|f| f["kind"] == "js").collect();
            let named = js.iter().any(|f| {
                f["name"] == function
                    && f["file"].as_str().is_some_and(|p| p.ends_with("/blocked.js"))
                    && f["line"].as_u64() == Some(marked_line(route))
            });
            let tally = tallies.entry(route.to_string()).or_default();
            tally.intervals += 1;
            tally.ns += ns;
            if named {
                tally.named_ns += ns;
            } else {
                let innermost = js.first().map_or_else(
                    || format!("(no JS frame: {})", frames.iter().take(3).filter_map(|f| f["name"].as_str()).collect::<Vec<_>>().join(";")),
                    |f| format!("{}:{}", f["name"].as_str().unwrap_or("?"), f["line"]),
                );
                *tally.other.entry(innermost).or_default() += ns;
            }
        }
    }
    let mut report = format!("Node {major}: {recordings} recordings, {:.1} s\n", start.elapsed().as_secs_f64());
    let mut failures = Vec::new();
    for (route, function) in ROUTES {
        let t = tallies.remove(route).unwrap_or_default();
        let share = if t.ns == 0 { 0.0 } else { t.named_ns as f64 / t.ns as f64 };
        report += &format!(
            "  {route}: {:.1} % of {:.0} ms off CPU ({} intervals) name {function}:{}; the rest: {:?}\n",
            100.0 * share,
            t.ns as f64 / 1e6,
            t.intervals,
            marked_line(route),
            t.other
        );
        if t.intervals < WANTED_INTERVALS || t.ns < WANTED_NS {
            failures.push(format!("Node {major} {route}: only {} intervals, {} ms off CPU in {} s", t.intervals, t.ns / 1_000_000, CAP.as_secs()));
        } else if share < 0.90 {
            failures.push(format!(
                "Node {major} {route}: {:.1} % of the off-CPU time names {function} at its line (at least 90 % wanted)",
                100.0 * share
            ));
        }
    }
    let _ = writeln_stderr(&report);
    assert!(failures.is_empty(), "{}\n{report}", failures.join("\n"));
}

// One test per Node version whose V8 layout says where the isolate is (`cargo test --test
// v8_blocked node_24` runs one), one at a time, and one that each such version has its row. Node
// 18's V8 keeps the isolate behind a pthread key, which the sampler does not follow: its blocked
// threads keep their native frames only.
thread_ctx_test_support::node_rows!(run,
    thread_ctx_v8::supported::SUPPORTED.iter().filter(|s| s.layout.isolate.is_some()).map(|s| s.node).collect();
    (node_20_names_the_blocking_function_at_its_line, "20"),
    (node_22_names_the_blocking_function_at_its_line, "22"),
    (node_24_names_the_blocking_function_at_its_line, "24"),
    (node_26_names_the_blocking_function_at_its_line, "26"),
);
