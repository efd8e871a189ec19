//! The Rust <-> Go contract of the span-profiles pipeline, tied by golden files in the
//! connector's `testdata/agent/` (the `span_profiles` connector, Go, reads and writes them too):
//!
//! - `profiles.pb`: what `thread-ctx agent`'s encoder (`encode.rs`) sends for one window of a
//!   known workload, byte for byte; `spans.pb`: the spans the workload's SDK sent. The connector's
//!   `agent_golden_test.go` joins the two and checks what it answers.
//! - `enriched.pb`: what the connector made of them (written by that Go test), which
//!   `thread-ctx report --traces` reads through `traces.rs`: read back here field by field.
//!
//! So a change on either side of the contract (`encode.rs`, the connector's `contract.go`,
//! `traces.rs`) fails a unit test, without the end-to-end test. After a deliberate change,
//! regenerate and check the other side:
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test --release -p thread-ctx-otlp --test connector_contract
//! UPDATE_GOLDEN=1 go test -C collector/spanprofilesconnector -run TestAgentGolden ./...
//! cargo test --release -p thread-ctx-otlp --test connector_contract
//! ```
//!
//! The files are the file exporter's proto format (each message preceded by its size, 4 bytes
//! big endian), as a Collector writes them.

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource as OtlpResource;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, ResourceSpans, ScopeSpans, Span as OtlpSpan, TracesData};
use prost::Message;
use std::path::{Path, PathBuf};
use thread_ctx_discovery::process_context_proto::{string_value, AnyValue as CtxValue, KeyValue as CtxKeyValue, Resource};
use thread_ctx_model::symbolized::{Observation, StackFrame};
use thread_ctx_model::{Entry, Frame, Profile, SampleKind};
use thread_ctx_otlp::encode::{export_request, ProcessWindow};
use thread_ctx_otlp::traces::read_traces_file;

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../collector/spanprofilesconnector/testdata/agent").join(name)
}

fn framed(messages: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        out.extend((m.len() as u32).to_be_bytes());
        out.extend(m);
    }
    out
}

/// Compares `bytes` with the golden file `name`, or writes it when UPDATE_GOLDEN is set.
fn check_golden(name: &str, bytes: &[u8]) {
    let path = golden(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        committed == bytes,
        "{name}: the encoder's output is not the golden file {} ({} bytes now, {} committed). If the change is meant, \
         regenerate it (UPDATE_GOLDEN=1, see the top of this file) and make the connector's go test pass on it",
        path.display(),
        bytes.len(),
        committed.len()
    );
}

// The workload, one window of one process (`__test__/e2e/service.js`'s routes): times in ms
// after the window's start, wall clock T0.
const T0_UNIX_NS: u64 = 1_765_000_000_000_000_000;
const PID: i32 = 4242;
const MAIN_TID: u32 = 4242;
const PERIOD_NS: u64 = 10_000_000;
const INSTANCE: &str = "6a1d2c1e-3f0b-4c59-9d1a-5b0e2f7c8a90";
const HOG: ([u8; 16], [u8; 8]) = ([0x4b; 16], [0x1a; 8]);
const WAIT: ([u8; 16], [u8; 8]) = ([0x5c; 16], [0x2b; 8]);
const ALLOC: ([u8; 16], [u8; 8]) = ([0x6d; 16], [0x3c; 8]);
const SERVICE_JS: &str = "/app/service.js";

fn ms(t: f64) -> u64 {
    (t * 1e6) as u64
}

/// The agent's window: on the main thread, /wait (100-190 ms) runs its handler, then awaits a
/// timer while /hog (110-150 ms) burns 4 samples in hogCPU and is preempted 5 ms; the loop
/// collects garbage with no span, sleeps in epoll_wait 30 ms, and /wait answers; later /alloc
/// (200-240 ms) allocates 1.8 MB in allocateRows.
fn profile() -> Profile {
    let mut p = Profile::new(PID);
    (p.cpu_period_ns, p.off_cpu_traced, p.alloc_traced, p.runs_v8) = (PERIOD_NS, true, true, true);
    p.monotonic_to_unix_ns = T0_UNIX_NS as i64;
    p.mappings = vec![Profile::test_node_mapping()];
    p.build_ids.insert(("08:01".into(), 7), "4c3a1e0b9d2f".into());
    p.thread_names.insert(MAIN_TID, "node".into());
    let at = |p: &mut Profile, f: Frame, addr: u64, kernel: bool| StackFrame { addr, frame: p.intern(f), kernel };
    let uv_run = at(&mut p, Frame::native("uv_run", Some("/usr/bin/node")), 0x1100, false);
    let hog = at(&mut p, Frame::js("hogCPU", Some(SERVICE_JS), Some(25), Some(16)), 0x7f00_0000_1000, false);
    let hog_route = at(&mut p, Frame::js("/hog", Some(SERVICE_JS), Some(47), Some(10)), 0x7f00_0000_2000, false);
    let wait_route = at(&mut p, Frame::js("/wait", Some(SERVICE_JS), Some(54), Some(11)), 0x7f00_0000_3000, false);
    let alloc = at(&mut p, Frame::js("allocateRows", Some(SERVICE_JS), Some(32), Some(22)), 0x7f00_0000_4000, false);
    let gc = at(&mut p, Frame::native("v8::internal::Heap::CollectGarbage", Some("/usr/bin/node")), 0x1800, false);
    let epoll = at(&mut p, Frame::kernel("do_epoll_wait"), 0xffff_ffff_8100_0000, true);
    let schedule = at(&mut p, Frame::kernel("schedule"), 0xffff_ffff_8100_1000, true);
    let route = |r: &str| vec![("http.route".to_string(), r.to_string())];
    let times = |ts: &[f64], weight: u64| ts.iter().map(|&t| Observation { time_ns: ms(t), weight }).collect::<Vec<_>>();
    let entry = |p: &mut Profile, kind, stack: Vec<StackFrame>, ids: Option<([u8; 16], [u8; 8])>, r: &str, ts: &[f64], weight: u64| {
        let times = times(ts, weight);
        p.push_entry(Entry {
            kind,
            tid: MAIN_TID,
            trace_id: ids.map(|i| i.0),
            span_id: ids.map(|i| i.1),
            attrs: if r.is_empty() { vec![] } else { route(r) },
            count: times.len() as u64,
            weight: weight * times.len() as u64,
            times,
            ..Entry::test(stack, None, &[], 0)
        });
    };
    use SampleKind::*;
    entry(&mut p, Cpu, vec![wait_route, uv_run], Some(WAIT), "/wait", &[102.0, 185.0], PERIOD_NS);
    entry(&mut p, Cpu, vec![hog, hog_route, uv_run], Some(HOG), "/hog", &[112.0, 122.0, 132.0, 142.0], PERIOD_NS);
    entry(&mut p, Preempted, vec![schedule, hog, hog_route, uv_run], Some(HOG), "/hog", &[144.0], ms(5.0));
    entry(&mut p, Cpu, vec![gc, uv_run], None, "", &[160.0], PERIOD_NS);
    entry(&mut p, Blocked, vec![epoll, uv_run], None, "", &[150.0], ms(30.0));
    entry(&mut p, Cpu, vec![alloc, uv_run], Some(ALLOC), "/alloc", &[205.0, 215.0], PERIOD_NS);
    entry(&mut p, Alloc, vec![alloc, uv_run], Some(ALLOC), "/alloc", &[206.0, 214.0, 220.0], 600_000);
    p
}

fn resource() -> Resource {
    let kv = |k: &str, v: CtxValue| CtxKeyValue { key: k.into(), value: Some(v) };
    let int = |v: i64| CtxValue { value: Some(thread_ctx_discovery::process_context_proto::any_value::Value::IntValue(v)) };
    Resource {
        attributes: vec![
            kv("service.name", string_value("shop")),
            kv("service.instance.id", string_value(INSTANCE)),
            kv("process.pid", int(PID as i64)),
            kv("process.executable.name", string_value("node")),
            kv("host.name", string_value("node-1")),
        ],
        ..Default::default()
    }
}

/// The spans the service's SDK exported for the same requests: server spans with their route.
fn spans() -> TracesData {
    let kv = |k: &str, v: any_value::Value| KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() };
    let span = |ids: ([u8; 16], [u8; 8]), route: &str, start: f64, end: f64| OtlpSpan {
        trace_id: ids.0.to_vec(),
        span_id: ids.1.to_vec(),
        name: format!("GET {route}"),
        kind: SpanKind::Server as i32,
        start_time_unix_nano: T0_UNIX_NS + ms(start),
        end_time_unix_nano: T0_UNIX_NS + ms(end),
        attributes: vec![
            kv("http.request.method", any_value::Value::StringValue("GET".into())),
            kv("http.route", any_value::Value::StringValue(route.into())),
        ],
        ..Default::default()
    };
    let resource = OtlpResource {
        attributes: vec![
            kv("service.name", any_value::Value::StringValue("shop".into())),
            kv("service.instance.id", any_value::Value::StringValue(INSTANCE.into())),
            kv("process.pid", any_value::Value::IntValue(PID as i64)),
            kv("host.name", any_value::Value::StringValue("node-1".into())),
        ],
        ..Default::default()
    };
    TracesData {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                spans: vec![span(WAIT, "/wait", 100.0, 190.0), span(HOG, "/hog", 110.0, 150.0), span(ALLOC, "/alloc", 200.0, 240.0)],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[test]
fn the_agents_encoding_of_a_known_window_is_the_golden_file() {
    let (p, r) = (profile(), resource());
    let request =
        export_request(&[ProcessWindow { resource: &r, profile: &p, start_unix_ns: T0_UNIX_NS, duration_ns: 1_000_000_000, throttling: None }]);
    check_golden("profiles.pb", &framed(&[request.encode_to_vec()]));
}

#[test]
fn the_workloads_spans_are_the_golden_file() {
    check_golden("spans.pb", &framed(&[spans().encode_to_vec()]));
}

/// What the connector wrote (its golden file) as `report --traces` reads it.
#[test]
fn the_connectors_enriched_spans_read_back_with_the_contracts_fields() {
    let (spans, tail) = read_traces_file(&golden("enriched.pb")).unwrap();
    assert_eq!(tail, 0);
    let by_route = |r: &str| spans.iter().find(|s| s.route.as_deref() == Some(r)).unwrap_or_else(|| panic!("no {r} span in {spans:?}"));
    let joined = |r: &str| by_route(r).joined.clone().unwrap_or_else(|| panic!("{r} was not enriched"));
    let hog = joined("/hog");
    assert_eq!((hog.cpu_span_ms, hog.cpu_trace_ms, hog.samples), (Some(40.0), Some(40.0), Some(4)), "/hog: 4 samples of 10 ms in its span");
    assert!(hog.top_frames[0].starts_with("hogCPU (service.js:25)"), "{:?}", hog.top_frames);
    let wait = joined("/wait");
    assert_eq!(
        (wait.cpu_span_ms, wait.cpu_other_traces_ms, wait.cpu_no_span_ms),
        (Some(20.0), Some(40.0), Some(10.0)),
        "/wait: its own 2 samples, /hog's 4, GC's 1"
    );
    assert_eq!(wait.off_cpu_no_span_ms, Some(30.0), "/wait: the loop slept 30 ms in epoll_wait");
    assert!(wait.held_by[0].starts_with(&format!("/hog {}", hex(&HOG.0))), "{:?}", wait.held_by);
    assert!(wait.held_by[0].ends_with("hogCPU (service.js:25)"), "{:?}", wait.held_by);
    let alloc = joined("/alloc");
    assert_eq!(alloc.alloc_bytes, Some(1_800_000));
    assert!(alloc.top_alloc_frames[0].starts_with("allocateRows (service.js:32)"), "{:?}", alloc.top_alloc_frames);
    assert_eq!(hog.alloc_bytes, Some(0), "allocation profiles cover /hog and hold none of its trace: zero, which the samples support");
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
