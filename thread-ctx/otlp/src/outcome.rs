//! What one attempt to send a request came to, whatever the transport: taken (maybe in part), or
//! failed in a way worth retrying or not; and what to tell the user about a failure.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceResponse;

use super::config::Protocol;

/// The endpoint took the request. It may still have refused part of it (OTLP partial success):
/// that is not retried, only reported.
#[derive(Debug, Default)]
pub(crate) struct Delivered {
    pub rejected_profiles: u64,
    pub message: String,
}

impl Delivered {
    pub fn from_response(response: &ExportProfilesServiceResponse) -> Delivered {
        let partial = response.partial_success.as_ref();
        Delivered {
            rejected_profiles: partial.map_or(0, |p| p.rejected_profiles.max(0) as u64),
            message: partial.map(|p| p.error_message.clone()).unwrap_or_default(),
        }
    }
}

/// Why an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendError {
    /// Worth another attempt: the endpoint is down, overloaded, slow, or the connection broke.
    /// `retry_after` is the server's own delay (HTTP `Retry-After`, gRPC `RetryInfo`).
    Retryable { reason: String, retry_after: Option<Duration> },
    /// The same request would fail again (refused as malformed, unauthorised, not served).
    Permanent { reason: String },
}

/// What to say when the endpoint does not serve the profiles signal at all.
pub(crate) const NOT_SERVED_HINT: &str = "the endpoint does not accept OTLP profiles: an OpenTelemetry \
     Collector needs a profiles pipeline and --feature-gates=+service.profilesSupport";

/// What to add to a transport error that says the endpoint answered in the other protocol: an
/// HTTP/1.1 answer read as HTTP/2 frames (gRPC sent to an OTLP/HTTP port: `frame with invalid
/// size`, hyper's reading of `HTTP/1.1 400`), or HTTP/2 frames read as an HTTP/1.1 answer
/// (OTLP/HTTP sent to a gRPC port: `invalid HTTP version parsed`, `received unexpected message
/// from connection`). Those are the words of hyper, under tonic and reqwest.
pub(crate) fn protocol_mismatch_hint(protocol: Protocol, reason: &str) -> Option<String> {
    let other = protocol.other();
    let mismatch = match protocol {
        Protocol::Grpc => reason.contains("frame with invalid size"),
        Protocol::HttpProtobuf => reason.contains("invalid HTTP version parsed") || reason.contains("received unexpected message from connection"),
    };
    mismatch.then(|| {
        format!(
            "the endpoint answers in another protocol, like a receiver of {o}: OTLP receivers serve grpc on port 4317 and \
             http/protobuf on 4318 by default; use the {p} port ({pp}), or --protocol {o} (OTEL_EXPORTER_OTLP_PROTOCOL={o})",
            o = other.name(),
            p = protocol.name(),
            pp = protocol.usual_port(),
        )
    })
}

/// A broken exchange is worth another attempt, unless the endpoint answered in the other
/// protocol: then every attempt would fail alike, and the operator must change a setting.
pub(crate) fn broken_exchange(protocol: Protocol, reason: String) -> SendError {
    match protocol_mismatch_hint(protocol, &reason) {
        Some(hint) => SendError::Permanent { reason: format!("{reason}; {hint}") },
        None => SendError::Retryable { reason, retry_after: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reason, with the hint when it applies; whether the failure is retried.
    fn with_mismatch_hint(protocol: Protocol, reason: String) -> String {
        match broken_exchange(protocol, reason) {
            SendError::Permanent { reason } => reason,
            SendError::Retryable { reason, .. } => reason,
        }
    }

    #[test]
    fn an_answer_in_the_other_protocol_is_not_retried_and_other_broken_exchanges_are() {
        let grpc_to_http = "gRPC Unknown: transport error: http2 error: connection error detected: frame with invalid size";
        assert!(matches!(broken_exchange(Protocol::Grpc, grpc_to_http.into()), SendError::Permanent { .. }));
        let reset = "gRPC Unknown: transport error: connection reset by peer";
        assert!(matches!(broken_exchange(Protocol::Grpc, reset.into()), SendError::Retryable { retry_after: None, .. }));
    }

    #[test]
    fn the_words_of_each_mismatch_get_the_hint_naming_ports_and_the_flag() {
        // As measured against the OpenTelemetry Collector's OTLP receiver.
        let grpc_to_http = "gRPC Unknown: transport error: http2 error: connection error detected: frame with invalid size";
        let hinted = with_mismatch_hint(Protocol::Grpc, grpc_to_http.into());
        assert!(hinted.starts_with(grpc_to_http), "{hinted}");
        assert!(
            hinted.contains("like a receiver of http/protobuf") && hinted.contains("use the grpc port (4317), or --protocol http/protobuf"),
            "{hinted}"
        );
        for http_to_grpc in [
            "error sending request for url (http://c:4317/v1development/profiles): client error (SendRequest): invalid HTTP version parsed",
            "error sending request for url (http://c:4317/v1development/profiles): client error (Canceled): operation was canceled: \
             received unexpected message from connection",
        ] {
            let hinted = with_mismatch_hint(Protocol::HttpProtobuf, http_to_grpc.into());
            assert!(
                hinted.contains("like a receiver of grpc") && hinted.contains("use the http/protobuf port (4318), or --protocol grpc"),
                "{hinted}"
            );
        }
        // Other failures, and each protocol's words under the other, are left as they are.
        for (protocol, reason) in [
            (Protocol::Grpc, "gRPC Unavailable: tcp connect error: Connection refused (os error 111)"),
            (Protocol::HttpProtobuf, grpc_to_http),
            (Protocol::Grpc, "invalid HTTP version parsed"),
            (Protocol::HttpProtobuf, "HTTP 503 Service Unavailable"),
        ] {
            assert_eq!(with_mismatch_hint(protocol, reason.into()), reason);
        }
    }
}
