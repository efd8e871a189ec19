//! What one attempt to send a request came to, whatever the transport: taken (maybe in part), or
//! failed in a way worth retrying or not.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceResponse;

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
