//! The `nodejs_v1_dev` reader against a writer nobody on this project wrote:
//! dd-trace 6.21 with @datadog/pprof 5.20 from npm (the fixture
//! `fixtures/ddtrace_service`, installed by scripts/setup.sh) on Node 24, its
//! OTEP 4947 writer on (`DD_TRACE_OTEL_CTX_ENABLED=true`), no trace agent.
//!
//! The service activates two spans once each around an async loop that burns
//! a named function and awaits between bursts, on the main thread and on a
//! worker (dd-trace writes there too: each worker's tracer stores its own ALS in
//! that thread's `otel_thread_ctx_nodejs_v1`). Nothing calls the tracer again:
//! after every `await` the record is found only through V8's async-context
//! frame. Read from outside: `inspect` (the layout), `dump` (ptrace) and
//! `record` (eBPF), whose samples inside each function must link to that
//! function's span, by dd-trace's own ids, on its own thread.

use thread_ctx_test_support::process as common;

use common::{
    ebpf_or_skip, fail_clearly_if_ptrace_denied, one_at_a_time, test_file, thread_ctx, thread_ctx_until, writeln_stderr, NodeRuntime, STARTUP,
};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

/// Samples of each (thread, function) before the links are judged, and the
/// share of them that must carry their own span.
const MIN_SAMPLES_EACH: usize = 60;
const MIN_LINKED: f64 = 0.90;
/// `dump`s tried until every JS thread has shown a valid record at least once
/// (a thread stopped between two bursts sits in the event loop, with no frame).
const DUMP_TRIES: usize = 60;

#[derive(Debug, Clone)]
struct Span {
    /// worker_threads' threadId: 0 on the main thread.
    thread: u32,
    name: String,
    trace_id: String,
    span_id: String,
}

struct Service {
    child: Child,
    pid: i32,
    spans: Vec<Span>,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", self.pid));
    }
}

/// Starts the service on Node 24 (main thread and one worker) and reads its span lines.
fn start_service() -> Service {
    start_service_on("24", &[])
}

fn start_service_on(major: &'static str, node_flags: &[&str]) -> Service {
    let dir = test_file("fixtures/ddtrace_service");
    assert!(
        dir.join("node_modules/dd-trace").exists(),
        "expected dd-trace installed in {}: run scripts/setup.sh (npm ci --omit=optional there)",
        dir.display()
    );
    let mut cmd = Command::new(NodeRuntime { major: Some(major), flags: &[] }.binary());
    // The V8 perf map names the JS frames; without inlining a burst stays in its own named
    // function even once the loop around it is optimized.
    cmd.args(node_flags)
        .args(["--perf-basic-prof-only-functions", "--no-turbo-inlining", "service.js", "--workers"])
        .current_dir(&dir)
        .env("DD_TRACE_OTEL_CTX_ENABLED", "true")
        .env("DD_TRACE_AGENT_URL", "http://127.0.0.1:9")
        .env("DD_TRACE_TELEMETRY_ENABLED", "false")
        .env("DD_REMOTE_CONFIGURATION_ENABLED", "false")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawning the dd-trace service");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut service = Service { child, pid: 0, spans: Vec::new() };
    loop {
        let line = rx.recv_timeout(STARTUP).unwrap_or_else(|e| panic!("the dd-trace service did not print \"ready\" within {STARTUP:?}: {e}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["ready"] => break,
            ["pid", p] => service.pid = p.parse().unwrap(),
            ["span", thread, name, trace_id, span_id] => service.spans.push(Span {
                thread: thread.parse().unwrap(),
                name: name.to_string(),
                trace_id: trace_id.to_string(),
                span_id: span_id.to_string(),
            }),
            _ => panic!("the dd-trace service printed an unexpected line: {line:?}"),
        }
    }
    assert!(service.pid > 0 && service.spans.len() == 4, "expected a pid and 4 spans, saw {} and {:?}", service.pid, service.spans);
    service
}

impl Service {
    fn span(&self, span_id: &str) -> Option<&Span> {
        self.spans.iter().find(|s| s.span_id == span_id)
    }
}

#[test]
fn inspect_shows_the_schema_and_the_layout_for_the_running_v8() {
    let service = start_service();
    let r = thread_ctx(&["inspect", "--json", &service.pid.to_string()]);
    assert_eq!(r.code, 0, "inspect failed: {}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let writers = v["writers"].as_array().unwrap();
    assert_eq!(writers.len(), 1, "expected @datadog/pprof's addon as the one writer: {writers:#?}");
    let w = &writers[0];
    assert_eq!(w["symbol"], "otel_thread_ctx_nodejs_v1");
    assert!(w["path"].as_str().unwrap().contains("dd_pprof"), "{}", w["path"]);
    assert_eq!(w["model"], "tlsdesc");
    assert!(w["nodejs_error"].is_null(), "layout refused: {}", w["nodejs_error"]);
    let layout = &w["nodejs_layout"];
    // Node 24 runs V8 13.6; dd-trace 6.21 publishes no layout integers, so these are the schema's defaults.
    assert_eq!(layout["v8"]["major"], 13, "{layout}");
    assert_eq!(layout["source"], "schema_defaults", "{layout}");
    assert_eq!((layout["wrapped_object_offset"].as_u64(), layout["js_map_table_offset"].as_u64()), (Some(32), Some(24)), "{layout}");
    assert!(layout["native_wrap_fields_offset"].is_null(), "dd-trace's field points at the record itself: {layout}");
    assert_eq!(v["process_context"]["schema_version"], "nodejs_v1_dev");
    let text = thread_ctx(&["inspect", &service.pid.to_string()]);
    assert!(text.stdout.contains("schema: nodejs_v1_dev") && text.stdout.contains("layout: nodejs_v1_dev defaults, V8 13.6"), "{}", text.stdout);
}

#[test]
fn dump_reads_each_js_threads_record_through_the_frame() {
    assert_dump_reads_every_js_thread(&start_service());
}

/// The layout defaults per V8 version, checked where dd-trace runs: Node 22 with the
/// async-context frame flag (V8 12.4: embedder fields right after the object header) and Node
/// 26 (V8 14.6: after the C++-heap wrapper slot, as on Node 24).
#[test]
fn the_v8_defaults_hold_on_node_22_with_the_frame_flag_and_on_node_26() {
    for (major, flags, v8_major, wrapped) in [("22", &["--experimental-async-context-frame"][..], 12, 24), ("26", &[][..], 14, 32)] {
        let service = start_service_on(major, flags);
        let r = thread_ctx(&["inspect", "--json", &service.pid.to_string()]);
        assert_eq!(r.code, 0, "Node {major}: inspect failed: {}", r.stderr);
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        let layout = &v["writers"][0]["nodejs_layout"];
        assert_eq!(
            (layout["v8"]["major"].as_u64(), layout["wrapped_object_offset"].as_u64()),
            (Some(v8_major), Some(wrapped)),
            "Node {major}: {layout}"
        );
        assert_dump_reads_every_js_thread(&service);
    }
}

fn assert_dump_reads_every_js_thread(service: &Service) {
    let pid = service.pid.to_string();
    let (mut main_valid, mut worker_valid) = (0, 0);
    for _ in 0..DUMP_TRIES {
        let r = thread_ctx(&["dump", "--json", &pid]);
        assert_eq!(r.code, 0, "dump failed: {}", r.stderr);
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        fail_clearly_if_ptrace_denied(&v);
        for t in v["threads"].as_array().unwrap() {
            match t["state"].as_str() {
                Some("valid") => {
                    let span_id = t["span_id"].as_str().unwrap();
                    let span = service.span(span_id).unwrap_or_else(|| panic!("a valid record with a span dd-trace never started: {t:#}"));
                    assert_eq!(t["trace_id"], span.trace_id.as_str(), "{t:#}");
                    let main = t["tid"] == service.pid;
                    assert_eq!(span.thread == 0, main, "thread {} shows another thread's span {span:?}", t["tid"]);
                    let attrs = t["attrs"].to_string();
                    assert!(attrs.contains("datadog.local_root_span_id") && attrs.contains(span_id), "attributes through the key map: {attrs}");
                    if main {
                        main_valid += 1
                    } else {
                        worker_valid += 1
                    }
                }
                // Between bursts (no frame) and on threads without an isolate: no context, never a fault.
                Some("no_context") => {}
                other => panic!("thread {} read as {other:?}: {t:#}", t["tid"]),
            }
        }
        if main_valid > 0 && worker_valid > 0 {
            return;
        }
    }
    panic!("after {DUMP_TRIES} dumps: {main_valid} valid records on the main thread, {worker_valid} on the worker; expected both");
}

#[test]
fn record_links_each_functions_samples_to_its_own_span() {
    if !ebpf_or_skip("record_links_each_functions_samples_to_its_own_span") {
        return;
    }
    let _one = one_at_a_time();
    let service = start_service();
    let pid = service.pid.to_string();
    // (thread, function) -> (samples in the function, those carrying that thread's span of that name).
    let mut seen: HashMap<(u32, String), (usize, usize)> = HashMap::new();
    let judge = |seen: &mut HashMap<(u32, String), (usize, usize)>, line: &str| {
        let Ok(v) = serde_json::from_str::<Value>(line) else { return };
        let Some(function) = v["frames"].as_array().into_iter().flatten().filter_map(|f| f["name"].as_str()).find(|n| n.starts_with("burn")) else {
            return;
        };
        let thread = if v["tid"] == service.pid { 0 } else { 1 };
        let name = match function {
            "burnAlpha" => "alpha",
            "burnBeta" => "beta",
            _ => return,
        };
        let own = service.spans.iter().find(|s| s.thread == thread && s.name == name).unwrap();
        let entry = seen.entry((thread, function.to_string())).or_default();
        entry.0 += 1;
        if v["span_id"] == own.span_id.as_str() && v["trace_id"] == own.trace_id.as_str() {
            entry.1 += 1;
        }
    };
    let enough = |seen: &HashMap<(u32, String), (usize, usize)>| seen.len() == 4 && seen.values().all(|(n, _)| *n >= MIN_SAMPLES_EACH);
    let r = thread_ctx_until(&["record", &pid, "--hz", "199", "--duration", "90s", "--format", "jsonl", "--frames", "--bpf-stats"], |line| {
        if let Some(l) = line {
            judge(&mut seen, l);
        }
        enough(&seen)
    });
    assert_eq!(r.code, 0, "record failed: {}", r.stderr);
    let _ = writeln_stderr(&format!(
        "dd-trace record: {seen:?}; {}",
        r.stderr.lines().filter(|l| l.contains("BPF program")).collect::<Vec<_>>().join("; ")
    ));
    assert!(enough(&seen), "the recording ended before each thread's functions had {MIN_SAMPLES_EACH} samples: {seen:?}\n{}", r.stderr);
    // --bpf-stats: the program's own clock over the target's samples lies inside the kernel's run
    // time of all runs over them (an interval inside each run).
    let ns = |line_end: &str| {
        let line = r.stderr.lines().find(|l| l.ends_with(line_end))?;
        line.strip_suffix(line_end)?.rsplit([' ', '=']).next()?.parse::<f64>().ok()
    };
    let (own, bound) = (ns(" ns per sample of the target (its own clock)"), ns(" ns per sample of the target"));
    assert!(matches!((own, bound), (Some(o), Some(b)) if o > 0.0 && o <= b * 1.05 + 50.0), "--bpf-stats: own {own:?}, bound {bound:?}\n{}", r.stderr);
    for ((thread, function), (n, linked)) in &seen {
        let share = *linked as f64 / *n as f64;
        assert!(
            share >= MIN_LINKED,
            "thread {thread}, {function}: {linked} of {n} samples carry its own span ({:.1}%), expected >= 90%",
            share * 100.0
        );
    }
    // No sample faulted on the way: every miss was a plain "no context".
    let faults: Vec<&str> =
        r.stdout.lines().filter(|l| l.contains("\"state\":\"nodejs_bad_frame\"") || l.contains("\"state\":\"nodejs_frame_fault\"")).collect();
    assert!(faults.len() * 100 <= seen.values().map(|(n, _)| n).sum::<usize>(), "{} samples faulted in the walk: {:?}", faults.len(), faults.first());
}

/// The agent tracks a dd-trace process like any writer's: its windows' samples carry spans, and its
/// pprof files carry dd-trace's span ids.
#[test]
fn the_agent_writes_span_linked_pprof_for_a_ddtrace_process() {
    if !ebpf_or_skip("the_agent_writes_span_linked_pprof_for_a_ddtrace_process") {
        return;
    }
    let _one = one_at_a_time();
    let service = start_service();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ddtrace-agent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let r = thread_ctx(&[
        "agent",
        "--pid",
        &service.pid.to_string(),
        "--interval",
        "2s",
        "--duration",
        "6s",
        "--hz",
        "99",
        "--pprof-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "agent failed: {}", r.stderr);
    assert!(r.stderr.contains("tracking process") && r.stderr.contains("dd_pprof"), "{}", r.stderr);
    // "N CPU samples (M with a span)" per window.
    let (mut samples, mut with_span) = (0u64, 0u64);
    for l in r.stderr.lines().filter(|l| l.contains("CPU samples (")) {
        let n = |after: &str| {
            l.split(after).next().and_then(|s| s.split_whitespace().last()).and_then(|v| v.trim_start_matches('(').parse::<u64>().ok()).unwrap_or(0)
        };
        samples += n(" CPU samples");
        with_span += n(" with a span");
    }
    assert!(samples > 0 && with_span * 10 >= samples * 9, "{with_span} of {samples} samples with a span:\n{}", r.stderr);
    let mut ids_seen = 0;
    for f in std::fs::read_dir(&dir).unwrap().flatten() {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(std::fs::File::open(f.path()).unwrap()), &mut bytes).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        ids_seen += service.spans.iter().filter(|s| s.thread == 0 && text.contains(&s.span_id)).count();
    }
    assert!(ids_seen > 0, "no pprof file in {} carries a span id of {:?}", dir.display(), service.spans);
    let _ = std::fs::remove_dir_all(&dir);
}
