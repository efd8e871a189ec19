//! For the exporter tests: a small hand-built OTLP profiles request that uses every table of
//! the dictionary (a mapping with a build id, JS and native frames, links, sample attributes),
//! what it must resolve to, and exporter configurations that read no environment variables.

use std::collections::BTreeMap;
use std::time::Duration;

use thread_ctx_otlp::common::{any_value, AnyValue, InstrumentationScope, KeyValue};
use thread_ctx_otlp::profiles::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary, ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
};
use thread_ctx_otlp::resource::Resource;
use thread_ctx_otlp::{ExportProfilesServiceRequest, ExporterConfig, Overrides, RetryPolicy};

use crate::collector::{ResolvedFrame, ResolvedMapping, ResolvedSample};

pub const TRACE_ID: [u8; 16] = [0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36];
pub const SPAN_1: [u8; 8] = [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7];
pub const SPAN_2: [u8; 8] = [0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8];
pub const BUILD_ID: &str = "c0ffee00deadbeef0123456789abcdef01234567";
const T0: u64 = 1_764_000_000_000_000_000;

fn text(s: &str) -> Option<AnyValue> {
    Some(AnyValue { value: Some(any_value::Value::StringValue(s.into())) })
}

fn int(i: i64) -> Option<AnyValue> {
    Some(AnyValue { value: Some(any_value::Value::IntValue(i)) })
}

/// Three samples of one CPU profile, told apart from other requests by the resource attribute
/// `test.request` = `tag`.
pub fn example_request(tag: &str) -> ExportProfilesServiceRequest {
    let strings = [
        "",
        "cpu",
        "nanoseconds",
        "samples",
        "count",
        "/usr/bin/node",
        "burnCpu",
        "file:///app/server.js",
        "uv_run",
        "process.executable.build_id.gnu",
        "http.route",
        "thread.id",
        "thread.name",
        "profile.frame.type",
        "v8js",
        "native",
    ];
    let s = |x: &str| strings.iter().position(|y| *y == x).unwrap() as i32;
    let kv = |key: &str, value: Option<AnyValue>| KeyValueAndUnit { key_strindex: s(key), value, unit_strindex: 0 };
    let dictionary = ProfilesDictionary {
        mapping_table: vec![
            Mapping::default(),
            Mapping {
                memory_start: 0x40_0000,
                memory_limit: 0x520_0000,
                file_offset: 0,
                filename_strindex: s("/usr/bin/node"),
                attribute_indices: vec![1],
            },
        ],
        location_table: vec![
            Location::default(),
            Location { mapping_index: 0, address: 0, lines: vec![Line { function_index: 1, line: 12, column: 5 }], attribute_indices: vec![6] },
            Location {
                mapping_index: 1,
                address: 0x4a_1b2c,
                lines: vec![Line { function_index: 2, line: 0, column: 0 }],
                attribute_indices: vec![7],
            },
        ],
        function_table: vec![
            Function::default(),
            Function {
                name_strindex: s("burnCpu"),
                system_name_strindex: s("burnCpu"),
                filename_strindex: s("file:///app/server.js"),
                start_line: 10,
            },
            Function { name_strindex: s("uv_run"), system_name_strindex: s("uv_run"), filename_strindex: 0, start_line: 0 },
        ],
        link_table: vec![
            Link::default(),
            Link { trace_id: TRACE_ID.to_vec(), span_id: SPAN_1.to_vec() },
            Link { trace_id: TRACE_ID.to_vec(), span_id: SPAN_2.to_vec() },
        ],
        string_table: strings.iter().map(|s| s.to_string()).collect(),
        attribute_table: vec![
            KeyValueAndUnit::default(),
            kv("process.executable.build_id.gnu", text(BUILD_ID)),
            kv("http.route", text("/api/search")),
            kv("http.route", text("/api/report")),
            kv("thread.id", int(4242)),
            kv("thread.name", text("main")),
            kv("profile.frame.type", text("v8js")),
            kv("profile.frame.type", text("native")),
        ],
        stack_table: vec![Stack::default(), Stack { location_indices: vec![1, 2] }, Stack { location_indices: vec![2] }],
    };
    let samples = vec![
        Sample {
            stack_index: 1,
            attribute_indices: vec![2, 4, 5],
            link_index: 1,
            values: vec![3],
            timestamps_unix_nano: vec![T0 + 1, T0 + 2, T0 + 3],
        },
        Sample { stack_index: 1, attribute_indices: vec![3, 4, 5], link_index: 2, values: vec![1], timestamps_unix_nano: vec![T0 + 4] },
        Sample { stack_index: 2, attribute_indices: vec![4, 5], link_index: 0, values: vec![2], timestamps_unix_nano: vec![T0 + 5, T0 + 6] },
    ];
    let profile = Profile {
        sample_type: Some(ValueType { type_strindex: s("samples"), unit_strindex: s("count") }),
        samples,
        time_unix_nano: T0,
        duration_nano: 10_000_000_000,
        period_type: Some(ValueType { type_strindex: s("cpu"), unit_strindex: s("nanoseconds") }),
        period: 1_000_000_000 / 29,
        profile_id: vec![7; 16],
        ..Default::default()
    };
    let resource = Resource {
        attributes: vec![
            KeyValue { key: "service.name".into(), value: text("checkout"), key_strindex: 0 },
            KeyValue { key: "process.pid".into(), value: int(4242), key_strindex: 0 },
            KeyValue { key: "test.request".into(), value: text(tag), key_strindex: 0 },
        ],
        ..Default::default()
    };
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(resource),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope { name: "thread-ctx".into(), version: "test".into(), ..Default::default() }),
                profiles: vec![profile],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dictionary),
    }
}

/// What [`example_request`]`(tag)` resolves to, written out by hand.
pub fn expected_samples(tag: &str) -> Vec<ResolvedSample> {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> { pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() };
    let js = ResolvedFrame {
        function: "burnCpu".into(),
        system_name: "burnCpu".into(),
        file: "file:///app/server.js".into(),
        start_line: 10,
        line: 12,
        column: 5,
        address: 0,
        attributes: map(&[("profile.frame.type", "v8js")]),
        mapping: None,
    };
    let native = ResolvedFrame {
        function: "uv_run".into(),
        system_name: "uv_run".into(),
        file: String::new(),
        start_line: 0,
        line: 0,
        column: 0,
        address: 0x4a_1b2c,
        attributes: map(&[("profile.frame.type", "native")]),
        mapping: Some(ResolvedMapping {
            filename: "/usr/bin/node".into(),
            memory_start: 0x40_0000,
            memory_limit: 0x520_0000,
            file_offset: 0,
            attributes: map(&[("process.executable.build_id.gnu", BUILD_ID)]),
        }),
    };
    let sample = |frames: Vec<ResolvedFrame>, link: Option<[u8; 8]>, attrs: &[(&str, &str)], value: i64, ts: &[u64]| ResolvedSample {
        resource: map(&[("service.name", "checkout"), ("process.pid", "4242"), ("test.request", tag)]),
        scope_name: "thread-ctx".into(),
        sample_type: ("samples".into(), "count".into()),
        period: ("cpu".into(), "nanoseconds".into(), 1_000_000_000 / 29),
        profile_time_unix_nano: T0,
        profile_duration_nano: 10_000_000_000,
        profile_attributes: BTreeMap::new(),
        frames,
        link: link.map(|span| (TRACE_ID.to_vec(), span.to_vec())),
        attributes: map(attrs),
        values: vec![value],
        timestamps_unix_nano: ts.iter().map(|t| T0 + t).collect(),
    };
    let thread = [("thread.id", "4242"), ("thread.name", "main")];
    vec![
        sample(vec![js.clone(), native.clone()], Some(SPAN_1), &[&thread[..], &[("http.route", "/api/search")]].concat(), 3, &[1, 2, 3]),
        sample(vec![js, native.clone()], Some(SPAN_2), &[&thread[..], &[("http.route", "/api/report")]].concat(), 1, &[4]),
        sample(vec![native], None, &thread, 2, &[5, 6]),
    ]
}

/// The `test.request` tag of a resolved sample.
pub fn tag_of(sample: &ResolvedSample) -> &str {
    sample.resource.get("test.request").map(String::as_str).unwrap_or("")
}

/// A configuration for `endpoint` over `protocol` from explicit settings only (tests run in
/// parallel: none may depend on or change the process environment).
pub fn config(endpoint: &str, protocol: &str, compression: &str) -> ExporterConfig {
    let overrides =
        Overrides { endpoint: Some(endpoint.into()), protocol: Some(protocol.into()), compression: Some(compression.into()), ..Default::default() };
    ExporterConfig::from_lookup(&overrides, |_| None).unwrap()
}

/// Fast retries, so that fault tests take seconds.
pub fn quick_retries(max_elapsed: Duration) -> RetryPolicy {
    RetryPolicy { initial: Duration::from_millis(100), max: Duration::from_millis(500), max_elapsed }
}
