//! The OTLP exporter against a real OpenTelemetry Collector (built from Go modules by
//! scripts/build-collector.sh): a hand-built request arrives intact over gRPC and over HTTP,
//! with and without gzip, as the Collector's file exporter writes it; an endpoint that does not
//! serve profiles is reported as a permanent error.

use thread_ctx_test_support::collector as collector_common;
use thread_ctx_test_support::otlp_request as otlp_common;

use std::time::Duration;

use collector_common::{Collector, Received};
use otlp_common::{config, example_request, expected_samples, tag_of};
use thread_ctx_otlp::profiles::KeyValueAndUnit;
use thread_ctx_otlp::Exporter;

const DELIVERY: Duration = Duration::from_secs(60);

/// Sends one example request and checks what the Collector wrote, field by field and as a whole.
fn delivers_intact(protocol: &str, compression: &str) {
    let collector = Collector::running();
    let endpoint = if protocol == "grpc" { collector.grpc_endpoint() } else { collector.http_endpoint() };
    let exporter = Exporter::start(config(&endpoint, protocol, compression)).unwrap();
    let tag = format!("{protocol}-{compression}");
    let request = example_request(&tag);
    exporter.export(request.clone());
    assert!(exporter.flush(DELIVERY), "not delivered within {DELIVERY:?}: {:?}", exporter.stats());
    let stats = exporter.shutdown(Duration::from_secs(5));
    assert_eq!((stats.sent.requests, stats.sent.samples, stats.retries), (1, 3, 0), "{stats:?}");
    assert_eq!(stats.last_error, None);

    let received = collector.wait_for(DELIVERY, "the request", |r: &Received| !r.messages.is_empty());
    let samples = received.samples();
    assert_eq!(samples, expected_samples(&tag));
    assert!(samples.iter().all(|s| tag_of(s) == tag));
    // Beyond what the samples resolve to, the tables arrive as sent (the Collector moves resource
    // attribute strings into the string table, so that one grows).
    let (sent, got) = (request.dictionary.unwrap(), received.messages[0].dictionary.clone().unwrap());
    assert_eq!(got.string_table[..sent.string_table.len()], sent.string_table[..]);
    assert_eq!(got.mapping_table, sent.mapping_table);
    assert_eq!(got.location_table, sent.location_table);
    assert_eq!(got.function_table, sent.function_table);
    assert_eq!(got.link_table, sent.link_table);
    // (Go's pdata writes an absent value as an empty one.)
    let absent_as_empty = |t: Vec<KeyValueAndUnit>| -> Vec<KeyValueAndUnit> {
        t.into_iter().map(|kv| KeyValueAndUnit { value: Some(kv.value.unwrap_or_default()), ..kv }).collect()
    };
    assert_eq!(absent_as_empty(got.attribute_table), absent_as_empty(sent.attribute_table));
    assert_eq!(got.stack_table, sent.stack_table);
}

#[test]
fn grpc_request_arrives_intact() {
    delivers_intact("grpc", "none");
}

#[test]
fn grpc_gzip_request_arrives_intact() {
    delivers_intact("grpc", "gzip");
}

#[test]
fn http_request_arrives_intact() {
    delivers_intact("http/protobuf", "none");
}

#[test]
fn http_gzip_request_arrives_intact() {
    delivers_intact("http/protobuf", "gzip");
}

/// A Collector with only a traces pipeline: the profiles request is refused, not retried, and
/// the error says what the endpoint lacks.
#[test]
fn an_endpoint_without_a_profiles_pipeline_is_a_permanent_error() {
    let traces_only = r#"
receivers:
  otlp:
    protocols:
      grpc: { endpoint: "${env:OTELCOL_GRPC_ENDPOINT}" }
      http: { endpoint: "${env:OTELCOL_HTTP_ENDPOINT}" }
exporters:
  file: { path: "${env:OTELCOL_OUTPUT}" }
service:
  telemetry: { metrics: { level: none } }
  pipelines:
    traces: { receivers: [otlp], exporters: [file] }
"#;
    let mut collector = Collector::with_config(traces_only);
    collector.start();
    for (protocol, endpoint) in [("grpc", collector.grpc_endpoint()), ("http/protobuf", collector.http_endpoint())] {
        let exporter = Exporter::start(config(&endpoint, protocol, "none")).unwrap();
        exporter.export(example_request(protocol));
        assert!(exporter.flush(DELIVERY), "{protocol}: not settled: {:?}", exporter.stats());
        let stats = exporter.shutdown(Duration::from_secs(1));
        assert_eq!((stats.failed.requests, stats.sent.requests, stats.retries), (1, 0, 0), "{protocol}: {stats:?}");
        let error = stats.last_error.unwrap();
        assert!(
            error.starts_with("refused, not retried: the endpoint does not accept OTLP profiles") && error.contains("service.profilesSupport"),
            "{protocol}: {error}"
        );
    }
}
