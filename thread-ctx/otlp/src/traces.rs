//! Spans the Collector's `spanprofiles` connector enriched, read back from its file exporter's
//! `proto` output (size-prefixed OTLP `TracesData`) for `thread-ctx report --traces`. The field
//! names are the contract of docs/spanprofiles.md, which the connector (Go) writes; a field of
//! the wrong type is read as absent, never trusted.

use crate::received::decode_messages;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, TracesData};
use std::path::Path;
use thread_ctx_discovery::ids::hex;
use thread_ctx_output::file_error::{FileError, Result};
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

/// The spans of a file exporter's traces output, and the bytes at its end that are not a whole
/// message yet (the Collector may still be writing).
pub fn read_traces_file(path: &Path) -> Result<(Vec<Span>, usize)> {
    let bytes = std::fs::read(path).map_err(|e| FileError::io("reading", path, e))?;
    if bytes.first() == Some(&b'{') {
        return Err(FileError::Invalid(format!(
            "{}: looks like the file exporter's json format: expected its proto format (`format: proto` in the Collector's file exporter)",
            path.display()
        )));
    }
    let (messages, tail) = decode_messages::<TracesData>(&bytes, "TracesData")
        .map_err(FileError::in_file(path, "not the Collector file exporter's proto format of traces (size-prefixed OTLP TracesData)"))?;
    Ok((messages.iter().flat_map(spans_of).collect(), tail))
}

/// Every span of a message, with its resource's service name.
pub fn spans_of(data: &TracesData) -> Vec<Span> {
    let mut out = Vec::new();
    for rs in &data.resource_spans {
        let service = rs.resource.as_ref().and_then(|r| str_attr(&r.attributes, "service.name")).unwrap_or("unknown_service").to_string();
        for s in rs.scope_spans.iter().flat_map(|ss| &ss.spans) {
            // Enriched: the connector's event (the figures on it are those the samples support).
            let event = s.events.iter().find(|e| e.name == PROFILE_EVENT);
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
                }
            });
            out.push(Span {
                trace_id: hex(&s.trace_id),
                span_id: hex(&s.span_id),
                service: service.clone(),
                name: s.name.clone(),
                route: str_attr(&s.attributes, "http.route").or_else(|| str_attr(&s.attributes, ROUTE)).map(str::to_string),
                route_source: if str_attr(&s.attributes, "http.route").is_some() {
                    None
                } else {
                    str_attr(&s.attributes, ROUTE_SOURCE).map(str::to_string)
                },
                entry: s.kind == SpanKind::Server as i32 || s.parent_span_id.is_empty(),
                start_unix_ns: s.start_time_unix_nano,
                duration_ns: s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano),
                joined,
            });
        }
    }
    out
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
            events: vec![Event {
                name: PROFILE_EVENT.into(),
                attributes: vec![
                    kv(HELD_BY, strs(&["/hog 8b2a85f21cbc6d7f613e89ed9f79b9c5 57.7ms: hogCPU (service.js:24)"])),
                    kv(HELD_BY_OTHERS, IntValue(2)),
                    kv(HELD_BY_OTHERS_MS, DoubleValue(26.2)),
                    kv(HELD_BY_ROUTES, strs(&["/hog 83.9ms in 3 requests: hogCPU (service.js:24)"])),
                    kv("thread.id", IntValue(7)),
                ],
                ..Default::default()
            }],
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
        assert!(!spans[1].entry && spans[1].joined.is_none());

        std::fs::write(&path, b"{\"resourceSpans\":[]}").unwrap();
        assert!(read_traces_file(&path).unwrap_err().to_string().contains("json format"));
        std::fs::write(&path, [0, 0, 0, 3, 0xff, 0xff, 0xff]).unwrap();
        let e = read_traces_file(&path).unwrap_err().to_string();
        assert!(e.contains("not an OTLP TracesData"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
