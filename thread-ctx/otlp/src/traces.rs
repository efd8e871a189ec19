//! Spans the Collector's `span_profiles` connector enriched, read back from its file exporter's
//! `proto` output (size-prefixed OTLP `TracesData`) for `thread-ctx report --traces`. The field
//! names are the contract of docs/spanprofiles.md, which the connector (Go) writes; a field of
//! the wrong type is read as absent, never trusted.

use crate::framed::{read_framed, Format};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span as OtlpSpan, TracesData};
use std::collections::BTreeSet;
use std::path::Path;
use thread_ctx_discovery::ids::hex;
use thread_ctx_output::file_error::Result;
use thread_ctx_output::slow_requests::{Joined, Span};

/// The connector's attributes and event (docs/spanprofiles.md, "The fields").
pub const CPU_SPAN_MS: &str = "thread_ctx.cpu.span_ms";
pub const CPU_TRACE_MS: &str = "thread_ctx.cpu.trace_ms";
pub const CPU_OTHER_TRACES_MS: &str = "thread_ctx.cpu.other_traces_ms";
pub const CPU_NO_SPAN_MS: &str = "thread_ctx.cpu.no_span_ms";
pub const OFF_CPU_TRACE_MS: &str = "thread_ctx.off_cpu.trace_ms";
pub const OFF_CPU_OTHER_TRACES_MS: &str = "thread_ctx.off_cpu.other_traces_ms";
pub const OFF_CPU_NO_SPAN_MS: &str = "thread_ctx.off_cpu.no_span_ms";
pub const OFF_CPU_RUNNABLE_MS: &str = "thread_ctx.off_cpu.runnable_ms";
pub const ALLOC_BYTES: &str = "thread_ctx.alloc_bytes";
pub const SAMPLES: &str = "thread_ctx.samples";
/// The route the connector gave an entry span without `http.route`, and where it came from.
pub const ROUTE: &str = "thread_ctx.route";
pub const ROUTE_SOURCE: &str = "thread_ctx.route.source";
pub const PROFILE_EVENT: &str = "thread_ctx.profile";
pub const TOP_FRAMES: &str = "top_frames";
pub const HELD_BY: &str = "held_by";
pub const HELD_BY_OTHERS: &str = "held_by_others";
pub const HELD_BY_OTHERS_MS: &str = "held_by_others_ms";
pub const HELD_BY_ROUTES: &str = "held_by_routes";
pub const TOP_ALLOC_FRAMES: &str = "top_alloc_frames";
/// The event with a trace's path across services, on its first request, and its attributes.
pub const PATH_EVENT: &str = "thread_ctx.path";
pub const PATH_HOPS: &str = "hops";
pub const PATH_OTHERS_MS: &str = "hops_others_ms";

/// Which spans a report reads (`report --traces` with `--pid`, `--service`, `--trace`, `--span`,
/// `--attr`); every given part must match. Empty: all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpanSelection {
    /// The resource's `process.pid` is one of these.
    pub pids: Vec<u32>,
    /// The resource's `service.name`.
    pub service: Option<String>,
    pub trace_id: Option<[u8; 16]>,
    pub span_id: Option<[u8; 8]>,
    /// Each pair is among the span's attributes (else its resource's), values as text.
    pub attrs: Vec<(String, String)>,
}

/// What a pass over a traces file met.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TracesScan {
    pub messages: usize,
    /// Spans in the file, and those the selection kept (given to the visitor).
    pub spans: usize,
    pub selected: usize,
    /// Bytes of whole messages read: a second pass reads exactly these, however much the
    /// Collector has written since.
    pub whole_bytes: u64,
    /// Bytes at the end that are not a whole message yet (the Collector may still be writing).
    pub incomplete_tail: u64,
    /// The services and processes (`process.pid`) the file holds, for a selection that matches
    /// none of them to say what it could have chosen; at most [`HELD_SHOWN`] of each.
    pub services: BTreeSet<String>,
    pub pids: BTreeSet<i64>,
}

/// How many services and pids a scan keeps to name (a file of many says "…").
pub const HELD_SHOWN: usize = 32;

/// Reads a file exporter's traces output one message at a time, so that memory holds one
/// message however large the file (issue: 805 MB of RSS for a 139 MB file when it was read
/// whole), and gives each selected span to `visit`. Reads at most `limit` bytes (a second pass
/// gives the first pass's `whole_bytes`). A file that is not the `proto` format of traces, or
/// holds bytes but no whole message, is an error naming what it looks like.
pub fn scan_traces_file(path: &Path, selection: &SpanSelection, limit: Option<u64>, mut visit: impl FnMut(Span)) -> Result<TracesScan> {
    let mut scan = TracesScan::default();
    let read = read_framed(path, limit, &FORMAT, |_, data: TracesData| {
        for rs in &data.resource_spans {
            let attrs = rs.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
            let service = str_attr(attrs, "service.name").unwrap_or(UNKNOWN_SERVICE);
            let pid = int_attr(attrs, "process.pid");
            if scan.services.len() < HELD_SHOWN {
                scan.services.insert(service.to_string());
            }
            if let Some(pid) = pid.filter(|_| scan.pids.len() < HELD_SHOWN) {
                scan.pids.insert(pid);
            }
            let resource_kept = selection.service.as_deref().is_none_or(|s| s == service)
                && (selection.pids.is_empty() || pid.is_some_and(|p| selection.pids.iter().any(|&q| i64::from(q) == p)));
            for s in rs.scope_spans.iter().flat_map(|ss| &ss.spans) {
                scan.spans += 1;
                if resource_kept && selects(selection, s, attrs) {
                    scan.selected += 1;
                    visit(span_of(s, service));
                }
            }
        }
        Ok(())
    })?;
    scan.messages = read.messages;
    scan.whole_bytes = read.whole_bytes;
    scan.incomplete_tail = read.incomplete_tail;
    Ok(scan)
}

const FORMAT: Format = Format {
    what: "TracesData",
    not_it: "not the Collector file exporter's proto format of traces (size-prefixed OTLP TracesData)",
    expected: "expected the Collector file exporter's proto format of traces (size-prefixed OTLP TracesData, `format: proto`)",
};
const UNKNOWN_SERVICE: &str = "unknown_service";

fn selects(selection: &SpanSelection, s: &OtlpSpan, resource: &[KeyValue]) -> bool {
    selection.trace_id.is_none_or(|t| s.trace_id == t)
        && selection.span_id.is_none_or(|id| s.span_id == id)
        && selection.attrs.iter().all(|(k, v)| {
            let of = |attrs: &[KeyValue]| attrs.iter().find(|kv| kv.key == *k).and_then(|kv| kv.value.as_ref()).map(value_text);
            of(&s.attributes).or_else(|| of(resource)).is_some_and(|text| text == *v)
        })
}

/// An attribute's value as `--attr` compares it.
fn value_text(v: &AnyValue) -> String {
    match &v.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        _ => String::new(),
    }
}

/// The spans of a file exporter's traces output, and the bytes at its end that are not a whole
/// message yet. Holds every span: for tests and small files; a report streams
/// ([`scan_traces_file`]).
pub fn read_traces_file(path: &Path) -> Result<(Vec<Span>, usize)> {
    let mut spans = Vec::new();
    let scan = scan_traces_file(path, &SpanSelection::default(), None, |s| spans.push(s))?;
    Ok((spans, scan.incomplete_tail as usize))
}

/// Every span of a message, with its resource's service name.
pub fn spans_of(data: &TracesData) -> Vec<Span> {
    let mut out = Vec::new();
    for rs in &data.resource_spans {
        let service = rs.resource.as_ref().and_then(|r| str_attr(&r.attributes, "service.name")).unwrap_or(UNKNOWN_SERVICE);
        out.extend(rs.scope_spans.iter().flat_map(|ss| &ss.spans).map(|s| span_of(s, service)));
    }
    out
}

/// One span as the report reads it.
fn span_of(s: &OtlpSpan, service: &str) -> Span {
    // Enriched: the connector's event (the figures on it are those the samples support).
    let event = s.events.iter().find(|e| e.name == PROFILE_EVENT);
    let path = s.events.iter().find(|e| e.name == PATH_EVENT);
    let enriched = event.is_some() || s.attributes.iter().any(|kv| kv.key == SAMPLES);
    let joined = enriched.then(|| {
        let list = |k: &str| event.map(|e| strings(&e.attributes, k)).unwrap_or_default();
        Joined {
            cpu_span_ms: f64_attr(&s.attributes, CPU_SPAN_MS),
            cpu_trace_ms: f64_attr(&s.attributes, CPU_TRACE_MS),
            cpu_other_traces_ms: f64_attr(&s.attributes, CPU_OTHER_TRACES_MS),
            cpu_no_span_ms: f64_attr(&s.attributes, CPU_NO_SPAN_MS),
            off_cpu_trace_ms: f64_attr(&s.attributes, OFF_CPU_TRACE_MS),
            off_cpu_other_traces_ms: f64_attr(&s.attributes, OFF_CPU_OTHER_TRACES_MS),
            off_cpu_no_span_ms: f64_attr(&s.attributes, OFF_CPU_NO_SPAN_MS),
            off_cpu_runnable_ms: f64_attr(&s.attributes, OFF_CPU_RUNNABLE_MS),
            alloc_bytes: i64_attr(&s.attributes, ALLOC_BYTES),
            samples: i64_attr(&s.attributes, SAMPLES),
            top_frames: list(TOP_FRAMES),
            held_by: list(HELD_BY),
            held_by_others: event.and_then(|e| i64_attr(&e.attributes, HELD_BY_OTHERS)).unwrap_or(0),
            held_by_others_ms: event.and_then(|e| f64_attr(&e.attributes, HELD_BY_OTHERS_MS)).unwrap_or(0.0),
            held_by_routes: list(HELD_BY_ROUTES),
            top_alloc_frames: list(TOP_ALLOC_FRAMES),
            path: path.map(|e| strings(&e.attributes, PATH_HOPS)).unwrap_or_default(),
            path_others_ms: path.and_then(|e| f64_attr(&e.attributes, PATH_OTHERS_MS)).unwrap_or(0.0),
        }
    });
    let own_route = str_attr(&s.attributes, "http.route");
    Span {
        trace_id: hex(&s.trace_id),
        span_id: hex(&s.span_id),
        parent_span_id: hex(&s.parent_span_id),
        service: service.to_string(),
        name: s.name.clone(),
        route: own_route.or_else(|| str_attr(&s.attributes, ROUTE)).map(str::to_string),
        route_source: if own_route.is_some() { None } else { str_attr(&s.attributes, ROUTE_SOURCE).map(str::to_string) },
        entry: s.kind == SpanKind::Server as i32 || s.parent_span_id.is_empty(),
        start_unix_ns: s.start_time_unix_nano,
        duration_ns: s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano),
        joined,
    }
}

fn value<'a>(attrs: &'a [KeyValue], k: &str) -> Option<&'a any_value::Value> {
    attrs.iter().find(|kv| kv.key == k).and_then(|kv| kv.value.as_ref()).and_then(|v| v.value.as_ref())
}

fn str_attr<'a>(attrs: &'a [KeyValue], k: &str) -> Option<&'a str> {
    match value(attrs, k)? {
        any_value::Value::StringValue(s) => Some(s),
        _ => None,
    }
}

fn f64_attr(attrs: &[KeyValue], k: &str) -> Option<f64> {
    match value(attrs, k)? {
        any_value::Value::DoubleValue(v) if v.is_finite() => Some(*v),
        any_value::Value::IntValue(v) => Some(*v as f64),
        _ => None,
    }
}

fn int_attr(attrs: &[KeyValue], k: &str) -> Option<i64> {
    match value(attrs, k)? {
        any_value::Value::IntValue(v) => Some(*v),
        any_value::Value::StringValue(s) => s.parse().ok(),
        _ => None,
    }
}

fn i64_attr(attrs: &[KeyValue], k: &str) -> Option<i64> {
    match value(attrs, k)? {
        any_value::Value::IntValue(v) => Some(*v),
        _ => None,
    }
}

fn strings(attrs: &[KeyValue], k: &str) -> Vec<String> {
    match value(attrs, k) {
        Some(any_value::Value::ArrayValue(a)) => a
            .values
            .iter()
            .filter_map(|v| match &v.value {
                Some(any_value::Value::StringValue(s)) => Some(s.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue as Array};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{span::Event, ResourceSpans, ScopeSpans, Span as OtlpSpan};

    fn kv(k: &str, v: any_value::Value) -> KeyValue {
        KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
    }

    /// A request's traces as the connector leaves them: an enriched server span (with a wrongly
    /// typed field a reader must not trust) and a child span it could not enrich.
    pub(crate) fn traces() -> TracesData {
        use any_value::Value::*;
        let strs = |xs: &[&str]| ArrayValue(Array { values: xs.iter().map(|s| AnyValue { value: Some(StringValue(s.to_string())) }).collect() });
        let server = OtlpSpan {
            trace_id: vec![0xab; 16],
            span_id: vec![0xcd; 8],
            name: "GET /wait".into(),
            kind: SpanKind::Server as i32,
            start_time_unix_nano: 1_000_000_000,
            end_time_unix_nano: 1_081_200_000,
            attributes: vec![
                kv("http.route", StringValue("/wait".into())),
                kv(CPU_SPAN_MS, DoubleValue(0.0)),
                kv(CPU_TRACE_MS, DoubleValue(0.0)),
                kv(CPU_OTHER_TRACES_MS, DoubleValue(40.4)),
                kv(CPU_NO_SPAN_MS, StringValue("lies".into())),
                kv(OFF_CPU_OTHER_TRACES_MS, DoubleValue(43.5)),
                kv(OFF_CPU_NO_SPAN_MS, DoubleValue(11.7)),
                kv(OFF_CPU_RUNNABLE_MS, DoubleValue(2.5)),
                kv(SAMPLES, IntValue(4)),
            ],
            events: vec![
                Event {
                    name: PROFILE_EVENT.into(),
                    attributes: vec![
                        kv(HELD_BY, strs(&["/hog 8b2a85f21cbc6d7f613e89ed9f79b9c5 57.7ms: hogCPU (service.js:24)"])),
                        kv(HELD_BY_OTHERS, IntValue(2)),
                        kv(HELD_BY_OTHERS_MS, DoubleValue(26.2)),
                        kv(HELD_BY_ROUTES, strs(&["/hog 83.9ms in 3 requests: hogCPU (service.js:24)"])),
                        kv("thread.id", IntValue(7)),
                    ],
                    ..Default::default()
                },
                Event {
                    name: PATH_EVENT.into(),
                    attributes: vec![
                        kv(PATH_HOPS, strs(&["waiting on inventory /stock/:sku 60.0ms: cpu 20.0ms in recomputeStockLevels (inventory.js:13) 100%"])),
                        kv(PATH_OTHERS_MS, DoubleValue(1.5)),
                    ],
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let child =
            OtlpSpan { span_id: vec![0xee; 8], parent_span_id: vec![0xcd; 8], name: "db".into(), kind: SpanKind::Internal as i32, ..server.clone() };
        let child = OtlpSpan { attributes: vec![], events: vec![], ..child };
        TracesData {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource { attributes: vec![kv("service.name", StringValue("shop".into()))], ..Default::default() }),
                scope_spans: vec![ScopeSpans { spans: vec![server, child], ..Default::default() }],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn enriched_spans_read_back_with_every_field_of_the_contract() {
        let dir = std::env::temp_dir().join(format!("traces-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("traces.pb");
        let mut bytes = crate::received::tests::framed(&[traces()]);
        bytes.extend([0, 0, 0, 9, 1]); // a message still being written
        std::fs::write(&path, &bytes).unwrap();
        let (spans, tail) = read_traces_file(&path).unwrap();
        assert_eq!(tail, 5);
        assert_eq!(spans.len(), 2);
        let s = &spans[0];
        assert_eq!(
            (s.trace_id.as_str(), s.service.as_str(), s.route.as_deref(), s.entry),
            ("abababababababababababababababab", "shop", Some("/wait"), true)
        );
        assert_eq!(s.duration_ns, 81_200_000);
        let j = s.joined.as_ref().unwrap();
        assert_eq!((j.cpu_other_traces_ms, j.off_cpu_other_traces_ms, j.samples), (Some(40.4), Some(43.5), Some(4)));
        assert_eq!(j.cpu_no_span_ms, None, "a string where a double belongs is not trusted");
        assert_eq!((j.off_cpu_trace_ms, j.alloc_bytes), (None, None), "absent: the agent did not measure them");
        assert_eq!(j.held_by, ["/hog 8b2a85f21cbc6d7f613e89ed9f79b9c5 57.7ms: hogCPU (service.js:24)"]);
        assert_eq!((j.held_by_others, j.held_by_others_ms, j.off_cpu_runnable_ms), (2, 26.2, Some(2.5)));
        assert_eq!(j.held_by_routes, ["/hog 83.9ms in 3 requests: hogCPU (service.js:24)"]);
        assert_eq!(j.path, ["waiting on inventory /stock/:sku 60.0ms: cpu 20.0ms in recomputeStockLevels (inventory.js:13) 100%"]);
        assert_eq!(j.path_others_ms, 1.5);
        assert!(!spans[1].entry && spans[1].joined.is_none());
        assert_eq!((s.parent_span_id.as_str(), spans[1].parent_span_id.as_str()), ("", "cdcdcdcdcdcdcdcd"));

        std::fs::write(&path, b"{\"resourceSpans\":[]}").unwrap();
        assert!(read_traces_file(&path).unwrap_err().to_string().contains("json format"));
        std::fs::write(&path, [0, 0, 0, 3, 0xff, 0xff, 0xff]).unwrap();
        let e = read_traces_file(&path).unwrap_err().to_string();
        assert!(e.contains("not an OTLP TracesData"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Bytes that hold no whole message are not a file the Collector is still writing: its
    /// first message would be whole by now.
    #[test]
    fn a_file_of_no_whole_message_is_refused_and_an_empty_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("traces.pb");
        for (bytes, said) in [
            (vec![1, 2, 3], "holds 3 bytes, less than one message's 4-byte size"),
            (vec![0, 1, 0, 0, 7, 7], "holds 6 bytes, and its first message claims 65536 after its 4-byte size"),
            (vec![0x1f, 0x8b, 8, 0, 0], "is gzip data"),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            let e = read_traces_file(&path).unwrap_err().to_string();
            assert!(e.contains(said) && e.contains("expected the Collector file exporter's proto format of traces"), "{e}");
        }
        let mut huge = vec![0x20, 0, 0, 0];
        huge.resize(1 << 20, 0);
        std::fs::write(&path, &huge).unwrap();
        assert!(read_traces_file(&path).is_err());
        std::fs::write(&path, []).unwrap();
        assert_eq!(read_traces_file(&path).unwrap(), (vec![], 0));
    }

    #[test]
    fn a_selection_keeps_the_spans_of_its_resource_ids_and_attributes() {
        use any_value::Value::*;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("traces.pb");
        let mut billing = traces();
        let resource = billing.resource_spans[0].resource.as_mut().unwrap();
        resource.attributes = vec![kv("service.name", StringValue("billing".into())), kv("process.pid", IntValue(4343))];
        std::fs::write(&path, crate::received::tests::framed(&[traces(), billing])).unwrap();
        let kept = |selection: SpanSelection| {
            let mut names = Vec::new();
            let scan = scan_traces_file(&path, &selection, None, |s| names.push(format!("{}/{}", s.service, s.name))).unwrap();
            assert_eq!((scan.spans, scan.selected, scan.messages), (4, names.len(), 2));
            assert_eq!(scan.services.iter().collect::<Vec<_>>(), ["billing", "shop"]);
            assert_eq!(scan.pids.iter().collect::<Vec<_>>(), [&4343]);
            names
        };
        assert_eq!(kept(SpanSelection::default()).len(), 4);
        assert_eq!(kept(SpanSelection { service: Some("billing".into()), ..Default::default() }), ["billing/GET /wait", "billing/db"]);
        assert_eq!(kept(SpanSelection { pids: vec![4343], ..Default::default() }), ["billing/GET /wait", "billing/db"]);
        assert_eq!(kept(SpanSelection { pids: vec![1], ..Default::default() }), Vec::<String>::new());
        assert_eq!(kept(SpanSelection { span_id: Some([0xee; 8]), ..Default::default() }), ["shop/db", "billing/db"]);
        let wait = SpanSelection { attrs: vec![("http.route".into(), "/wait".into())], trace_id: Some([0xab; 16]), ..Default::default() };
        assert_eq!(kept(wait), ["shop/GET /wait", "billing/GET /wait"]);
        let of_resource = SpanSelection { attrs: vec![("process.pid".into(), "4343".into())], ..Default::default() };
        assert_eq!(kept(of_resource), ["billing/GET /wait", "billing/db"]);
        // A second pass reads what the first read, however much was written since.
        let first = scan_traces_file(&path, &SpanSelection::default(), None, |_| ()).unwrap();
        let mut grown = std::fs::read(&path).unwrap();
        grown.extend(crate::received::tests::framed(&[traces()]));
        std::fs::write(&path, grown).unwrap();
        let again = scan_traces_file(&path, &SpanSelection::default(), Some(first.whole_bytes), |_| ()).unwrap();
        assert_eq!((again.spans, again.whole_bytes, again.incomplete_tail), (4, first.whole_bytes, 0));
    }
}
