//! One attempt to send one request, over the transport the configuration names (gRPC or HTTP).

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;

use super::config::{ExporterConfig, Protocol};
use super::outcome::{Delivered, SendError};
use super::transport_error::TransportError;
use super::{grpc::GrpcTransport, http::HttpTransport};

/// The transport the configuration names.
pub(crate) enum Transport {
    Grpc(GrpcTransport),
    Http(HttpTransport),
}

impl Transport {
    /// Builds the client. Needs a Tokio runtime (the exporter's own).
    pub fn new(config: &ExporterConfig) -> Result<Transport, TransportError> {
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
