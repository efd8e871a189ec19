//! `thread-ctx record` (the real binary, JSON lines) on our addon in real Node:
//! - the main thread and two workers burn CPU under distinct contexts, in static
//!   TLS and in forced dynamic TLS (DTV walk), and with schema `nodejs` (each
//!   thread's record found through its async-context frame, Node 24): every
//!   sample of each JS thread carries exactly that thread's record, no other
//!   thread carries one;
//! - no torn reads: a worker flips its record between A and B through the JS fast
//!   path, sampled at 999 Hz until 5,000 samples of it: every valid sample is exactly A or B.
//!
//! Each recording runs until it has the samples it needs (60 s at most), so a busy machine
//! makes it longer, not a failure.
//!
//! Needs `node` and the built addon (`npm run build` at the repository root).

use thread_ctx_test_support::process as common;
use thread_ctx_test_support::sampler as sampler_common;

use common::{node_command_on, package_dir, start_writer, test_file, NodeRuntime, Published, WriterProcess, FORCE_DYNAMIC_TLS};
use sampler_common::*;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

fn node_fixture(runtime: &NodeRuntime, script: &str, args: &[&str], env: &[(&str, &str)]) -> WriterProcess {
    let pkg = package_dir();
    start_writer(node_command_on(runtime, &test_file(script), &[], &[&[pkg.to_str().unwrap()], args].concat(), env), false)
}

/// One sample line, for failure messages.
fn line(s: &Value) -> String {
    let mut s = s.clone();
    if let Some(a) = s.get_mut("attrs").and_then(|a| a.get_mut("entries")) {
        *a = Value::Null; // the hex says it all, shorter
    }
    s.to_string()
}

const SPIN_HZ: u32 = 199;
/// Samples wanted of each spinning JS thread: about 0.75 s of CPU each at SPIN_HZ.
const MIN_SAMPLES_PER_JS_THREAD: usize = 150;
/// Recordings run until they have the samples they need; on a busy machine that takes longer.
const CAP: Duration = Duration::from_secs(60);

/// Samples per tid in `samples[from..]`, added to `counts`; returns the new `from`.
fn count_tids(samples: &[Value], from: usize, counts: &mut HashMap<i64, usize>) -> usize {
    for s in &samples[from..] {
        *counts.entry(s["tid"].as_i64().unwrap_or(-1)).or_default() += 1;
    }
    samples.len()
}

/// `schema`: the fixture's (`tls` or `nodejs`); `expect_model`: the TLS model it reports.
fn check_spinning_threads(test: &str, runtime: &NodeRuntime, schema: &str, env: &[(&str, &str)], expect_model: &str) {
    let _serial = one_at_a_time();
    let w = node_fixture(runtime, "fixtures/node_writer.js", &["--spin", "--schema", schema], env);
    assert_eq!(w.published.len(), 3, "{test}: main thread + 2 workers: {:?}", w.published);
    for p in &w.published {
        assert_eq!(p.extra[0], expect_model, "{test}: the fixture's TLS model (or its schema, nodejs) on tid {}", p.tid);
    }
    let (mut counts, mut seen) = (HashMap::new(), 0);
    let run = record_jsonl_until(w.pid, SPIN_HZ, CAP, |samples| {
        seen = count_tids(samples, seen, &mut counts);
        w.published.iter().all(|p| counts.get(&p.tid).copied().unwrap_or(0) >= MIN_SAMPLES_PER_JS_THREAD)
    });
    let mut per_thread = vec![0usize; w.published.len()];
    for s in &run.samples {
        assert_eq!(s["pid"], w.pid, "{test}: sample from another process: {}", line(s));
        let Some(i) = w.published.iter().position(|p| s["tid"] == p.tid) else {
            assert!(s["span_id"].is_null(), "{test}: tid {} is no JS thread (V8/libuv helper) but carries a span: {}", s["tid"], line(s));
            continue;
        };
        per_thread[i] += 1;
        let p: &Published = &w.published[i];
        let seen = (s["state"].as_str(), s["trace_id"].as_str(), s["span_id"].as_str(), s["flags"].as_u64(), s["record_address"].as_str());
        let expected = (Some("valid"), Some(p.trace_id.as_str()), Some(p.span_id.as_str()), Some(p.flags), Some(p.record_address.as_str()));
        assert_eq!(
            seen,
            expected,
            "{test}: sample of JS thread {} (which never changes its context) read {seen:?}, expected {expected:?}: {}",
            p.tid,
            line(s)
        );
    }
    for (n, p) in per_thread.iter().zip(&w.published) {
        assert!(
            *n >= MIN_SAMPLES_PER_JS_THREAD,
            "{test}: expected >= {MIN_SAMPLES_PER_JS_THREAD} samples of spinning JS thread {} at {SPIN_HZ} Hz within {CAP:?}, saw {n} \
             ({} samples in all; thread-ctx said: {})",
            p.tid,
            run.samples.len(),
            run.stderr.trim()
        );
    }
    eprintln!("{test}: {} samples, per JS thread {per_thread:?}", run.samples.len());
}

#[test]
fn main_thread_and_workers_in_static_tls() {
    let test = "main_thread_and_workers_in_static_tls";
    if ebpf_or_skip(test) {
        check_spinning_threads(test, &NodeRuntime::ON_PATH, "tls", &[], "static");
    }
}

#[test]
fn main_thread_and_workers_in_dynamic_tls() {
    let test = "main_thread_and_workers_in_dynamic_tls";
    if ebpf_or_skip(test) {
        check_spinning_threads(test, &NodeRuntime::ON_PATH, "tls", &[FORCE_DYNAMIC_TLS], "dynamic");
    }
}

#[test]
fn main_thread_and_workers_with_schema_nodejs() {
    let test = "main_thread_and_workers_with_schema_nodejs";
    if ebpf_or_skip(test) {
        check_spinning_threads(test, &NodeRuntime::NODE_24, "nodejs", &[], "nodejs");
    }
}

const FLIP_HZ: u32 = 999;
/// Samples wanted of the flipping worker: about 5 s of its CPU at FLIP_HZ.
const MIN_FLIPPER_SAMPLES: usize = 5_000;

/// Why the check is sensitive: A and B differ in every header byte but `valid`
/// (and in their attrs-data), and the worker spends about half its time
/// rewriting (valid 0). If any store of a rewrite became visible on the wrong
/// side of the valid byte (a JIT or compiler reordering, a dropped `valid = 0`,
/// a control word stored early), the samples landing in rewrites would read
/// valid 1 with bytes of both, equal to neither A nor B. Checked by hand with a
/// publisher that skips `valid = 0`: thousands of such samples per run.
#[test]
fn no_torn_reads_through_the_js_fast_path() {
    let test = "no_torn_reads_through_the_js_fast_path";
    if !ebpf_or_skip(test) {
        return;
    }
    let _serial = one_at_a_time();
    let w = node_fixture(&NodeRuntime::ON_PATH, "sampler_fixtures/node_flipper.js", &[], &[]);
    let [flipper] = w.published.as_slice() else { panic!("{test}: expected one flipping worker, saw {:?}", w.published) };
    // extra: A's attrs, then B's trace, span, flags, attrs.
    let a = (flipper.trace_id.as_str(), flipper.span_id.as_str(), flipper.flags, flipper.extra[0].as_str());
    let b_flags = u64::from_str_radix(&flipper.extra[3], 16).unwrap();
    let b = (flipper.extra[1].as_str(), flipper.extra[2].as_str(), b_flags, flipper.extra[4].as_str());

    let (mut counts, mut seen) = (HashMap::new(), 0);
    let run = record_jsonl_until(w.pid, FLIP_HZ, CAP, |samples| {
        seen = count_tids(samples, seen, &mut counts);
        counts.get(&flipper.tid).copied().unwrap_or(0) >= MIN_FLIPPER_SAMPLES
    });
    let (mut seen_a, mut seen_b, mut rewriting) = (0usize, 0usize, 0usize);
    let mut torn = Vec::new();
    for s in &run.samples {
        if s["tid"] != flipper.tid {
            assert!(s["span_id"].is_null(), "{test}: tid {} never publishes but carries a span: {}", s["tid"], line(s));
            continue;
        }
        match s["state"].as_str() {
            Some("not_valid") => rewriting += 1,
            Some("valid") => {
                let got = (
                    s["trace_id"].as_str().unwrap_or(""),
                    s["span_id"].as_str().unwrap_or(""),
                    s["flags"].as_u64().unwrap_or(u64::MAX),
                    s["attrs"]["hex"].as_str().unwrap_or(""),
                );
                if got == a {
                    seen_a += 1;
                } else if got == b {
                    seen_b += 1;
                } else {
                    torn.push(format!("valid but neither A nor B: {}", line(s)));
                }
            }
            // The sampler's own check saw the header change under its copy.
            Some("torn") => torn.push(format!("header changed while the sampler copied it: {}", line(s))),
            _ => panic!("{test}: the flipper's record is always reachable, but this sample did not reach it: {}", line(s)),
        }
    }
    let total = seen_a + seen_b + rewriting + torn.len();
    eprintln!(
        "{test}: {total} samples of the flipping worker: {seen_a} A, {seen_b} B, {rewriting} mid-rewrite (valid 0), {} torn; {}",
        torn.len(),
        run.stderr.trim()
    );
    assert!(
        torn.is_empty(),
        "{test}: {} of {total} samples read a record that is neither A ({a:?}) nor B ({b:?}); first ones:\n{}",
        torn.len(),
        torn.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
    assert!(
        total >= MIN_FLIPPER_SAMPLES,
        "{test}: expected >= {MIN_FLIPPER_SAMPLES} samples of the flipping worker at {FLIP_HZ} Hz within {CAP:?}, saw {total} \
         (thread-ctx said: {})",
        run.stderr.trim()
    );
    // Both contexts and the rewrites in between must each be seen often, or the test proved nothing.
    for (what, n) in [("A", seen_a), ("B", seen_b), ("mid-rewrite", rewriting)] {
        assert!(n * 10 >= total, "{test}: expected >= 10% of {total} samples to be {what}, saw {n}");
    }
}
