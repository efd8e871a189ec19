//! The interleaving test, read from outside: `__test__/fixtures/interleaved-spans.js` runs, on
//! the main thread and a worker, four chains of spans at once, each span burning CPU in two
//! pieces after one kind of resumption (await null, a pending promise, setTimeout, setImmediate,
//! process.nextTick, queueMicrotask, fs.promises, an fs callback, a bound EventEmitter), every
//! kind × 200 spans per chain, then burning once more after its end() in a context that still
//! holds it (the same context, a timer set in it, a function bound to it). The whole run is
//! sampled with eBPF (`thread-ctx record`, 999 Hz) while `thread-ctx dump` (ptrace) reads every
//! thread again and again; each reading is judged against the threads' own log
//! (timeline_common): a reading in a piece carries exactly that piece's span, one after a span's
//! end carries none, and no reading carries a span outside its window or on another thread.
//! 0 mismatches, with schema `nodejs` on Node 24, 26 and 22 with
//! --experimental-async-context-frame, and with schema `tls` on the node on PATH.
//!
//! Sensitivity, checked by hand against broken `nodejs` writers on Node 24: records that stay
//! valid after end() gave ~4,000 mismatched samples and ~700 mismatched dumps per run; a with()
//! that stored the previous context's holder one time in 20 gave ~480 and ~70.
//!
//! Needs the built addon, the V8 addon and Node 22, 24, 26 (scripts/setup.sh); root for eBPF.

use thread_ctx_test_support::process as common;
use thread_ctx_test_support::sampler as sampler_common;
use thread_ctx_test_support::timeline as timeline_common;

use common::{json_of, node_command_on, package_dir, rows_of, start_process, test_file, writeln_stderr, NodeRuntime, WriterProcess};
use sampler_common::*;
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thread_ctx_discovery::discover;
use timeline_common::{Seen, Timeline};

const HZ: u32 = 999;
/// The workload takes ~10 s of CPU per thread; a busy machine gives it less, so this is a cap.
const CAP: Duration = Duration::from_secs(400);
/// Readings that must fall in pieces (and in ended pieces) per thread, or the run proved little:
/// at 999 Hz the pieces (~4.3 s of CPU per thread) give thousands of samples, the dumps hundreds.
const MIN_SAMPLES_IN_PIECES: usize = 1000;
const MIN_SAMPLES_IN_ENDED: usize = 300;
const MIN_DUMPS_IN_PIECES: usize = 20;

/// Where a reading came from, for the figures and the failure messages.
#[derive(Default)]
struct Verdicts {
    readings: usize,
    with_span: usize,
    in_pieces: HashMap<i64, usize>,
    in_ended: HashMap<i64, usize>,
    mismatches: Vec<String>,
}

impl Verdicts {
    fn judge(&mut self, log: &Timeline, tid: i64, t: u64, seen: Seen<'_>, line: impl Fn() -> String) {
        self.readings += 1;
        self.with_span += matches!(seen, Seen::Span(..)) as usize;
        *self.in_pieces.entry(tid).or_default() += log.piece_at(tid, t).is_some() as usize;
        *self.in_ended.entry(tid).or_default() += log.ended_piece_at(tid, t).is_some() as usize;
        if let Some(why) = log.mismatch(tid, t, seen) {
            self.mismatches.push(format!("tid {tid} at {t} ns {why}: {}", line()));
        }
    }

    fn summary(&self) -> String {
        format!(
            "{} readings, {} with a span, in pieces per thread {:?}, after ends {:?}, {} mismatches",
            self.readings,
            self.with_span,
            self.in_pieces,
            self.in_ended,
            self.mismatches.len()
        )
    }
}

/// A jsonl sample's reading: its span, none, or a fault (its state).
fn sample_seen(s: &Value) -> Seen<'_> {
    match s["state"].as_str().unwrap_or("") {
        "valid" => Seen::Span(s["trace_id"].as_str().unwrap_or(""), s["span_id"].as_str().unwrap_or("")),
        // No TLS block yet, no record published, a record not valid, no frame or store: none.
        "no_tls_block" | "null_record" | "not_valid" | "nodejs_no_store" => Seen::None,
        other => Seen::Fault(other),
    }
}

/// A dump row's reading.
fn row_seen(t: &Value) -> Seen<'_> {
    match t["state"].as_str().unwrap_or("") {
        "valid" => Seen::Span(t["trace_id"].as_str().unwrap_or(""), t["span_id"].as_str().unwrap_or("")),
        "no_context" => Seen::None,
        other => Seen::Fault(other),
    }
}

fn start_fixture(runtime: &NodeRuntime, schema: &str) -> WriterProcess {
    let pkg = package_dir();
    let script = test_file("../../../__test__/fixtures/interleaved-spans.js");
    let mut cmd = node_command_on(runtime, &script, &[], &[pkg.to_str().unwrap(), "--schema", schema], &[]);
    cmd.stdin(Stdio::piped());
    start_process(cmd)
}

fn tell(w: &mut WriterProcess, command: &str) {
    let stdin = w.child.stdin.as_mut().expect("the fixture's stdin");
    writeln!(stdin, "{command}").unwrap_or_else(|e| panic!("telling the fixture {command:?}: {e}"));
}

/// Dump rows of the sampled writer gathered until `stop`: (tid, stopped_at_ns, row).
fn dump_until(pid: i32, writer: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(i64, u64, Value)>> {
    std::thread::spawn(move || {
        let mut rows = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let dump = json_of("dump", pid, 0);
            for t in rows_of(&dump, Some(&writer)) {
                let (Some(tid), Some(at)) = (t["tid"].as_i64(), t["stopped_at_ns"].as_u64()) else {
                    panic!("a dump row without tid or stopped_at_ns: {t:#}")
                };
                rows.push((tid, at, t.clone()));
            }
        }
        rows
    })
}

fn check_interleaving(test: &str, runtime: &NodeRuntime, schema: &str) {
    let _serial = one_at_a_time();
    let on = runtime.name();
    let mut w = start_fixture(runtime, schema);
    let threads: Vec<i64> = w.thread_lines.iter().map(|words| words[0].parse().unwrap()).collect();
    for words in &w.thread_lines {
        assert_eq!(words.get(1).map(String::as_str), Some(schema), "{test} ({on}): the fixture's thread line {words:?}");
    }
    assert_eq!(threads.len(), 2, "{test} ({on}): the main thread and one worker: {threads:?}");
    let d = discover(w.pid).unwrap_or_else(|e| panic!("{test}: discovery: {e}"));
    let sampled = d.sampled_writer().unwrap_or_else(|e| panic!("{test} ({on}): {e}")).clone();
    let wanted_symbol = if schema == "nodejs" { "otel_thread_ctx_nodejs_v1" } else { "otel_thread_ctx_v1" };
    assert_eq!(sampled.symbol_name(), wanted_symbol, "{test} ({on}): the writer readers sample");

    let stop = Arc::new(AtomicBool::new(false));
    let dumper = dump_until(w.pid, sampled.path.clone(), stop.clone());
    // The fixture burns outside any span until "start": the first sample says sampling runs, and
    // the whole workload is then sampled.
    let (mut started, mut done) = (false, false);
    let began = Instant::now();
    let run = record_jsonl_until(w.pid, HZ, CAP, |samples| {
        if !started && !samples.is_empty() {
            tell(&mut w, "start");
            started = true;
        }
        while let Ok(line) = w.lines.try_recv() {
            done |= line == "done";
        }
        done
    });
    stop.store(true, Ordering::Relaxed);
    let dumps = dumper.join().unwrap_or_else(|_| panic!("{test} ({on}): the dump loop failed (see above)"));
    assert!(done, "{test} ({on}): the workload did not finish within {CAP:?} ({:?} recorded); thread-ctx said: {}", began.elapsed(), run.stderr);

    tell(&mut w, "log");
    let log_line = w.lines.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|e| panic!("{test} ({on}): no log from the fixture: {e}"));
    let log_json: Value = serde_json::from_str(&log_line).unwrap_or_else(|e| panic!("{test} ({on}): the fixture's log is not JSON ({e})"));
    let mut log = Timeline::default();
    for th in log_json["threads"].as_array().expect("threads in the log") {
        log.add(th);
    }

    let mut samples = Verdicts::default();
    for s in &run.samples {
        let tid = s["tid"].as_i64().unwrap_or(-1);
        if !threads.contains(&tid) {
            assert!(s["span_id"].is_null(), "{test} ({on}): tid {tid} runs no JS but carries a span: {s}");
            continue;
        }
        samples.judge(&log, tid, s["time_ns"].as_u64().unwrap_or(0), sample_seen(s), || s.to_string());
    }
    let mut dumped = Verdicts::default();
    for (tid, at, row) in &dumps {
        if !threads.contains(tid) {
            assert_ne!(row["state"], "valid", "{test} ({on}): tid {tid} runs no JS but reads as valid: {row}");
            continue;
        }
        dumped.judge(&log, *tid, *at, row_seen(row), || row.to_string());
    }
    let spans = log.spans.len();
    let _ = writeln_stderr(&format!(
        "{test} ({on}, schema {schema}): {spans} spans in {:.1} s; eBPF: {}; dump: {}; {}",
        began.elapsed().as_secs_f64(),
        samples.summary(),
        dumped.summary(),
        run.stderr.lines().filter(|l| l.contains("samples")).collect::<Vec<_>>().join(" ")
    ));
    assert_eq!(spans, threads.len() * 4 * 9 * 200, "{test} ({on}): every chain's spans, on every thread");
    for (what, v) in [("eBPF samples", &samples), ("ptrace dumps", &dumped)] {
        assert!(
            v.mismatches.is_empty(),
            "{test} ({on}): {} of {} {what} contradict what the threads ran; first ones:\n{}",
            v.mismatches.len(),
            v.readings,
            v.mismatches.iter().take(12).cloned().collect::<Vec<_>>().join("\n")
        );
    }
    for tid in &threads {
        let n = |m: &HashMap<i64, usize>| m.get(tid).copied().unwrap_or(0);
        assert!(
            n(&samples.in_pieces) >= MIN_SAMPLES_IN_PIECES && n(&samples.in_ended) >= MIN_SAMPLES_IN_ENDED,
            "{test} ({on}): thread {tid}: {} samples in pieces and {} after ends, expected >= {MIN_SAMPLES_IN_PIECES} and >= {MIN_SAMPLES_IN_ENDED}",
            n(&samples.in_pieces),
            n(&samples.in_ended)
        );
        assert!(
            n(&dumped.in_pieces) >= MIN_DUMPS_IN_PIECES,
            "{test} ({on}): thread {tid}: {} dumps in pieces, expected >= {MIN_DUMPS_IN_PIECES}",
            n(&dumped.in_pieces)
        );
    }
    tell(&mut w, "exit");
}

#[test]
fn interleaved_spans_schema_nodejs_node_24() {
    let test = "interleaved_spans_schema_nodejs_node_24";
    if ebpf_or_skip(test) {
        check_interleaving(test, &NodeRuntime::NODE_24, "nodejs");
    }
}

#[test]
fn interleaved_spans_schema_nodejs_node_26() {
    let test = "interleaved_spans_schema_nodejs_node_26";
    if ebpf_or_skip(test) {
        check_interleaving(test, &NodeRuntime::NODE_26, "nodejs");
    }
}

#[test]
fn interleaved_spans_schema_nodejs_node_22_with_the_frame_flag() {
    let test = "interleaved_spans_schema_nodejs_node_22_with_the_frame_flag";
    if ebpf_or_skip(test) {
        check_interleaving(test, &NodeRuntime::NODE_22_FRAME, "nodejs");
    }
}

#[test]
fn interleaved_spans_schema_tls() {
    let test = "interleaved_spans_schema_tls";
    if ebpf_or_skip(test) {
        check_interleaving(test, &NodeRuntime::ON_PATH, "tls");
    }
}
