//! `thread-ctx report --otlp FILE` on what a real OpenTelemetry Collector (built from Go modules
//! by scripts/build-collector.sh) received and wrote with its file exporter: two processes' hand-
//! built requests (links, http.route, a mapping with a build id, JS and native frames) sent by the
//! library's exporter, so that every figure the report prints is known exactly; the profile files
//! it draws for one process, span or trace; and its exit codes. (The demo test runs it on what the
//! agent sent for a live service.)

use thread_ctx_test_support::collector as collector_common;
use thread_ctx_test_support::otlp_request as otlp_common;

use collector_common::{Collector, Received};
use otlp_common::{config, example_request, BUILD_ID, SPAN_1, TRACE_ID};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;
use thread_ctx_otlp::common::{any_value, AnyValue};
use thread_ctx_otlp::{ExportProfilesServiceRequest, Exporter};

const DELIVERY: Duration = Duration::from_secs(60);

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The example request as process `pid` of service `service`.
fn request_of(pid: i64, service: &str) -> ExportProfilesServiceRequest {
    let mut r = example_request("report");
    for kv in &mut r.resource_profiles[0].resource.as_mut().unwrap().attributes {
        match kv.key.as_str() {
            "process.pid" => kv.value = Some(AnyValue { value: Some(any_value::Value::IntValue(pid)) }),
            "service.name" => kv.value = Some(AnyValue { value: Some(any_value::Value::StringValue(service.into())) }),
            _ => {}
        }
    }
    r
}

/// One Collector run for every test of this file: a copy of what it wrote (two requests, from
/// processes 4242 "checkout" and 4343 "billing"), and a directory for outputs.
fn received() -> &'static (PathBuf, PathBuf) {
    static FILE: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    FILE.get_or_init(|| {
        let mut collector = Collector::running();
        let exporter = Exporter::start(config(&collector.grpc_endpoint(), "grpc", "none")).unwrap();
        exporter.export(request_of(4242, "checkout"));
        exporter.export(request_of(4343, "billing"));
        assert!(exporter.flush(DELIVERY), "not delivered within {DELIVERY:?}: {:?}", exporter.stats());
        exporter.shutdown(Duration::from_secs(5));
        collector.wait_for(DELIVERY, "both requests", |r: &Received| r.messages.len() == 2);
        collector.stop();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("received.pb");
        std::fs::copy(collector.output_file(), &file).unwrap();
        (file, dir)
    })
}

fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_thread-ctx")).arg("report").args(args).output().expect("running thread-ctx report")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn columns(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn summarizes_each_process_the_collector_received() {
    let (file, _) = received();
    let out = report(&["--otlp", file.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], format!("{}: 2 requests, 12 CPU samples of 2 processes", file.display()), "{stdout}");
    // Each process: 3 samples of /api/search (span 1), 1 of /api/report (span 2), 2 unlinked, at 29 Hz.
    for (pid, service) in [(4242, "checkout"), (4343, "billing")] {
        let at = lines.iter().position(|l| l.starts_with(&format!("pid {pid} ({service}): "))).unwrap_or_else(|| panic!("no pid {pid}:\n{stdout}"));
        let block = &lines[at..];
        assert_eq!(block[0], format!("pid {pid} ({service}): 6 CPU samples at 29 Hz (~0.21 s on CPU) in 1 window over 10.0 s"));
        assert_eq!(block[1], format!("  resource: service.name={service} process.pid={pid} (+1 more)"));
        assert_eq!(block[2], format!("  build ids: /usr/bin/node {BUILD_ID}"));
        assert_eq!(columns(block[3]), ["HTTP.ROUTE", "SAMPLES", "%", "CPU", "s", "TRACES"]);
        assert_eq!(columns(block[4]), ["/api/search", "3", "50.0%", "0.10", "1"]);
        assert_eq!(block[5], "    top: burnCpu (server.js:12) 100%", "the JS frame, at its sampled line");
        assert_eq!(columns(block[6]), ["/api/report", "1", "16.7%", "0.03", "1"]);
        assert_eq!(columns(block[8])[..4], ["(no", "span)", "2", "33.3%"]);
        assert_eq!(columns(block[9])[..3], ["total", "6", "100.0%"]);
        assert_eq!(block[10], "66.7% of CPU samples carry a span; 100.0% of those carry http.route.");
    }
}

#[test]
fn one_process_by_span_and_its_files() {
    let (file, dir) = received();
    let f = file.to_str().unwrap();
    let svg = dir.join("span.svg");
    let folded = dir.join("span.folded");
    let pprof = dir.join("all.pb.gz");
    let (trace, span) = (hex(&TRACE_ID), hex(&SPAN_1));
    let out = report(&[
        "--otlp",
        f,
        "--pid",
        "4242",
        "--by",
        "span",
        "--top",
        "1",
        "--flamegraph",
        svg.to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
        "--pprof",
        pprof.to_str().unwrap(),
        "--trace",
        &trace,
        "--span",
        &span,
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.starts_with(&format!("{f}: 2 requests, 12 CPU samples of 2 processes (1 shown)\n")), "{stdout}");
    assert!(!stdout.contains("pid 4343"), "--pid shows one process:\n{stdout}");
    let row = stdout.lines().find(|l| l.starts_with(&format!("{trace} {span}"))).unwrap_or_else(|| panic!("no span row:\n{stdout}"));
    assert!(row.ends_with("http.route=/api/search") && columns(row)[2..4] == ["3", "50.0%"], "{row}");
    assert!(stdout.contains("(other: 1 more)"), "--top 1:\n{stdout}");
    // Then the selection the files show, summarized on its own: its samples, its total.
    let (_, selection) =
        stdout.split_once(&format!("selection (trace {trace} span {span}): 3 of 6 CPU samples\n")).unwrap_or_else(|| panic!("{stdout}"));
    let total = selection.lines().find(|l| l.starts_with("total")).unwrap();
    assert_eq!(columns(total)[1..3], ["3", "100.0%"], "{selection}");
    assert!(!selection.contains("(other"), "one span selected: {selection}");
    // Only that span's stacks, root (the thread) first.
    assert_eq!(std::fs::read_to_string(&folded).unwrap(), "main;uv_run;burnCpu file:///app/server.js:10_[j] 3\n");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.contains("burnCpu") && drawn.contains("<svg"), "{stderr}");
    // The title says which samples are drawn, the subtitle how many of them.
    assert!(drawn.contains(&format!(">CPU: trace {trace} span {span}<")), "the title names the kind drawn:\n{drawn}");
    assert!(drawn.contains("3 CPU samples"), "the subtitle counts the samples drawn:\n{drawn}");
    // The pprof keeps every sample; `thread-ctx flamegraph` draws from it like from a recording.
    let back = Command::new(env!("CARGO_BIN_EXE_thread-ctx"))
        .args(["flamegraph", pprof.to_str().unwrap(), "--trace", &trace, "--folded"])
        .arg(dir.join("trace.folded"))
        .output()
        .unwrap();
    assert_eq!(back.status.code(), Some(0), "{:?}", text(&back));
    assert_eq!(std::fs::read_to_string(dir.join("trace.folded")).unwrap(), "main;uv_run;burnCpu file:///app/server.js:10_[j] 4\n");
}

#[test]
fn bad_input_exits_with_its_code_and_names_the_flag() {
    let (file, dir) = received();
    let f = file.to_str().unwrap();
    let svg = dir.join("x.svg");
    let svg = svg.to_str().unwrap();
    let garbage = dir.join("garbage.pb");
    std::fs::write(&garbage, [0, 0, 0, 3, 0xff, 0xff, 0xff]).unwrap();
    let json = dir.join("received.json");
    std::fs::write(&json, "{\"resourceProfiles\":[]}\n").unwrap();
    let absent = "0f".repeat(16);
    // A pprof profile (gzip), and a file too short for one message's size prefix.
    let pprof = dir.join("bad-input.pb.gz");
    let drawn = report(&["--otlp", f, "--pid", "4242", "--pprof", pprof.to_str().unwrap()]);
    assert_eq!(drawn.status.code(), Some(0), "{:?}", text(&drawn));
    let two_bytes = dir.join("two-bytes.pb");
    std::fs::write(&two_bytes, [0x0a, 0x00]).unwrap();
    let folded = dir.join("empty.folded");
    let folded = folded.to_str().unwrap();
    let cases: [(&[&str], i32, &str); 13] = [
        (&["--otlp", "/nonexistent/received.pb"], 2, "--otlp: /nonexistent/received.pb does not exist"),
        (&["--otlp", f, "--pid", "1"], 2, "--pid: no such process in"),
        (
            &["--otlp", f, "--flamegraph", svg],
            2,
            "--pprof/--flamegraph/--folded: draw one process: select it with --pid (the file holds pid 4242 (checkout), pid 4343 (billing))",
        ),
        (&["--otlp", f, "--pid", "4242", "--flamegraph", svg, "--trace", &absent], 2, "--trace: no CPU samples of trace 0f0f"),
        (&["--otlp", f, "--trace", &absent], 2, "--trace/--span/--attr select what --flamegraph and --folded show"),
        (&["--otlp", garbage.to_str().unwrap()], 3, "is not an OTLP ProfilesData"),
        (&["--otlp", json.to_str().unwrap()], 3, "looks like the file exporter's json format"),
        (&["--otlp", pprof.to_str().unwrap()], 3, "is gzip data (a pprof profile?"),
        (&["--otlp", two_bytes.to_str().unwrap()], 3, "holds 2 bytes, less than one message"),
        // One empty selection, one outcome for every drawn or folded output.
        (&["--otlp", f, "--pid", "4242", "--folded", folded, "--trace", &absent], 2, "--trace: no CPU samples of trace 0f0f"),
        (&["--otlp", f, "--pid", "4242", "--folded", folded, "--kind", "alloc"], 2, "--kind alloc: no allocation samples"),
        // A key no sample carries: say which keys they carry.
        (&["--otlp", f, "--by", "route"], 2, "--by route: no sample carries route; they carry http.route"),
        (&["--otlp", f, "--pid", "4242", "--folded", folded, "--kind", "off-cpu"], 2, "--kind off-cpu: no off-CPU intervals"),
    ];
    for (args, code, message) in cases {
        let out = report(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}:\n{stdout}\n{stderr}");
        assert!(stderr.contains(message), "{args:?}: expected {message:?} in:\n{stderr}");
    }
    assert!(!Path::new(folded).exists(), "an empty selection writes no folded file");
}

/// A file as the Collector's file exporter writes enriched traces: 100 /wait requests, the
/// slowest held by a /hog request, and one child span; and the framing of `messages`.
fn traces_file(dir: &std::path::Path) -> PathBuf {
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, ArrayValue, KeyValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{span::Event, span::SpanKind, ResourceSpans, ScopeSpans, Span, TracesData};
    use prost::Message;
    let kv = |k: &str, v: Value| KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() };
    let request = |i: u8, ms: u64, held: Option<&str>| Span {
        trace_id: vec![i; 16],
        span_id: vec![i; 8],
        name: "GET /wait".into(),
        kind: SpanKind::Server as i32,
        start_time_unix_nano: 1_000_000_000,
        end_time_unix_nano: 1_000_000_000 + ms * 1_000_000,
        attributes: vec![
            kv("http.route", Value::StringValue("/wait".into())),
            kv("thread_ctx.cpu.span_ms", Value::DoubleValue(0.0)),
            kv("thread_ctx.cpu.trace_ms", Value::DoubleValue(1.0)),
            kv("thread_ctx.cpu.other_traces_ms", Value::DoubleValue(if held.is_some() { 60.6 } else { 0.0 })),
            kv("thread_ctx.cpu.no_span_ms", Value::DoubleValue(0.0)),
            kv("thread_ctx.off_cpu.no_span_ms", Value::DoubleValue(29.0)),
            kv("thread_ctx.samples", Value::IntValue(6)),
        ],
        events: held
            .map(|h| Event {
                name: "thread_ctx.profile".into(),
                attributes: vec![kv(
                    "held_by",
                    Value::ArrayValue(ArrayValue { values: vec![AnyValue { value: Some(Value::StringValue(h.into())) }] }),
                )],
                ..Default::default()
            })
            .into_iter()
            .collect(),
        ..Default::default()
    };
    let mut spans: Vec<Span> = (1..=99).map(|i| request(i, 30 + u64::from(i) / 10, None)).collect();
    spans.push(request(200, 95, Some("/hog 4bf92f3577b34da6a3ce929d0e0e4736 60.6ms: hogCPU (service.js:24)")));
    spans.push(Span { span_id: vec![7; 8], parent_span_id: vec![1; 8], kind: SpanKind::Internal as i32, name: "db".into(), ..request(1, 5, None) });
    let data = TracesData {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![kv("service.name", Value::StringValue("shop".into()))], ..Default::default() }),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    };
    let bytes = data.encode_to_vec();
    let path = dir.join("traces.pb");
    let mut framed = (bytes.len() as u32).to_be_bytes().to_vec();
    framed.extend(bytes);
    std::fs::write(&path, framed).unwrap();
    path
}

#[test]
fn traces_explain_the_slowest_requests_per_route() {
    let dir = tempfile::tempdir().unwrap();
    let file = traces_file(dir.path());
    let f = file.to_str().unwrap();
    let out = report(&["--traces", f, "--slowest", "1"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("101 spans, 100 requests of 1 routes (100 enriched by spanprofiles)"), "{stdout}");
    let row = stdout.lines().find(|l| l.starts_with("/wait ")).expect("the /wait row");
    assert_eq!(columns(row), ["/wait", "100", "35.0", "39.0", "39.0", "95.0"], "{stdout}");
    assert!(stdout.contains("/wait: the slowest 1 % (1 request, 95.0 ms and more)"), "{stdout}");
    assert!(stdout.contains("/hog 60.6 ms in hogCPU (service.js:24)"), "{stdout}");
    assert!(stdout.contains("trace c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8"), "the slowest request, by its trace id: {stdout}");

    let out = report(&["--traces", f, "--json", "--slowest", "2"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["routes"][0]["route"], "/wait");
    assert_eq!(json["routes"][0]["slowest_1_percent"]["per_request"]["other_requests_cpu_ms"], 60.6);
    assert_eq!(json["routes"][0]["slowest_1_percent"]["per_request"]["held_by"][0]["who"], "/hog");
    assert_eq!(json["slowest"].as_array().unwrap().len(), 2);

    let garbage = dir.path().join("garbage.pb");
    std::fs::write(&garbage, [0, 0, 0, 3, 0xff, 0xff, 0xff]).unwrap();
    let cases: [(&[&str], i32, &str); 4] = [
        (&["--traces", "/nonexistent/traces.pb"], 2, "--traces: /nonexistent/traces.pb does not exist"),
        (&["--traces", garbage.to_str().unwrap()], 3, "is not an OTLP TracesData"),
        (&["--otlp", f, "--traces", f], 2, "one report at a time"),
        (&["--slowest", "3"], 2, "--traces"),
    ];
    for (args, code, message) in cases {
        let out = report(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}:\n{stdout}\n{stderr}");
        assert!(stderr.contains(message), "{args:?}: expected {message:?} in:\n{stderr}");
    }
}

/// `traces_file`'s spans, then a second message: two requests of service "billing" (pid 4343).
fn two_services_file(dir: &std::path::Path) -> PathBuf {
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, ResourceSpans, ScopeSpans, Span, TracesData};
    use prost::Message;
    let kv = |k: &str, v: Value| KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() };
    let request = |i: u8, ms: u64| Span {
        trace_id: vec![i; 16],
        span_id: vec![i; 8],
        name: "POST /pay".into(),
        kind: SpanKind::Server as i32,
        start_time_unix_nano: 1_000_000_000,
        end_time_unix_nano: 1_000_000_000 + ms * 1_000_000,
        attributes: vec![kv("http.route", Value::StringValue("/pay".into()))],
        ..Default::default()
    };
    let billing = TracesData {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", Value::StringValue("billing".into())), kv("process.pid", Value::IntValue(4343))],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans { spans: vec![request(0xb1, 12), request(0xb2, 14)], ..Default::default() }],
            ..Default::default()
        }],
    };
    let path = traces_file(dir);
    let mut bytes = std::fs::read(&path).unwrap();
    let message = billing.encode_to_vec();
    bytes.extend((message.len() as u32).to_be_bytes());
    bytes.extend(message);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Random bytes from a fixed seed (xorshift): the same "garbage" every run.
fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn traces_files_that_hold_no_whole_message_and_selections_that_match_nothing_exit_with_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let file = two_services_file(dir.path());
    let f = file.to_str().unwrap();
    let three = dir.path().join("three-bytes.pb");
    std::fs::write(&three, [1, 2, 3]).unwrap();
    let random = dir.path().join("random.pb");
    std::fs::write(&random, noise(100 * 1024)).unwrap();
    let svg = dir.path().join("x.svg");
    let cases: [(&[&str], i32, &str); 9] = [
        (&["--traces", three.to_str().unwrap()], 3, "holds 3 bytes, less than one message's 4-byte size"),
        (&["--traces", random.to_str().unwrap()], 3, "expected the Collector file exporter's proto format of traces"),
        (&["--traces", f, "--service", "no-such-svc"], 2, "--service: no span of"),
        (&["--traces", f, "--pid", "1"], 2, "--pid: no span of"),
        (&["--traces", f, "--trace", &"ff".repeat(16), "--service", "shop"], 2, "--service/--trace: no span of"),
        (&["--traces", f, "--by", "span"], 2, "--by: not with --traces"),
        (&["--traces", f, "--flamegraph", svg.to_str().unwrap()], 2, "--flamegraph: not with --traces"),
        (&["--traces", f, "--kind", "cpu"], 2, "--kind: not with --traces"),
        (&["--traces", f, "--attr", "novalue"], 2, "--attr: expected KEY=VALUE"),
    ];
    for (args, code, message) in cases {
        let out = report(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}:\n{stdout}\n{stderr}");
        assert!(stderr.contains(message), "{args:?}: expected {message:?} in:\n{stderr}");
        assert!(stdout.is_empty(), "{args:?}: no report on stdout:\n{stdout}");
    }
    // What the file holds, so that the user can choose.
    let out = report(&["--traces", f, "--service", "no-such-svc"]);
    assert!(text(&out).1.contains("(103 spans; services billing, shop; process.pid 4343)"), "{:?}", text(&out));
    assert!(!svg.exists(), "nothing drawn");
}

#[test]
fn traces_selections_apply_to_the_spans() {
    let dir = tempfile::tempdir().unwrap();
    let file = two_services_file(dir.path());
    let f = file.to_str().unwrap();
    let routes = |args: &[&str]| {
        let out = report(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}:\n{stdout}\n{stderr}");
        let table = stdout.split("\n\n").nth(1).unwrap_or_else(|| panic!("{stdout}"));
        let rows: Vec<(String, String)> = table.lines().skip(1).map(|l| (columns(l)[0].to_string(), columns(l)[1].to_string())).collect();
        (stdout.lines().next().unwrap().to_string(), rows)
    };
    let (head, rows) = routes(&["--traces", f]);
    assert_eq!(rows, [("/wait".to_string(), "100".to_string()), ("/pay".into(), "2".into())], "{head}");
    let (head, rows) = routes(&["--traces", f, "--service", "billing"]);
    assert_eq!(rows, [("/pay".to_string(), "2".to_string())]);
    assert!(head.starts_with(&format!("{f} (selected 2 of its 103 spans): 2 spans, 2 requests of 1 routes")), "{head}");
    let (_, rows) = routes(&["--traces", f, "--pid", "4343"]);
    assert_eq!(rows, [("/pay".to_string(), "2".to_string())]);
    let (_, rows) = routes(&["--traces", f, "--attr", "http.route=/wait", "--trace", &"c8".repeat(16)]);
    assert_eq!(rows, [("/wait".to_string(), "1".to_string())], "one trace of /wait");
    let (_, rows) = routes(&["--traces", f, "--span", &"b2".repeat(8)]);
    assert_eq!(rows, [("/pay".to_string(), "1".to_string())]);
}

/// A Collector's traces file far larger than what the report needs in memory: the report reads
/// it a message at a time (it held every span before: 805 MB of RSS for a 139 MB file). The
/// peak RSS is read from /proc while it runs and from the kernel's account when it exits.
#[test]
fn traces_report_memory_stays_bounded_on_a_large_file() {
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, ArrayValue, KeyValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{span::Event, span::SpanKind, ResourceSpans, ScopeSpans, Span, TracesData};
    use prost::Message;
    use std::io::Write;
    const FILE_BYTES: u64 = 160 << 20;
    const RSS_BOUND_KIB: u64 = 32 << 10;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-large-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("traces.pb");
    let kv = |k: &str, v: Value| KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() };
    let strings =
        |xs: Vec<String>| Value::ArrayValue(ArrayValue { values: xs.into_iter().map(|s| AnyValue { value: Some(Value::StringValue(s)) }).collect() });
    // One message: a batch of 1,000 enriched spans of 20 routes, each ~1 KB with its event.
    let batch = |n: u64| {
        let spans = (0..1000u64)
            .map(|i| {
                let k = n * 1000 + i;
                let route = format!("/route/{}", k % 20);
                Span {
                    trace_id: k.to_be_bytes().repeat(2),
                    span_id: k.to_be_bytes().to_vec(),
                    name: format!("GET {route}"),
                    kind: SpanKind::Server as i32,
                    start_time_unix_nano: 1_000_000_000 + k,
                    end_time_unix_nano: 1_000_000_000 + k + 1_000_000 + (k * 7919) % 50_000_000,
                    attributes: vec![
                        kv("http.route", Value::StringValue(route)),
                        kv("thread_ctx.cpu.trace_ms", Value::DoubleValue(1.5)),
                        kv("thread_ctx.cpu.other_traces_ms", Value::DoubleValue(3.0)),
                        kv("thread_ctx.samples", Value::IntValue(6)),
                    ],
                    events: vec![Event {
                        name: "thread_ctx.profile".into(),
                        attributes: vec![
                            kv(
                                "top_frames",
                                strings((0..5).map(|f| format!("handler{f} (/srv/app/routes/file{}.js:{}) 20%", k % 97, f * 10)).collect()),
                            ),
                            kv(
                                "held_by",
                                strings((0..5).map(|h| format!("/route/{h} {:032x} 0.6ms: hog{h} (/srv/app/hog.js:{h})", k + h)).collect()),
                            ),
                        ],
                        ..Default::default()
                    }],
                    ..Default::default()
                }
            })
            .collect();
        TracesData {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource { attributes: vec![kv("service.name", Value::StringValue("big".into()))], ..Default::default() }),
                scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        }
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let (mut written, mut batches) = (0u64, 0u64);
    while written < FILE_BYTES {
        let message = batch(batches).encode_to_vec();
        out.write_all(&(message.len() as u32).to_be_bytes()).unwrap();
        out.write_all(&message).unwrap();
        written += 4 + message.len() as u64;
        batches += 1;
    }
    out.flush().unwrap();
    drop(out);

    let run = peak_rss(&["report", "--traces", path.to_str().unwrap(), "--slowest", "3"]);
    // bench/report-memory.sh measures other builds on the same file.
    if let Some(keep) = std::env::var_os("REPORT_TRACES_KEEP_FILE") {
        std::fs::rename(&path, &keep).unwrap_or_else(|e| panic!("keeping the file as {keep:?}: {e}"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let Measured { stdout, stderr, exit_status: wstatus, peak_kib, proc_peak_kib, rusage_kib, polls } = run;
    assert!(libc::WIFEXITED(wstatus) && libc::WEXITSTATUS(wstatus) == 0, "exit {wstatus}:\n{stdout}\n{stderr}");
    let spans = batches * 1000;
    assert!(stdout.contains(&format!(": {spans} spans, {spans} requests of 20 routes ({spans} enriched by spanprofiles)")), "{stdout}");
    assert!(stdout.contains("the 3 slowest requests:"), "{stdout}");
    assert!(polls > 0, "the report ran too briefly to be read from /proc");
    assert!(
        peak_kib <= RSS_BOUND_KIB,
        "report --traces of a {} MiB file ({spans} spans) peaked at {} MiB of RSS (/proc VmHWM {} MiB, rusage {} MiB): more than {} MiB",
        written >> 20,
        peak_kib >> 10,
        proc_peak_kib >> 10,
        rusage_kib >> 10,
        RSS_BOUND_KIB >> 10
    );
}

/// What [`peak_rss`] saw of one run of the binary.
struct Measured {
    stdout: String,
    stderr: String,
    /// As wait4 gives it.
    exit_status: i32,
    /// The larger of the two accounts below.
    peak_kib: u64,
    proc_peak_kib: u64,
    rusage_kib: u64,
    /// How often /proc was read while it ran.
    polls: u32,
}

/// Runs `thread-ctx ARGS` and measures its peak RSS: VmHWM from /proc while it runs, and the
/// kernel's own account when it is reaped.
fn peak_rss(args: &[&str]) -> Measured {
    let mut child = Command::new(env!("CARGO_BIN_EXE_thread-ctx"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Read the pipes on threads, so the child never waits on a full pipe.
    let mut stdout_pipe = child.stdout.take().unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let reading = std::thread::spawn(move || {
        let (mut o, mut e) = (String::new(), String::new());
        std::io::Read::read_to_string(&mut stdout_pipe, &mut o).unwrap();
        std::io::Read::read_to_string(&mut stderr_pipe, &mut e).unwrap();
        (o, e)
    });
    // VmHWM (the peak) from /proc, until the process has exited (its status then has no Vm lines).
    let mut proc_peak_kib = 0u64;
    let status_file = format!("/proc/{pid}/status");
    let mut polls = 0u32;
    let peak_now = || {
        let status = std::fs::read_to_string(&status_file).ok()?;
        status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
    };
    while let Some(kib) = peak_now() {
        proc_peak_kib = proc_peak_kib.max(kib);
        polls += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut wstatus = 0;
    // SAFETY: a plain rusage struct filled by the kernel for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child, whose pid std has not reaped (we never call wait on it).
    let reaped = unsafe { libc::wait4(pid, &mut wstatus, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let (stdout, stderr) = reading.join().unwrap();
    drop(child);
    let rusage_kib = usage.ru_maxrss as u64;
    Measured { stdout, stderr, exit_status: wstatus, peak_kib: rusage_kib.max(proc_peak_kib), proc_peak_kib, rusage_kib, polls }
}

/// How a generated Collector profiles file's samples come back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Repeats {
    /// 3,000 distinct stacks and 1,000 traces per process, round after round.
    Round,
    /// Every sample a new (stack, trace) pair: no request and no stack ever seen twice.
    Never,
}

/// One message as the Collector's file exporter writes it (its size, then OTLP ProfilesData): the
/// 10 s window number `window` of these (pid, profile) processes of service `service` on host
/// node-1, as the agent's own encoder sends them.
fn framed_message(service: &str, processes: &[(u64, thread_ctx_model::Profile)], window: u64) -> Vec<u8> {
    use prost::Message;
    use thread_ctx_discovery::process_context_proto::{string_value, KeyValue as ContextKeyValue, Resource as ContextResource};
    use thread_ctx_otlp::encode::{export_request, ProcessWindow};
    use thread_ctx_otlp::profiles::ProfilesData;
    let kv = |key: &str, v: String| ContextKeyValue { key: key.into(), value: Some(string_value(v)) };
    let resources: Vec<ContextResource> = processes
        .iter()
        .map(|(pid, _)| ContextResource {
            attributes: vec![kv("service.name", service.into()), kv("process.pid", pid.to_string()), kv("host.name", "node-1".into())],
            ..Default::default()
        })
        .collect();
    let sent: Vec<ProcessWindow> = processes
        .iter()
        .zip(&resources)
        .map(|((_, profile), resource)| ProcessWindow {
            resource,
            profile,
            start_unix_ns: 1_700_000_000_000_000_000 + window * 10_000_000_000,
            duration_ns: 10_000_000_000,
            throttling: None,
        })
        .collect();
    let request = export_request(&sent);
    let message = ProfilesData { resource_profiles: request.resource_profiles, dictionary: request.dictionary }.encode_to_vec();
    let mut framed = (message.len() as u32).to_be_bytes().to_vec();
    framed.extend(message);
    framed
}

/// Writes a Collector profiles file of 30 MB at `path`, windows as the agent sends them (its own
/// encoder: four processes of a service, 1,000 CPU samples each per 10 s window, 20 routes,
/// stacks of 24 frames over 400 JS functions and 40 native ones, one trace per request of three
/// samples); returns (messages, bytes written).
fn write_profiles_file(path: &Path, repeats: Repeats) -> (u64, u64) {
    use std::io::Write;
    use thread_ctx_model::symbolized::{Observation, StackFrame};
    use thread_ctx_model::{Entry, Frame, Profile, SampleKind};
    const FILE_BYTES: u64 = 30 << 20;
    // A deterministic walk (an LCG), so that every run writes the same file.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    // Leaf first: 20 JS frames, then 4 native ones.
    let mut new_stack = move || -> Vec<(bool, u64)> { (0..24).map(|depth| (depth >= 20, if depth >= 20 { next(40) } else { next(400) })).collect() };
    let stacks: Vec<Vec<(bool, u64)>> = (0..3_000).map(|_| new_stack()).collect();
    let mut window = |n: u64, pid: u64| {
        let mut p = Profile::default();
        (p.pid, p.cpu_period_ns, p.runs_v8, p.times_complete) = (pid as i32, PERIOD_NS, true, true);
        for i in 0..SAMPLES_PER_WINDOW {
            // Sample k of a process: Round, stack k mod 3,000, request (k / 3) mod 1,000: 3,000
            // distinct (stack, trace) pairs, each met again every 3,000 samples; Never, a stack
            // of its own, request k / 3 of this process.
            let k = n * SAMPLES_PER_WINDOW + i;
            let (frames, request) = match repeats {
                Repeats::Round => (stacks[(k % stacks.len() as u64) as usize].clone(), (k / 3) % 1_000),
                Repeats::Never => (new_stack(), (pid << 32) | (k / 3)),
            };
            let stack = frames
                .iter()
                .map(|&(native, f)| {
                    let frame = if native {
                        Frame::native(&format!("uv_native_{f}"), Some("/usr/bin/node"))
                    } else {
                        Frame::js(&format!("handler{f}"), Some(&format!("/srv/app/routes/file{}.js", f % 50)), Some(f as u32 % 300 + 1), Some(3))
                    };
                    StackFrame { addr: 0x7f00_0000_0000 + f * 0x40 + u64::from(native), frame: p.intern(frame), kernel: false }
                })
                .collect();
            let time_ns = 1_000_000_000 + n * 10_000_000_000 + i * PERIOD_NS;
            p.push_entry(Entry {
                kind: SampleKind::Cpu,
                stack,
                tid: pid as u32,
                trace_id: Some((request as u128 + 1).to_be_bytes()),
                span_id: Some((request + 1).to_be_bytes()),
                attrs: vec![("http.route".into(), format!("/route/{}", request % 20))],
                count: 1,
                weight: PERIOD_NS,
                times: vec![Observation { time_ns, weight: PERIOD_NS }],
            });
        }
        p
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let (mut written, mut windows) = (0u64, 0u64);
    while written < FILE_BYTES {
        let profiles: Vec<(u64, Profile)> = (0..PROCESSES).map(|k| (5000 + k, window(windows, 5000 + k))).collect();
        let message = framed_message("big", &profiles, windows);
        out.write_all(&message).unwrap();
        written += message.len() as u64;
        windows += 1;
    }
    out.flush().unwrap();
    (windows, written)
}

const PROCESSES: u64 = 4;
const SAMPLES_PER_WINDOW: u64 = 1_000;
const PERIOD_NS: u64 = 10_101_010;

/// `report --otlp` of a 30 MB file generated with `repeats` peaks at <= 128 MiB of RSS, measured
/// from outside; `keep_var` names the variable that keeps the file (bench/report-memory.sh).
fn otlp_report_memory_stays_bounded(repeats: Repeats, keep_var: &str) {
    const RSS_BOUND_KIB: u64 = 128 << 10;
    let name = if repeats == Repeats::Round { "round" } else { "unique" };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-otlp-large-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("profiles.pb");
    let (windows, written) = write_profiles_file(&path, repeats);
    let run = peak_rss(&["report", "--otlp", path.to_str().unwrap()]);
    // bench/report-memory.sh measures other builds on the same file.
    if let Some(keep) = std::env::var_os(keep_var) {
        std::fs::rename(&path, &keep).unwrap_or_else(|e| panic!("keeping the file as {keep:?}: {e}"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let Measured { stdout, stderr, exit_status, peak_kib, proc_peak_kib, rusage_kib, polls } = run;
    assert!(libc::WIFEXITED(exit_status) && libc::WEXITSTATUS(exit_status) == 0, "exit {exit_status}:\n{stdout}\n{stderr}");
    let samples = windows * PROCESSES * SAMPLES_PER_WINDOW;
    assert!(stdout.contains(&format!(": {windows} requests, {samples} CPU samples of {PROCESSES} processes\n")), "{stdout}");
    // Every process's table: 20 routes, 10 shown, the other 10 in one row, all its samples in all.
    assert_eq!(stdout.matches("(other: 10 more)").count(), PROCESSES as usize, "{stdout}");
    assert_eq!(stdout.matches("\n    top: handler").count(), 10 * PROCESSES as usize, "{stdout}");
    let per_process = windows * SAMPLES_PER_WINDOW;
    assert_eq!(stdout.matches(&format!("\n{:<24}  {per_process:>8}  100.0%", "total")).count(), PROCESSES as usize, "{stdout}");
    assert!(polls > 0, "the report ran too briefly to be read from /proc");
    assert!(
        peak_kib <= RSS_BOUND_KIB,
        "report --otlp of a {} MiB file ({windows} messages, {samples} samples) peaked at {} MiB of RSS (/proc VmHWM {} MiB, rusage {} MiB): more than {} MiB",
        written >> 20,
        peak_kib >> 10,
        proc_peak_kib >> 10,
        rusage_kib >> 10,
        RSS_BOUND_KIB >> 10
    );
}

/// GET `path` of a server on `addr`: the status and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    write!(conn, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.split_whitespace().nth(1).unwrap().parse().unwrap(), body.to_string())
}

/// `--html` writes the page whole, its data inside and nothing to fetch; `--serve` serves the
/// same data and the flame graphs of the profiles file folded when asked for; the page's flags
/// refuse what they cannot do, by name. (__test__/e2e/report-page.test.js opens both in chromium.)
#[test]
fn the_page_is_written_whole_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let traces = traces_file(dir.path());
    let (profiles, _) = received();
    let (t, p) = (traces.to_str().unwrap(), profiles.to_str().unwrap());
    let html = dir.path().join("page.html");
    let out = report(&["--traces", t, "--otlp", p, "--html", html.to_str().unwrap()]);
    assert!(out.status.success(), "{:?}", text(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    for fetched in ["src=\"http", "href=\"http", "src=\"//", "@import", "fetch('http"] {
        assert!(!page.contains(fetched), "the page fetches ({fetched})");
    }
    let start = page.find("<script id=\"page-data\" type=\"application/json\">").unwrap();
    let json = &page[start..];
    let json = &json[json.find('>').unwrap() + 1..json.find("</script>").unwrap()];
    let data: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(data["routes"][0]["route"], "/wait");
    assert_eq!(data["slowest"][0]["trace_id"], "c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8");
    assert_eq!(data["slowest"][0]["causes"]["held_by"][0]["frame"], "hogCPU (service.js:24)");
    // Who made whom wait counts `held_by_routes`, which this file's spans do not carry.
    assert_eq!(data["holders"], serde_json::json!([]));
    assert_eq!(data["traces"]["c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8"]["spans"][0]["holders"][0]["route"], "/hog");
    assert!(data["traces"]["c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8"]["spans"].as_array().is_some_and(|s| !s.is_empty()));
    // The profiles' routes are not this traces file's: the page draws none of them.
    assert_eq!(data["flames"], serde_json::json!({}));

    let mut server = Command::new(env!("CARGO_BIN_EXE_thread-ctx"))
        .args(["report", "--traces", t, "--otlp", p, "--serve", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.stdout.take().unwrap()), &mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|a| a.split('/').next()).unwrap_or_else(|| panic!("no address in {line:?}")).to_string();
    let (status, body) = get(&addr, "/");
    assert!(status == 200 && body.contains("d3-flame-graph") && !body.contains("page-data\""), "{status}");
    let (status, body) = get(&addr, "/api/data");
    let served: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, &served["routes"], &served["holders"]), (200, &data["routes"], &data["holders"]));
    let (status, body) = get(&addr, "/api/flame?of=route&kind=cpu&key=%2Fapi%2Fsearch");
    let flame: serde_json::Value = serde_json::from_str(&body).unwrap();
    // Three CPU samples of /api/search from each process, each process a root.
    assert_eq!((status, &flame["total"], &flame["unit"]), (200, &serde_json::json!(6), &serde_json::json!("samples")));
    let roots: std::collections::BTreeSet<&str> =
        flame["stacks"].as_array().unwrap().iter().map(|s| s[0].as_str().unwrap().split(';').next().unwrap()).collect();
    assert_eq!(roots.into_iter().collect::<Vec<_>>(), ["billing (pid 4343)", "checkout (pid 4242)"]);
    assert_eq!(get(&addr, "/api/flame?of=trace&kind=cpu&key=nope").0, 400);
    assert_eq!(get(&addr, "/nope").0, 404);
    server.kill().unwrap();
    server.wait().unwrap();

    let cases: [(&[&str], &str); 6] = [
        (&["--traces", t, "--serve", "0.0.0.0:0"], "--serve: 0.0.0.0:0 is not a loopback address"),
        (&["--traces", t, "--html", "/tmp/x.html", "--slowest", "3"], "--slowest: not with --serve/--html"),
        (&["--traces", t, "--serve", "somewhere"], "--serve: \"somewhere\" is not an address"),
        (&["--otlp", p, "--html", "/tmp/x.html"], "--serve/--html: give --traces FILE"),
        (&["--traces", t, "--html", "/tmp/x.html", "--jaeger", "ftp://x"], "--jaeger: \"ftp://x\" is not an http:// or https:// URL"),
        (&["--traces", t, "--jaeger", "http://127.0.0.1:16686"], "--jaeger: it links the page's requests to Jaeger"),
    ];
    for (args, message) in cases {
        let out = report(args);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: expected {message:?} in:\n{stderr}");
    }
}

/// A file of a service whose requests come back (3,000 distinct stacks and 1,000 traces, round
/// after round). `report --otlp` reads it a message at a time and adds each sample up as it is
/// resolved (it held every message and every resolved sample before: 881 MiB of RSS for a 3 MB
/// file, 8.4 GB for 28 MB).
#[test]
fn otlp_report_memory_stays_bounded_on_a_large_file() {
    otlp_report_memory_stays_bounded(Repeats::Round, "REPORT_OTLP_KEEP_FILE");
}

/// A file whose every sample is a new (stack, trace) pair: a report that kept a profile entry per
/// pair took 611 MiB (docs/benchmarks.md); one that adds up only what it prints stays bounded.
#[test]
fn otlp_report_memory_stays_bounded_when_no_sample_repeats() {
    otlp_report_memory_stays_bounded(Repeats::Never, "REPORT_OTLP_UNIQUE_KEEP_FILE");
}

/// Rows by http.route when a shown process's samples carry it, else by trace: the first pass adds
/// rows up by route, and a second pass over the same bytes by trace when `--pid` shows only a
/// process whose samples carry none. Process 6000 tags its samples with a route, 6001 does not;
/// each has three traces of 1, 2 and 3 samples, and one sample without a span.
#[test]
fn otlp_rows_are_traces_when_no_shown_sample_carries_a_route() {
    use thread_ctx_model::symbolized::StackFrame;
    use thread_ctx_model::{Entry, Frame, Profile, SampleKind};
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-otlp-routes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("profiles.pb");
    let profile = |pid: u64, routed: bool| {
        let mut p = Profile::default();
        (p.pid, p.cpu_period_ns, p.runs_v8, p.times_complete) = (pid as i32, PERIOD_NS, true, true);
        let frame = p.intern(Frame::js("work", Some("/srv/app/work.js"), Some(7), Some(3)));
        for (trace, count) in [(1u8, 1u64), (2, 2), (3, 3), (0, 1)] {
            let attrs = if routed { vec![("http.route".to_string(), format!("/r{trace}"))] } else { vec![] };
            let ids = (trace > 0).then_some((trace, trace));
            let stack = vec![StackFrame { addr: 0x7f00_0000_0040, frame, kernel: false }];
            p.push_entry(Entry {
                kind: SampleKind::Cpu,
                stack,
                tid: pid as u32,
                trace_id: ids.map(|(t, _)| [t; 16]),
                span_id: ids.map(|(_, s)| [s; 8]),
                attrs,
                count,
                weight: count * PERIOD_NS,
                times: vec![],
            });
        }
        p
    };
    std::fs::write(&path, framed_message("rows", &[(6000, profile(6000, true)), (6001, profile(6001, false))], 0)).unwrap();
    let f = path.to_str().unwrap();

    let both = report(&["--otlp", f]);
    let (stdout, stderr) = text(&both);
    assert_eq!(both.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout.matches("\nHTTP.ROUTE ").count(), 2, "one process carries a route: both tables by route\n{stdout}");
    assert!(!stderr.contains("rows are traces"), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let of = |pid: u32| lines.iter().position(|l| l.starts_with(&format!("pid {pid} "))).unwrap_or_else(|| panic!("no pid {pid}:\n{stdout}"));
    assert_eq!(columns(lines[of(6000) + 4])[..2], ["/r3", "3"], "{stdout}");
    assert_eq!(columns(lines[of(6001) + 4])[..4], ["(no", "http.route)", "6", "85.7%"], "{stdout}");

    let alone = report(&["--otlp", f, "--pid", "6001"]);
    let (stdout, stderr) = text(&alone);
    assert_eq!(alone.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.starts_with(&format!("{f}: 1 requests, 14 CPU samples of 2 processes (1 shown)\n")), "{stdout}");
    assert!(stderr.contains("thread-ctx: note: rows are traces: no span carried http.route"), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(columns(lines[5]), ["TRACE", "SAMPLES", "%", "CPU", "s", "SPANS"], "{stdout}");
    for (at, trace, count) in [(6, 3u8, "3"), (8, 2, "2"), (10, 1, "1")] {
        assert_eq!(columns(lines[at])[..2], [hex(&[trace; 16]).as_str(), count], "{stdout}");
        assert_eq!(lines[at + 1], "    top: work (work.js:7) 100%", "{stdout}");
    }
    assert_eq!(columns(lines[12])[..4], ["(no", "span)", "1", "14.3%"], "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The page's waterfall of a request across two services nests each span under its parent span
/// id, not by time: inventory's server span, whose clock runs 2 ms ahead of the gateway's, sits
/// under the gateway's client span that called it; a span whose parent is not in the file sits
/// at the top, in start order.
#[test]
fn the_page_nests_a_trace_across_two_services_by_parent() {
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, ResourceSpans, ScopeSpans, Span, TracesData};
    use prost::Message;
    let kv = |k: &str, v: &str| KeyValue { key: k.into(), value: Some(AnyValue { value: Some(Value::StringValue(v.into())) }), ..Default::default() };
    let span = |id: u8, parent: Option<u8>, kind: SpanKind, name: &str, start_ms: u64, ms: u64| Span {
        trace_id: vec![0x42; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: name.into(),
        kind: kind as i32,
        start_time_unix_nano: 1_000_000_000 + start_ms * 1_000_000,
        end_time_unix_nano: 1_000_000_000 + (start_ms + ms) * 1_000_000,
        ..Default::default()
    };
    let of = |service: &str, spans: Vec<Span>| TracesData {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![kv("service.name", service)], ..Default::default() }),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    };
    // Inventory's spans come first, as its exporter may flush before the gateway's.
    let inventory = of(
        "inventory",
        vec![span(0x12, Some(0x11), SpanKind::Server, "GET /stock/:sku", 3, 20), span(0x13, Some(0x12), SpanKind::Internal, "recompute", 4, 18)],
    );
    let gateway = of(
        "gateway",
        vec![
            span(0x01, None, SpanKind::Server, "POST /graphql", 0, 30),
            span(0x11, Some(0x01), SpanKind::Client, "GET", 5, 20),
            span(0x14, Some(0x01), SpanKind::Internal, "resolve", 26, 2),
            span(0x20, Some(0xff), SpanKind::Internal, "orphan", 1, 1),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces.pb");
    let mut bytes = Vec::new();
    for message in [inventory.encode_to_vec(), gateway.encode_to_vec()] {
        bytes.extend((message.len() as u32).to_be_bytes());
        bytes.extend(message);
    }
    std::fs::write(&traces, bytes).unwrap();
    let html = dir.path().join("page.html");
    let out = report(&["--traces", traces.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert!(out.status.success(), "{:?}", text(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    let json = &page[page.find("<script id=\"page-data\" type=\"application/json\">").unwrap()..];
    let data: serde_json::Value = serde_json::from_str(&json[json.find('>').unwrap() + 1..json.find("</script>").unwrap()]).unwrap();
    let rows: Vec<String> = data["traces"]["42".repeat(16)]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{} {} <- {}", s["service"].as_str().unwrap(), s["name"].as_str().unwrap(), &s["parent"].as_str().unwrap()))
        .collect();
    let id = |b: u8| format!("{b:02x}").repeat(8);
    assert_eq!(
        rows,
        [
            "gateway POST /graphql <- ".to_string(),
            format!("gateway GET <- {}", id(0x01)),
            format!("inventory GET /stock/:sku <- {}", id(0x11)),
            format!("inventory recompute <- {}", id(0x12)),
            format!("gateway resolve <- {}", id(0x01)),
            "gateway orphan <- ".to_string(),
        ]
    );
    // report --traces reads the same spans as before: both services' requests, no new field.
    let out = report(&["--traces", traces.to_str().unwrap(), "--json"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stdout.contains("parent"), "{stdout}");
}
