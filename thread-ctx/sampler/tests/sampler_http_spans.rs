//! No leakage, full coverage: the eBPF sampler on a Node HTTP service using the
//! real OpenTelemetry SDK, instrumentation-http and our ThreadContextManager,
//! serving on the main thread and a worker under concurrent autocannon load;
//! with schema `tls` (on the node on PATH) and with schema `nodejs` (Node 24:
//! each sample's record found through the thread's async-context frame).
//! Each request's "burn" span burns CPU in pieces separated by timers and
//! immediates; the service logs every span's [start, end] (CLOCK_MONOTONIC) and
//! thread, and every burn piece's interval (sampler_fixtures/http_burner.js).
//!
//! A sample leaks when the span it carries was not running: unknown span, other
//! thread, outside the span's window, or seen while the event loop sits in
//! epoll_wait (between callbacks, where the record must show none). A sample
//! taken during a burn piece must carry exactly that piece's span. Coverage:
//! of the samples whose leaf frame is the burner (named through the V8 perf
//! map), at least 95% carry a span id.
//!
//! Sensitivity, checked by hand against broken context managers: one whose
//! callback entry does not publish fails the piece check thousands of times per
//! run and coverage falls to ~20%; one whose callback exit leaves the span
//! published is caught as leaks only in proportion to the CPU the thread spends
//! between callbacks (about one leaked sample per run here: the stale span is
//! usually still inside its own window, and the loop spends little CPU outside
//! callbacks).

use thread_ctx_test_support::process as common;
use thread_ctx_test_support::sampler as sampler_common;
use thread_ctx_test_support::timeline as timeline_common;

use common::{node_command_on, package_dir, start_writer, test_file, NodeRuntime, WriterProcess};
use sampler_common::*;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;
use thread_ctx_profile::{FrameKind, Symbolizer};
use thread_ctx_sampler::Event;

const HZ: u32 = 999;
/// Load runs alone this long first, so V8 has optimized the burner before sampling.
const WARM_UP: Duration = Duration::from_millis(1200);
/// The recording lasts at least RECORD, and until each serving thread has MIN_SPAN_SAMPLES samples
/// with a span (CAP at most): a busy machine gives the service less CPU, so it records longer.
const RECORD: Duration = Duration::from_secs(4);
const MIN_SPAN_SAMPLES_PER_THREAD: usize = 500;
const CAP: Duration = Duration::from_secs(60);
/// The load outlasts the longest recording; it is stopped (SIGINT) when the recording ends.
const LOAD_SECONDS: u64 = 75;
const CONNECTIONS_PER_THREAD: &str = "4";
const BURNER: &str = "burnCpuForSpanTest";
const MIN_COVERAGE: f64 = 0.95;
/// Per serving thread: most of a thread's samples with a span are in the burner (about 60%).
const MIN_BURNER_SAMPLES_PER_THREAD: usize = 100;

use timeline_common::Timeline;

/// GET over a fresh connection; the body of a 200 response.
fn http_get(port: &str, path: &str) -> String {
    let mut c = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap_or_else(|e| panic!("connecting to the service on port {port}: {e}"));
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(c, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut response = String::new();
    c.read_to_string(&mut response).unwrap_or_else(|e| panic!("reading GET {path} from port {port}: {e}"));
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or_else(|| panic!("GET {path}: malformed response {response:?}"));
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path} on port {port}: expected 200, got {head:?}");
    body.to_string()
}

/// autocannon running against one serving thread (sampler_fixtures/http_load.js).
struct Load {
    child: Child,
    out: BufReader<ChildStdout>,
}

fn autocannon(port: &str) -> Load {
    let pkg = package_dir();
    assert!(pkg.join("node_modules/autocannon").exists(), "expected autocannon (a devDependency) in {}: run `npm ci`", pkg.display());
    let url = format!("http://127.0.0.1:{port}/burn");
    let mut child = Command::new("node")
        .arg(test_file("sampler_fixtures/http_load.js"))
        .args([pkg.to_str().unwrap(), &url, CONNECTIONS_PER_THREAD, &LOAD_SECONDS.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning the load (autocannon)");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).expect("reading the load's first line");
    assert_eq!(line.trim(), "ready", "the load on port {port} did not start");
    Load { child, out }
}

/// Stops the load (SIGINT: autocannon ends the run and prints its result) and checks that every
/// request succeeded; returns the request count.
fn finished_load(mut load: Load, port: &str) -> u64 {
    // SAFETY: kill(2) on our own child, not reaped yet.
    unsafe { libc::kill(load.child.id() as i32, libc::SIGINT) };
    let mut result = String::new();
    load.out.read_to_string(&mut result).expect("reading autocannon's result");
    load.child.wait().expect("waiting for autocannon");
    let r: Value = serde_json::from_str(&result).unwrap_or_else(|e| panic!("autocannon on port {port} printed no JSON result ({e}): {result}"));
    let counts = (r["errors"].as_u64(), r["timeouts"].as_u64(), r["non2xx"].as_u64());
    assert_eq!(counts, (Some(0), Some(0), Some(0)), "autocannon on port {port}: expected (errors, timeouts, non-2xx) all 0");
    r["2xx"].as_u64().unwrap_or(0)
}

fn start_service(runtime: &NodeRuntime, schema: &str) -> WriterProcess {
    // No inlining: TurboFan would fold the burner into its caller, whose name the perf map then gives.
    let flags = ["--perf-basic-prof-only-functions", "--no-turbo-inlining"];
    let script = test_file("sampler_fixtures/http_burner.js");
    start_writer(node_command_on(runtime, &script, &flags, &[package_dir().to_str().unwrap(), schema], &[]), false)
}

/// Leaf (innermost) user frame of a sample, named while the process is alive.
fn leaf_frames(rec: &Recording, sym: &mut Symbolizer) -> Vec<Option<(FrameKind, String)>> {
    rec.samples
        .iter()
        .map(|s| {
            let ip = *s.user_stack.as_ref().ok()?.first()?;
            let f = sym.user_frames(&[ip]).pop()?;
            Some((f.kind, f.name))
        })
        .collect()
}

#[derive(Debug, Default)]
struct Tally {
    samples: usize,
    with_span: usize,
    /// (sample index, why) of each violation.
    leaked: Vec<(usize, String)>,
    in_pieces: usize,
    wrong_in_piece: Vec<(usize, String)>,
    in_epoll: usize,
    /// No user stack (the kernel could not take it), so no leaf frame.
    no_stack: usize,
    burner: HashMap<i64, (usize, usize)>,
}

fn check_sample(i: usize, s: &Event, leaf: &Option<(FrameKind, String)>, log: &Timeline, t: &mut Tally) {
    let tid = s.tid as i64;
    let span = s.span().map(|(trace, span, _)| (hex(&trace), hex(&span)));
    let in_epoll = matches!(leaf, Some((FrameKind::Native, n)) if n.starts_with("epoll_wait") || n.starts_with("epoll_pwait"));
    t.samples += 1;
    t.in_epoll += in_epoll as usize;
    t.no_stack += leaf.is_none() as usize;
    if let Some((trace_id, span_id)) = &span {
        t.with_span += 1;
        let why = match log.leak(tid, s.time_ns, trace_id, span_id) {
            Some(why) => Some(why),
            None if in_epoll => Some(format!("is in {} (between callbacks), yet carries span {span_id}", leaf.as_ref().unwrap().1)),
            None => None,
        };
        if let Some(why) = why {
            t.leaked.push((i, format!("{} {why}", describe(s))));
        }
    }
    if let Some(p) = log.piece_at(tid, s.time_ns) {
        t.in_pieces += 1;
        if span.as_ref().map(|(_, sp)| sp) != Some(&p.span_id) {
            t.wrong_in_piece.push((
                i,
                format!(
                    "{} fell inside a burn piece of span {} [{}, {}] on its thread, but carries {:?}",
                    describe(s),
                    p.span_id,
                    p.start,
                    p.end,
                    span.as_ref().map(|(_, sp)| sp)
                ),
            ));
        }
    }
    if matches!(leaf, Some((FrameKind::Js, n)) if n == BURNER) {
        let e = t.burner.entry(tid).or_default();
        e.0 += 1;
        e.1 += span.is_some() as usize;
    }
}

/// The first violations, each with its sample's symbolized user stack (leaf first).
fn first(v: &[(usize, String)], rec: &Recording, sym: &mut Symbolizer) -> String {
    let stack = |i: usize, sym: &mut Symbolizer| -> String {
        let ips = rec.samples[i].user_stack.clone().unwrap_or_default();
        let names: Vec<String> = sym.user_frames(&ips).iter().take(12).map(|f| f.short_name()).collect();
        if names.is_empty() {
            "no user stack".into()
        } else {
            names.join(" < ")
        }
    };
    v.iter().take(12).map(|(i, why)| format!("{why}\n    stack: {}", stack(*i, sym))).collect::<Vec<_>>().join("\n")
}

#[test]
fn http_spans_no_leakage_full_coverage() {
    let test = "http_spans_no_leakage_full_coverage";
    if ebpf_or_skip(test) {
        check_http_spans(test, &NodeRuntime::ON_PATH, "tls");
    }
}

#[test]
fn http_spans_no_leakage_full_coverage_with_schema_nodejs() {
    let test = "http_spans_no_leakage_full_coverage_with_schema_nodejs";
    if ebpf_or_skip(test) {
        check_http_spans(test, &NodeRuntime::NODE_24, "nodejs");
    }
}

fn check_http_spans(test: &str, runtime: &NodeRuntime, schema: &str) {
    let _serial = one_at_a_time();
    let service = start_service(runtime, schema);
    let threads: Vec<(i64, String)> = service.published.iter().map(|p| (p.tid, p.extra[0].clone())).collect();
    assert_eq!(threads.len(), 2, "{test}: expected the main thread and one worker serving, saw {threads:?}");
    let reach = reach_of(service.pid);
    assert_eq!(reach.nodejs.is_some(), schema == "nodejs", "{test}: the sampled writer is schema {schema}'s: {reach:?}");
    let loads: Vec<Load> = threads.iter().map(|(_, port)| autocannon(port)).collect();
    std::thread::sleep(WARM_UP);
    let started = std::time::Instant::now();
    // Counted as samples arrive (not rescanned per poll: at 999 Hz the test thread must keep
    // draining the ring).
    let (mut counted, mut with_span) = (0, vec![0usize; threads.len()]);
    let rec = record_until(service.pid, reach, HZ, CAP, |samples| {
        for s in &samples[counted..] {
            if let Some(i) = threads.iter().position(|(tid, _)| s.tid as i64 == *tid && s.span().is_some()) {
                with_span[i] += 1;
            }
        }
        counted = samples.len();
        started.elapsed() >= RECORD && with_span.iter().all(|&n| n >= MIN_SPAN_SAMPLES_PER_THREAD)
    });
    let requests: Vec<u64> = loads.into_iter().zip(&threads).map(|(l, (_, port))| finished_load(l, port)).collect();

    let mut log = Timeline::default();
    for (_, port) in &threads {
        log.add(&serde_json::from_str(&http_get(port, "/log")).expect("GET /log: JSON"));
    }
    let mut sym = Symbolizer::new(service.pid).expect("symbolizer for the service");
    let leaves = leaf_frames(&rec, &mut sym);
    assert!(sym.perf_map_note().is_none(), "{test}: {}", sym.perf_map_note().unwrap());

    let mut t = Tally::default();
    for (i, (s, leaf)) in rec.samples.iter().zip(&leaves).enumerate() {
        check_sample(i, s, leaf, &log, &mut t);
    }
    // Stacks for the failure messages are named now, while the service still runs.
    let leaked = first(&t.leaked, &rec, &mut sym);
    let wrong_in_piece = first(&t.wrong_in_piece, &rec, &mut sym);
    let _ = std::fs::remove_file(thread_ctx_profile::perf_map::path_for(service.pid));
    drop(service);
    let (burner, tagged) = t.burner.values().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    eprintln!(
        "{test}: {} requests; {} samples, {} with a span, {} leaked; {} in burn pieces ({} wrong span); {} in epoll_wait; {} without a stack; \
         burner leaf {burner}, {tagged} with a span ({:.2}%), per thread {:?}; {} spans logged; counters {:?}",
        requests.iter().sum::<u64>(),
        t.samples,
        t.with_span,
        t.leaked.len(),
        t.in_pieces,
        t.wrong_in_piece.len(),
        t.in_epoll,
        t.no_stack,
        100.0 * tagged as f64 / burner.max(1) as f64,
        t.burner,
        log.spans.len(),
        rec.counters
    );
    assert!(t.leaked.is_empty(), "{test}: {} of {} samples with a span leaked; first ones:\n{leaked}", t.leaked.len(), t.with_span);
    assert!(
        t.wrong_in_piece.is_empty(),
        "{test}: {} of {} samples inside burn pieces did not carry the burning span; first ones:\n{wrong_in_piece}",
        t.wrong_in_piece.len(),
        t.in_pieces
    );
    for (tid, port) in &threads {
        let (n, with_span) = t.burner.get(tid).copied().unwrap_or_default();
        assert!(
            n >= MIN_BURNER_SAMPLES_PER_THREAD,
            "{test}: expected >= {MIN_BURNER_SAMPLES_PER_THREAD} samples with {BURNER} as leaf frame on thread {tid} (port {port}), saw {n} \
             ({} samples in all; counters {:?})",
            t.samples,
            rec.counters
        );
        assert!(
            with_span as f64 >= MIN_COVERAGE * n as f64,
            "{test}: thread {tid}: only {with_span} of {n} samples in {BURNER} carry a span id (expected >= {:.0}%)",
            MIN_COVERAGE * 100.0
        );
    }
    assert_eq!(rec.counters.dropped, 0, "{test}: the ring buffer dropped samples at {HZ} Hz");
}
