//! OTLP/HTTP protocol details the real Collector does not exercise, against a scripted local
//! server that records each request and answers with the next canned response: the path built
//! from a base endpoint, headers from the environment, gzip, throttling with `Retry-After`,
//! gateway errors, a permanent refusal with a `google.rpc.Status` body, and partial success.

use thread_ctx_test_support::otlp_request as otlp_common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use otlp_common::{config, example_request, quick_retries};
use prost::Message;
use thread_ctx_otlp::{ExportProfilesServiceRequest, Exporter, ExporterConfig, ExporterStats, Overrides};

const PATIENCE: Duration = Duration::from_secs(60);

/// One request as the server saw it.
struct Seen {
    at: Instant,
    request_line: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

/// Answers the n-th request with `responses[n]` (raw HTTP, one request per connection).
struct ScriptedServer {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptedServer {
    fn start(responses: Vec<Vec<u8>>) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let thread = std::thread::spawn(move || {
            for response in responses {
                let Ok((stream, _)) = listener.accept() else { return };
                let mut reader = BufReader::new(stream);
                let mut request_line = String::new();
                reader.read_line(&mut request_line).unwrap();
                let mut headers = HashMap::new();
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    let Some((k, v)) = line.trim_end().split_once(':') else { break };
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                }
                let size: usize = headers.get("content-length").map_or(0, |v| v.parse().unwrap());
                let mut body = vec![0; size];
                reader.read_exact(&mut body).unwrap();
                let at = Instant::now();
                log.lock().unwrap().push(Seen { at, request_line: request_line.trim_end().into(), headers, body });
                let mut stream = reader.into_inner();
                stream.write_all(&response).unwrap();
            }
        });
        ScriptedServer { port, seen, thread: Some(thread) }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Vec<Seen>> {
        self.seen.lock().unwrap()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut r = format!("HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    let mut r = r.into_bytes();
    r.extend_from_slice(body);
    r
}

fn ok() -> Vec<u8> {
    response("200 OK", &[("content-type", "application/x-protobuf")], &[])
}

/// Exports one request and waits until it is settled.
fn export_one(cfg: ExporterConfig, request: ExportProfilesServiceRequest) -> ExporterStats {
    let exporter = Exporter::start(cfg).unwrap();
    exporter.export(request);
    assert!(exporter.flush(PATIENCE), "not settled: {:?}", exporter.stats());
    exporter.shutdown(Duration::from_secs(1))
}

#[test]
fn the_request_goes_to_the_base_path_with_the_environments_headers_gzipped() {
    let server = ScriptedServer::start(vec![ok()]);
    let vars: HashMap<&str, String> = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("{}/otlp/", server.base())),
        ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic%20dTpw,X-Scope-OrgID=tenant-1".into()),
        ("OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION", "gzip".into()),
    ]
    .into();
    let cfg = ExporterConfig::from_lookup(&Overrides::default(), |name| vars.get(name).cloned()).unwrap();
    let request = example_request("headers");
    let stats = export_one(cfg, request.clone());
    assert_eq!(stats.sent.requests, 1, "{stats:?}");

    let seen = server.seen();
    let seen = &seen[0];
    assert_eq!(seen.request_line, "POST /otlp/v1development/profiles HTTP/1.1");
    let header = |name: &str| seen.headers.get(name).map(String::as_str).unwrap_or("");
    assert_eq!(header("content-type"), "application/x-protobuf");
    assert_eq!(header("content-encoding"), "gzip");
    assert_eq!(header("authorization"), "Basic dTpw");
    assert_eq!(header("x-scope-orgid"), "tenant-1");
    assert!(header("user-agent").starts_with("thread-ctx/"), "{}", header("user-agent"));
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&seen.body[..]).read_to_end(&mut raw).unwrap();
    assert_eq!(ExportProfilesServiceRequest::decode(&raw[..]).unwrap(), request);
}

#[test]
fn a_throttled_request_waits_for_retry_after() {
    let throttled = response("429 Too Many Requests", &[("retry-after", "1")], b"slow down");
    let server = ScriptedServer::start(vec![throttled, ok()]);
    let mut cfg = config(&server.base(), "http/protobuf", "none");
    cfg.retry = quick_retries(PATIENCE);
    let stats = export_one(cfg, example_request("throttled"));
    assert_eq!((stats.sent.requests, stats.retries), (1, 1), "{stats:?}");
    let seen = server.seen();
    let waited = seen[1].at - seen[0].at;
    // The backoff alone would be 75-125 ms.
    assert!(waited >= Duration::from_millis(950), "retried after {waited:?}, not after Retry-After: 1");
}

#[test]
fn gateway_errors_are_retried() {
    let server = ScriptedServer::start(vec![response("503 Service Unavailable", &[], b""), response("502 Bad Gateway", &[], b""), ok()]);
    let mut cfg = config(&server.base(), "http/protobuf", "none");
    cfg.retry = quick_retries(PATIENCE);
    let stats = export_one(cfg, example_request("gateway"));
    assert_eq!((stats.sent.requests, stats.retries, stats.last_error), (1, 2, None));
}

#[test]
fn a_refused_request_is_not_retried_and_says_why() {
    let status = tonic_types::Status { code: 3, message: "profile has no sample_type".into(), details: vec![] };
    let refused = response("400 Bad Request", &[("content-type", "application/x-protobuf")], &status.encode_to_vec());
    // A second response would be taken by a (wrong) retry.
    let server = ScriptedServer::start(vec![refused, ok()]);
    let mut cfg = config(&server.base(), "http/protobuf", "none");
    cfg.retry = quick_retries(PATIENCE);
    let stats = export_one(cfg, example_request("refused"));
    assert_eq!((stats.failed.requests, stats.sent.requests, stats.retries), (1, 0, 0), "{stats:?}");
    assert_eq!(stats.last_error.as_deref(), Some("refused, not retried: HTTP 400 Bad Request: profile has no sample_type"));
    assert_eq!(server.seen().len(), 1);
}

#[test]
fn partial_success_is_counted_and_reported_not_retried() {
    use opentelemetry_proto::tonic::collector::profiles::v1development::{ExportProfilesPartialSuccess, ExportProfilesServiceResponse};
    let answer = ExportProfilesServiceResponse {
        partial_success: Some(ExportProfilesPartialSuccess { rejected_profiles: 1, error_message: "bad stack".into() }),
    };
    let server = ScriptedServer::start(vec![response("200 OK", &[("content-type", "application/x-protobuf")], &answer.encode_to_vec())]);
    let stats = export_one(config(&server.base(), "http/protobuf", "none"), example_request("partial"));
    assert_eq!((stats.sent.requests, stats.rejected_profiles, stats.retries), (1, 1, 0), "{stats:?}");
    assert_eq!(stats.last_error.as_deref(), Some("the endpoint rejected 1 profiles: bad stack"));
}
