//! Line-level JS frames, sampled from outside (eBPF, as root): Node runs the
//! workload's `twoLoops` under `--perf-prof`, so V8 writes a jitdump with its
//! source positions; each sample in that one function must land on the line
//! of the loop it was in. The pprof is decoded with gzip + protoc (no code
//! shared with our encoder); the summary and `--frames` jsonl show the same.
//! V8 writes the jitdump through a 2 MB buffer, so the workload compiles
//! throwaway code until twoLoops' records are on disk before it says it runs.

use thread_ctx_test_support::process as common;
mod profile_common;

use common::*;
use profile_common::*;
use std::collections::BTreeMap;

/// 1-based line of the first line of the workload source that `is` picks.
fn line_where(what: &str, is: impl Fn(&str) -> bool) -> i64 {
    let src = std::fs::read_to_string(fixture("profile_workload.js")).unwrap();
    src.lines().position(is).unwrap_or_else(|| panic!("no {what} in the workload")) as i64 + 1
}

/// Samples with `twoLoops` on the stack, by the line its frame was sampled at.
fn lines_of(view: &PprofView, func: &str) -> BTreeMap<i64, i64> {
    let mut by_line = BTreeMap::new();
    for s in &view.samples {
        if let Some(i) = s.functions.iter().position(|f| f == func) {
            *by_line.entry(s.lines[i]).or_default() += s.values["samples"];
        }
    }
    by_line
}

/// Records `w` until `twoLoops` has `min` samples (the machine may be busy): at most 8
/// recordings of 2 s, their samples added up (one 2 s recording alone needs ~20 % of a CPU for
/// the loop). Returns its samples by line, the last pprof, summary and stderr.
fn sample_two_loops(w: &WriterProcess, dir: &std::path::Path, tag: &str, min: i64) -> (BTreeMap<i64, i64>, PprofView, String, String) {
    let pid = w.pid.to_string();
    let (mut last, mut by_line) = (None, BTreeMap::new());
    for attempt in 1..=8 {
        let pprof = dir.join(format!("{tag}-{attempt}.pb.gz"));
        let r = thread_ctx(&["record", &pid, "--hz", "499", "--duration", "2s", "--pprof", pprof.to_str().unwrap(), "--by", "span"]);
        assert_eq!(r.code, 0, "record failed: {}", r.stderr);
        assert!(!r.stderr.contains("no V8 jitdump"), "node ran with --perf-prof: {}", r.stderr);
        let v = decode_pprof(&pprof);
        for (line, n) in lines_of(&v, "twoLoops") {
            *by_line.entry(line).or_default() += n;
        }
        last = Some((v, r.stdout, r.stderr));
        if by_line.values().sum::<i64>() >= min {
            break;
        }
        let _ = writeln_stderr(&format!("{tag}: {} samples in twoLoops after recording {attempt}; recording again", by_line.values().sum::<i64>()));
    }
    let (view, summary, stderr) = last.unwrap();
    let total: i64 = by_line.values().sum();
    assert!(total >= min, "{tag}: expected {min} samples in twoLoops within 8 recordings, got {total}: {by_line:?}");
    (by_line, view, summary, stderr)
}

#[test]
fn two_hot_loops_of_one_function_are_attributed_to_their_own_lines() {
    let test = "two_hot_loops_of_one_function_are_attributed_to_their_own_lines";
    if !ebpf_or_skip(test) {
        return;
    }
    let _one = one_at_a_time();
    let dir = scratch("profile-lines");
    // --perf-prof writes jit-PID.dump into the working directory.
    let w = workload_flags("lines", &["--perf-prof"], Some(&dir));
    spans(&w, 1, STARTUP);
    let (a, b) = (line_where("LOOP-A", |l| l.ends_with("// LOOP-A")), line_where("LOOP-B", |l| l.ends_with("// LOOP-B")));
    let start = line_where("twoLoops", |l| l.starts_with("function twoLoops("));
    let ret = line_where("return a + b", |l| l.trim() == "return a + b;");
    let pid = w.pid.to_string();
    let (by_line, view, summary, _) = sample_two_loops(&w, &dir, "lines", 200);
    let total: i64 = by_line.values().sum();
    let (in_a, in_b) = (by_line.get(&a).copied().unwrap_or(0), by_line.get(&b).copied().unwrap_or(0));
    let _ = writeln_stderr(&format!("twoLoops samples by line (LOOP-A {a}, LOOP-B {b}): {by_line:?}"));
    assert!(in_a * 100 >= total * 15 && in_b * 100 >= total * 15, "each loop's line holds >= 15% of twoLoops' {total} samples: {by_line:?}");
    assert!((in_a + in_b) * 100 >= total * 80, "the two loop lines hold >= 80% of twoLoops' {total} samples: {by_line:?}");
    let on_return = by_line.get(&ret).copied().unwrap_or(0);
    assert!(on_return * 100 <= total * 5, "the return line (a few instructions once per call) holds <= 5%: {by_line:?}");
    let (file, line) = &view.functions["twoLoops"];
    assert!(file.ends_with("profile_workload.js") && *line == start, "the function keeps its own start line: {file}:{line}, expected {start}");
    assert!(
        summary.contains(&format!("twoLoops (profile_workload.js:{a})")) || summary.contains(&format!("twoLoops (profile_workload.js:{b})")),
        "the summary's top frames name the lines:\n{summary}"
    );

    // jsonl --frames: each sample's frames, the JS ones with their lines (recorded until seen, at most 5 times).
    for attempt in 1..=5 {
        let r = thread_ctx(&["record", &pid, "--hz", "199", "--duration", "1s", "--format", "jsonl", "--frames"]);
        assert_eq!(r.code, 0, "record --frames failed: {}", r.stderr);
        let mut seen = BTreeMap::<i64, usize>::new();
        for l in r.stdout.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert!(v["time_unix_nano"].as_i64().is_some_and(|t| t > 1_600_000_000_000_000_000), "wall-clock time on every line: {v}");
            for f in v["frames"].as_array().expect("frames with --frames") {
                if f["name"] == "twoLoops" && f["kind"] == "js" {
                    assert_eq!(f["function_line"].as_i64(), Some(start), "{f}");
                    *seen.entry(f["line"].as_i64().unwrap()).or_default() += 1;
                }
            }
        }
        if seen.keys().any(|l| *l == a || *l == b) {
            return;
        }
        let _ = writeln_stderr(&format!("{test}: jsonl recording {attempt} has no twoLoops frame on a loop line: {seen:?}; recording again"));
    }
    panic!("{test}: 5 jsonl recordings with --frames never showed twoLoops on a loop line");
}

/// V8's baseline tier (Sparkplug) writes its line table keyed by bytecode offset: read as machine
/// code offsets, 1,338 of 1,355 samples landed on `return`. Where the jitdump is the source (a node
/// without v8dbg symbols: the heap names baseline frames at their sampled line, tests/v8_tiers.rs),
/// the reader gives such code its function's line instead, says so, and never names a line the
/// samples were not on.
#[test]
fn baseline_code_is_named_at_its_function_line_never_at_a_wrong_one() {
    let test = "baseline_code_is_named_at_its_function_line_never_at_a_wrong_one";
    if !ebpf_or_skip(test) {
        return;
    }
    let _one = one_at_a_time();
    let dir = scratch("profile-lines-baseline");
    let node = node_without_v8dbg(&NodeRuntime { major: Some("20"), flags: &[] }.binary(), &dir);
    let w = workload_on(&node.0, "lines", &["--perf-prof", "--always-sparkplug", "--no-maglev", "--no-turbofan"], Some(&dir));
    spans(&w, 1, STARTUP);
    let start = line_where("twoLoops", |l| l.starts_with("function twoLoops("));
    let (by_line, view, summary, stderr) = sample_two_loops(&w, &dir, "baseline", 100);
    let _ = writeln_stderr(&format!("baseline twoLoops samples by line (function at {start}): {by_line:?}"));
    assert_eq!(by_line.keys().copied().collect::<Vec<_>>(), vec![start], "every baseline sample carries the function's line: {by_line:?}");
    assert_eq!(view.functions["twoLoops"].1, start);
    assert!(summary.contains(&format!("twoLoops (profile_workload.js:{start})")), "{summary}");
    assert!(stderr.contains("baseline (Sparkplug) code show their function's line"), "the recording says why: {stderr}");
}
