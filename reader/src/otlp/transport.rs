//! One attempt to send one request, over gRPC or HTTP, and what its outcome means for retrying.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::profiles::v1development::{ExportProfilesServiceRequest, ExportProfilesServiceResponse};

use super::config::{ExporterConfig, Protocol};
use super::{grpc::GrpcTransport, http::HttpTransport};

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

/// The transport the configuration names.
pub(crate) enum Transport {
    Grpc(GrpcTransport),
    Http(HttpTransport),
}

impl Transport {
    /// Builds the client. Needs a Tokio runtime (the exporter's own).
    pub fn new(config: &ExporterConfig) -> Result<Transport, String> {
        Ok(match config.protocol {
            Protocol::Grpc => Transport::Grpc(GrpcTransport::new(config)?),
            Protocol::HttpProtobuf => Transport::Http(HttpTransport::new(config)?),
        })
    }

    /// The request in the form the transport sends it, made once and reused by every attempt.
    pub fn prepare(&self, request: ExportProfilesServiceRequest) -> Prepared {
        match self {
            Transport::Grpc(_) => Prepared::Message(request),
            Transport::Http(t) => Prepared::Body(t.body(&request)),
        }
    }

    /// One attempt, bounded by the configured timeout.
    pub async fn send(&mut self, request: &Prepared) -> Result<Delivered, SendError> {
        match (self, request) {
            (Transport::Grpc(t), Prepared::Message(m)) => t.send(m).await,
            (Transport::Http(t), Prepared::Body(b)) => t.send(b.clone()).await,
            _ => unreachable!("a request is prepared by the transport that sends it"),
        }
    }
}

/// A request ready to send: the message (gRPC encodes it per attempt) or the HTTP body.
pub(crate) enum Prepared {
    Message(ExportProfilesServiceRequest),
    Body(bytes::Bytes),
}

/// What to say when the endpoint does not serve the profiles signal at all.
pub(crate) const NOT_SERVED_HINT: &str = "the endpoint does not accept OTLP profiles: an OpenTelemetry \
     Collector needs a profiles pipeline and --feature-gates=+service.profilesSupport";
