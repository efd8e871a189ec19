//! Every tier, no profiling flags, on every supported Node, sampled by the
//! eBPF sampler (`thread-ctx record --format jsonl --frames`, as root): one
//! process per version runs one function per V8 tier (pinned by V8's tier
//! filters, which are not profiling flags), each with two hot loops on
//! different lines, in phases whose CLOCK_MONOTONIC start the fixture prints.
//! Per tier and loop, at least 95 % of the samples of the fixture's main thread
//! taken in that phase name the tier's function at that loop's line, named from
//! the process's V8 heap (no perf map, no jitdump), and 90 % say that tier, as
//! the ptrace twin (thread-ctx/v8/tests/live_tiers.rs) requires. Every sample of
//! the thread counts: one with no frame of the fixture named is a wrong one; only
//! a sample whose innermost fixture frame is the phase's driver (the script's
//! top level, between two calls) is not the function's, and those stay under 5 %.
//! Maglev is tested where
//! it is built in (Node 24 and 26; `v8_enable_maglev` is 0 in the official 18,
//! 20 and 22).
//!
//! The same again with node's profiling flags on (`with_perf_flags`): `--perf-prof`
//! (a jitdump), `--perf-basic-prof-only-functions` (a perf map) and
//! `--interpreted-frames-native-stack` (a copy of the interpreter's entry trampoline
//! per function, on the native stack): a frame the heap names is named from the
//! heap, to the sampled line, in every tier, whatever else the process writes. The
//! flags only add sources; `--perf-basic-prof` writes the perf map of
//! `-only-functions` plus the stubs', which the heap does not name either way.

use thread_ctx_test_support::process as common;
mod profile_common;

use common::*;
use profile_common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WANTED: usize = 40;
/// Recordings stop once every tier and loop has its samples, or after this long.
const CAP: Duration = Duration::from_secs(90);
/// Samples this close to a phase's start may belong to the one before (the line is printed first).
const EDGE_NS: u64 = 3_000_000;

fn node(major: &str) -> std::path::PathBuf {
    NodeRuntime { major: Some(Box::leak(major.to_string().into_boxed_str())), flags: &[] }.binary()
}

/// The 1-based line of the v8 crate's tier fixture ending with `// MARK`.
fn marked_line(mark: &str) -> u64 {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../v8/tests/fixtures/tiers.js")).unwrap();
    src.lines().position(|l| l.trim_end().ends_with(&format!("// {mark}"))).unwrap_or_else(|| panic!("no line marked {mark}")) as u64 + 1
}

use std::path::Path;

#[derive(Default, Debug)]
struct Tally {
    samples: usize,
    right: usize,
    right_tier: usize,
    /// Samples in the driver between two calls (not in the denominator).
    driver: usize,
    seen: BTreeMap<String, usize>,
}

fn run(major: &str) {
    run_with(major, &[]);
}

/// The profiling flags the second set of rows runs with.
const PERF_FLAGS: [&str; 3] = ["--perf-prof", "--perf-basic-prof-only-functions", "--interpreted-frames-native-stack"];

fn run_with(major: &str, perf_flags: &[&str]) {
    let maglev = thread_ctx_v8::supported::for_node(major.parse().unwrap()).expect("a supported Node").maglev;
    let tiers: Vec<&str> = if maglev { vec!["Interpreted", "Baseline", "Maglev", "Turbofan"] } else { vec!["Interpreted", "Baseline", "Turbofan"] };
    let mut cmd = std::process::Command::new(node(major));
    cmd.args(["--sparkplug-filter=loopsBaseline", "--turbo-filter=loopsTurbofan"]);
    if maglev {
        cmd.arg("--maglev-filter=loopsMaglev");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf();
    cmd.args(perf_flags).arg(fixture("v8_tiers.js")).arg(&root).arg(tiers.join(",")).arg("200");
    // Where --perf-prof writes its jitdump (jit-PID.dump), removed with the directory.
    let cwd = tempfile::tempdir().unwrap();
    cmd.current_dir(cwd.path());
    let w = start_writer(cmd, false);
    let mut phases = Phases::new(EDGE_NS);
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let start = Instant::now();
    let enough = |t: &BTreeMap<String, Tally>| {
        tiers.iter().all(|tier| ["A", "B"].iter().all(|l| t.get(&format!("{tier} {l}")).is_some_and(|x| x.samples >= WANTED)))
    };
    let mut recordings = 0;
    while !enough(&tallies) && start.elapsed() < CAP {
        recordings += 1;
        for sample in record_frames(&w, &format!("Node {major}"), &["--hz", "499"], &mut phases) {
            let Some(phase) = phases.at(sample["time_ns"].as_u64().unwrap_or(0)) else { continue };
            // The fixture's thread: its main thread, whose tid is its pid.
            if sample["tid"].as_i64() != Some(w.pid as i64) {
                continue;
            }
            let (tier, _) = phase.split_once(' ').unwrap();
            let tally = tallies.entry(phase.to_string()).or_default();
            let frames = sample["frames"].as_array().map_or(&[][..], Vec::as_slice);
            let in_fixture = |f: &&Value| f["file"].as_str().is_some_and(|p| p.ends_with("/tiers.js"));
            let Some(f) = frames.iter().find(in_fixture) else {
                // Nothing of the fixture named: a wrong sample, whatever the cause.
                let leaf = frames.first().and_then(|f| f["name"].as_str()).unwrap_or("no frames");
                tally.samples += 1;
                *tally.seen.entry(format!("unnamed (leaf {leaf})")).or_default() += 1;
                continue;
            };
            let name = f["name"].as_str().unwrap_or("");
            if !name.starts_with("loops") {
                tally.driver += 1;
                continue;
            }
            tally.samples += 1;
            tally.right += (name == format!("loops{tier}") && f["line"].as_u64() == Some(marked_line(phase))) as usize;
            tally.right_tier += (f["tier"].as_str() == Some(tier.to_lowercase().as_str())) as usize;
            *tally.seen.entry(format!("{name}:{} {}", f["line"], f["tier"])).or_default() += 1;
        }
    }
    let major = format!("{major}{}", perf_flags.iter().map(|f| format!(" {f}")).collect::<String>());
    let mut report = format!("Node {major}: {recordings} recordings, {:.1} s\n", start.elapsed().as_secs_f64());
    let mut failures = Vec::new();
    for tier in &tiers {
        for l in ["A", "B"] {
            let key = format!("{tier} {l}");
            let t = tallies.remove(&key).unwrap_or_default();
            report += &format!(
                "  {key}: {}/{} right, {} in tier {tier} ({} in the driver, not counted); {:?}\n",
                t.right, t.samples, t.right_tier, t.driver, t.seen
            );
            if t.samples < WANTED {
                failures.push(format!("Node {major} {key}: only {} samples in {} s", t.samples, CAP.as_secs()));
                continue;
            }
            if t.right * 100 < t.samples * 95 {
                failures.push(format!("Node {major} {key}: {}/{} samples at loops{tier}'s line {}", t.right, t.samples, marked_line(&key)));
            }
            if t.right_tier * 100 < t.samples * 90 {
                failures.push(format!("Node {major} {key}: {}/{} samples in tier {tier}", t.right_tier, t.samples));
            }
            // A call runs ~1 ms or more and the driver microseconds between two: more in the
            // driver is a walk that lost the function's frame.
            if t.driver * 100 > (t.samples + t.driver) * 5 {
                failures.push(format!("Node {major} {key}: {} of {} samples in the driver, not in loops{tier}", t.driver, t.samples + t.driver));
            }
        }
    }
    let _ = writeln_stderr(&report);
    assert!(failures.is_empty(), "{}\n{report}", failures.join("\n"));
}

// One test per Node version (`cargo test --test v8_tiers node_22` runs one), one at a time, and one
// that every supported version has its row; without flags, then with them.
macro_rules! tier_rows {
    ($run:path) => {
        thread_ctx_test_support::node_rows!($run, thread_ctx_v8::supported::node_majors();
            (node_18_names_each_loop_at_its_line_in_every_tier, "18"),
            (node_20_names_each_loop_at_its_line_in_every_tier, "20"),
            (node_22_names_each_loop_at_its_line_in_every_tier, "22"),
            (node_24_names_each_loop_at_its_line_in_every_tier, "24"),
            (node_26_names_each_loop_at_its_line_in_every_tier, "26"),
        );
    };
}

tier_rows!(run);

/// The rows again, with node's profiling flags on.
mod with_perf_flags {
    fn run(major: &str) {
        super::run_with(major, &super::PERF_FLAGS);
    }

    tier_rows!(run);
}
