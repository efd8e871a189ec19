//! OTLP/HTTP with a binary protobuf body: `POST {endpoint}` through reqwest.

use std::io::Write;
use std::time::{Duration, SystemTime};

use flate2::{write::GzEncoder, Compression as GzLevel};
use opentelemetry_proto::tonic::collector::profiles::v1development::{ExportProfilesServiceRequest, ExportProfilesServiceResponse};
use prost::Message;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Client, StatusCode};
use url::Url;

use super::config::{Compression, ExporterConfig, Protocol};
use super::outcome::{broken_exchange, Delivered, SendError, NOT_SERVED_HINT};
use super::transport_error::TransportError;
use super::USER_AGENT;

const PROTOBUF: &str = "application/x-protobuf";
/// Largest answer read: an export response or an error status is small; a misbehaving server
/// must not make the agent allocate what it likes.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

pub(crate) struct HttpTransport {
    client: Client,
    url: Url,
    headers: HeaderMap,
    gzip: bool,
    timeout: Duration,
}

impl HttpTransport {
    pub fn new(config: &ExporterConfig) -> Result<HttpTransport, TransportError> {
        let client = Client::builder()
            .user_agent(USER_AGENT)
            // The whole attempt is bounded in send(), so one timeout error says what happened.
            .connect_timeout(config.timeout)
            .build()
            .map_err(TransportError::HttpClient)?;
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| TransportError::header(name, e))?;
            let value = HeaderValue::from_str(value).map_err(|e| TransportError::header(name.as_str(), e))?;
            headers.insert(name, value);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROTOBUF));
        let gzip = config.compression == Compression::Gzip;
        if gzip {
            headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        Ok(HttpTransport { client, url: config.endpoint.clone(), headers, gzip, timeout: config.timeout })
    }

    /// The request body: the encoded message, gzipped if configured. Made once per request and
    /// reused by its retries.
    pub fn body(&self, message: &ExportProfilesServiceRequest) -> bytes::Bytes {
        let raw = message.encode_to_vec();
        if !self.gzip {
            return raw.into();
        }
        let mut gz = GzEncoder::new(Vec::with_capacity(raw.len() / 4), GzLevel::fast());
        gz.write_all(&raw).expect("writing to a Vec cannot fail");
        gz.finish().expect("writing to a Vec cannot fail").into()
    }

    pub async fn send(&mut self, body: bytes::Bytes) -> Result<Delivered, SendError> {
        let attempt = async {
            let response = self.client.post(self.url.clone()).headers(self.headers.clone()).body(body).send().await.map_err(transport_error)?;
            let status = response.status();
            let retry_after = retry_after(response.headers());
            let content_type = response.headers().get(CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            let is_protobuf = content_type.as_deref().is_some_and(|v| v.starts_with(PROTOBUF));
            let body = read_bounded(response).await.map_err(transport_error)?;
            if status.is_success() {
                return taken(status, content_type.as_deref(), &body);
            }
            Err(classify(status, retry_after, &error_text(&body, is_protobuf)))
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(outcome) => outcome,
            Err(_) => Err(SendError::Retryable { reason: format!("no answer within {} ms", self.timeout.as_millis()), retry_after: None }),
        }
    }
}

/// A success is an OTLP answer: `application/x-protobuf` holding an `ExportProfilesServiceResponse`
/// (empty when everything was taken). Anything else answering 2xx (a web page, a proxy's own
/// reply) did not take the profiles: a refusal naming what answered, not retried (the same
/// endpoint answers the same way).
fn taken(status: StatusCode, content_type: Option<&str>, body: &[u8]) -> Result<Delivered, SendError> {
    if !content_type.is_some_and(|t| t.starts_with(PROTOBUF)) {
        return Err(SendError::Permanent {
            reason: format!(
                "{}, not an OTLP response ({PROTOBUF}): the endpoint is not an OTLP/HTTP receiver; {NOT_OTLP_HINT}",
                answered(status, content_type, body)
            ),
        });
    }
    match ExportProfilesServiceResponse::decode(body) {
        Ok(answer) => Ok(Delivered::from_response(&answer)),
        Err(e) => Err(SendError::Permanent {
            reason: format!(
                "{}, which does not decode as an OTLP ExportProfilesServiceResponse ({e}); {NOT_OTLP_HINT}",
                answered(status, content_type, body)
            ),
        }),
    }
}

/// What to check when something other than an OTLP receiver answered.
const NOT_OTLP_HINT: &str = "check --endpoint (OTEL_EXPORTER_OTLP_ENDPOINT): an OpenTelemetry Collector's OTLP receiver serves \
     http/protobuf on port 4318 and grpc on 4317 by default";

/// `HTTP 200 OK with Content-Type text/html (a page titled "Jaeger UI")`: who answered, in words.
pub(crate) fn answered(status: StatusCode, content_type: Option<&str>, body: &[u8]) -> String {
    let kind = content_type.map_or_else(|| "no Content-Type".to_string(), |t| format!("Content-Type {}", printable(t, 80)));
    let what = match page_title(body) {
        Some(title) => format!("a page titled \"{title}\""),
        None if body.is_empty() => "an empty body".to_string(),
        None => format!("{} bytes starting {:?}", body.len(), printable(&String::from_utf8_lossy(&body[..body.len().min(48)]), 48)),
    };
    format!("the endpoint answered HTTP {status} with {kind} ({what})")
}

/// The `<title>` of an HTML page, if the body is one.
fn page_title(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(&body[..body.len().min(8192)]);
    let lower = text.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    Some(printable(text[start..end].trim(), 80))
}

/// At most `max` characters, control characters escaped: a server's words printed on our line.
fn printable(s: &str, max: usize) -> String {
    let cut = s.char_indices().nth(max).map_or(s.len(), |(at, _)| at);
    let more = if cut < s.len() { "…" } else { "" };
    format!("{}{more}", thread_ctx_discovery::printable::printable(&s[..cut]))
}

/// The OTLP/HTTP rule: 429, 502, 503 and 504 are transient; other failures would fail again.
pub(crate) fn classify(status: StatusCode, retry_after: Option<Duration>, text: &str) -> SendError {
    let mut reason = format!("HTTP {status}");
    if !text.is_empty() {
        reason.push_str(": ");
        reason.push_str(text);
    }
    match status.as_u16() {
        429 | 502 | 503 | 504 => SendError::Retryable { reason, retry_after },
        404 | 405 => SendError::Permanent { reason: format!("{NOT_SERVED_HINT} ({reason})") },
        _ => SendError::Permanent { reason },
    }
}

/// Connection refused or reset, a timeout, a broken response: all worth another attempt.
fn transport_error(e: reqwest::Error) -> SendError {
    let mut reason = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        reason.push_str(": ");
        reason.push_str(&cause.to_string());
        source = cause.source();
    }
    if e.is_builder() {
        SendError::Permanent { reason }
    } else {
        broken_exchange(Protocol::HttpProtobuf, reason)
    }
}

/// `Retry-After`: seconds, or an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_RESPONSE_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() == MAX_RESPONSE_BYTES {
            break;
        }
    }
    Ok(body)
}

/// What the server said: the message of a `google.rpc.Status` body (what OTLP servers send), or
/// the start of a text body.
fn error_text(body: &[u8], is_protobuf: bool) -> String {
    if is_protobuf {
        if let Ok(status) = tonic_types::Status::decode(body) {
            return status.message;
        }
    }
    if let Some(title) = page_title(body) {
        return format!("a page titled \"{title}\"");
    }
    printable(String::from_utf8_lossy(body).trim(), 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_and_gateway_errors_are_retried_and_the_rest_are_not() {
        for code in [429, 502, 503, 504] {
            let status = StatusCode::from_u16(code).unwrap();
            assert!(matches!(classify(status, None, ""), SendError::Retryable { .. }), "{code}");
        }
        for code in [400, 401, 403, 413, 500] {
            let status = StatusCode::from_u16(code).unwrap();
            assert!(matches!(classify(status, None, ""), SendError::Permanent { .. }), "{code}");
        }
        let SendError::Permanent { reason } = classify(StatusCode::NOT_FOUND, None, "404 page not found") else { panic!() };
        assert!(reason.contains("service.profilesSupport") && reason.contains("HTTP 404 Not Found: 404 page"), "{reason}");
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        h.insert(RETRY_AFTER, HeaderValue::from_str(&later).unwrap());
        let d = retry_after(&h).unwrap();
        assert!(d > Duration::from_secs(27) && d <= Duration::from_secs(30), "{d:?}");
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn a_success_is_an_otlp_answer_and_anything_else_names_what_answered() {
        use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesPartialSuccess;
        assert_eq!(taken(StatusCode::OK, Some(PROTOBUF), &[]).unwrap().rejected_profiles, 0, "an empty answer: all taken");
        let partial = ExportProfilesServiceResponse {
            partial_success: Some(ExportProfilesPartialSuccess { rejected_profiles: 2, error_message: "no sample_type".into() }),
        };
        let d = taken(StatusCode::OK, Some("application/x-protobuf; charset=binary"), &partial.encode_to_vec()).unwrap();
        assert_eq!((d.rejected_profiles, d.message.as_str()), (2, "no sample_type"));
        let page = b"<!doctype html>\n<html><head><TITLE> Jaeger UI </TITLE></head><body>\x1b[31m</body></html>";
        let Err(SendError::Permanent { reason }) = taken(StatusCode::OK, Some("text/html; charset=utf-8"), page) else { panic!() };
        assert!(
            reason.starts_with(
                "the endpoint answered HTTP 200 OK with Content-Type text/html; charset=utf-8 (a page titled \"Jaeger UI\"), not an OTLP response"
            ),
            "{reason}"
        );
        assert!(reason.contains("port 4318"), "{reason}");
        let Err(SendError::Permanent { reason }) = taken(StatusCode::NO_CONTENT, None, &[]) else { panic!() };
        assert!(reason.starts_with("the endpoint answered HTTP 204 No Content with no Content-Type (an empty body)"), "{reason}");
        let Err(SendError::Permanent { reason }) = taken(StatusCode::OK, Some("application/json"), b"{\"ok\":\ttrue}") else { panic!() };
        assert!(reason.contains(r#"(12 bytes starting "{\"ok\":\\ttrue}")"#), "control characters escaped: {reason}");
        let Err(SendError::Permanent { reason }) = taken(StatusCode::OK, Some(PROTOBUF), &[0xff; 9]) else { panic!() };
        assert!(reason.contains("does not decode as an OTLP ExportProfilesServiceResponse"), "{reason}");
    }

    #[test]
    fn error_bodies_are_read_as_status_messages_or_short_text() {
        let status = tonic_types::Status { code: 3, message: "bad profile".into(), details: vec![] };
        assert_eq!(error_text(&status.encode_to_vec(), true), "bad profile");
        assert_eq!(error_text(b"  plain words \n", false), "plain words");
        let long = "x".repeat(500);
        assert_eq!(error_text(long.as_bytes(), false).chars().count(), 201);
        assert_eq!(error_text(b"<html><title>404 Not Found</title><body>nginx</body></html>", false), "a page titled \"404 Not Found\"");
    }
}
