//! OTLP over gRPC: `ProfilesService/Export` through tonic's generated client.

use std::error::Error as _;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Status};
use tonic_types::StatusExt;

use super::config::{Compression, ExporterConfig, Protocol};
use super::outcome::{broken_exchange, protocol_mismatch_hint, Delivered, SendError, NOT_SERVED_HINT};
use super::transport_error::TransportError;
use super::USER_AGENT;

/// Largest answer accepted: an export response is a few bytes.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

pub(crate) struct GrpcTransport {
    client: ProfilesServiceClient<Channel>,
    metadata: MetadataMap,
    timeout: Duration,
}

impl GrpcTransport {
    pub fn new(config: &ExporterConfig) -> Result<GrpcTransport, TransportError> {
        let origin = config.endpoint.as_str().trim_end_matches('/').to_string();
        let endpoint = Endpoint::from_shared(origin)
            .map_err(|cause| TransportError::Endpoint { endpoint: config.endpoint.to_string(), cause })?
            .user_agent(USER_AGENT)
            .map_err(TransportError::UserAgent)?
            // The whole attempt is bounded in send(), so one timeout error says what happened.
            .connect_timeout(config.timeout);
        // https://: TLS, trusting the CA OTEL_EXPORTER_OTLP_CERTIFICATE names, else the system's.
        let endpoint = if config.endpoint.scheme() == "https" {
            let tls = match &config.ca_pem {
                Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
                None => ClientTlsConfig::new().with_native_roots(),
            };
            endpoint.tls_config(tls).map_err(|cause| TransportError::Endpoint { endpoint: config.endpoint.to_string(), cause })?
        } else {
            endpoint
        };
        // Lazy: connects on the first request and reconnects after the server went away.
        let mut client = ProfilesServiceClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(MAX_RESPONSE_BYTES)
            .accept_compressed(CompressionEncoding::Gzip);
        if config.compression == Compression::Gzip {
            client = client.send_compressed(CompressionEncoding::Gzip);
        }
        let mut metadata = MetadataMap::new();
        for (name, value) in &config.headers {
            let key = MetadataKey::from_bytes(name.as_bytes()).map_err(|e| TransportError::header(name, e))?;
            let value = MetadataValue::try_from(value.as_str()).map_err(|e| TransportError::header(name, e))?;
            metadata.insert(key, value);
        }
        Ok(GrpcTransport { client, metadata, timeout: config.timeout })
    }

    pub async fn send(&mut self, message: &ExportProfilesServiceRequest) -> Result<Delivered, SendError> {
        let mut request = tonic::Request::new(message.clone());
        *request.metadata_mut() = self.metadata.clone();
        match tokio::time::timeout(self.timeout, self.client.export(request)).await {
            Err(_) => Err(SendError::Retryable { reason: format!("no answer within {} ms", self.timeout.as_millis()), retry_after: None }),
            Ok(Ok(response)) => Ok(Delivered::from_response(response.get_ref())),
            Ok(Err(status)) => Err(classify(&status)),
        }
    }
}

/// The OTLP rule: these codes are transient; the rest would fail again. RESOURCE_EXHAUSTED is
/// retried (the Collector's memory_limiter refuses with it while it sheds load), after the
/// server's `RetryInfo` delay when it gives one.
pub(crate) fn classify(status: &Status) -> SendError {
    let reason = describe(status);
    // A status made locally from a broken connection (it has a source error), as opposed to
    // one the server sent; or an answer in the other protocol, whatever code tonic gave it.
    let local = matches!(status.code(), Code::Unknown | Code::Internal) && status.source().is_some();
    if local || protocol_mismatch_hint(Protocol::Grpc, &reason).is_some() {
        return broken_exchange(Protocol::Grpc, reason);
    }
    match status.code() {
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss
        | Code::ResourceExhausted => SendError::Retryable { reason, retry_after: status.get_details_retry_info().and_then(|info| info.retry_delay) },
        Code::Unimplemented => SendError::Permanent { reason: format!("{NOT_SERVED_HINT} ({reason})") },
        _ => SendError::Permanent { reason },
    }
}

fn describe(status: &Status) -> String {
    let mut text = format!("gRPC {:?}", status.code());
    if !status.message().is_empty() {
        text.push_str(": ");
        text.push_str(status.message());
    }
    // tonic's own message for a transport failure is generic; the cause says what happened.
    let mut source = status.source();
    while let Some(e) = source {
        let s = e.to_string();
        if !text.contains(&s) && s != "transport error" {
            text.push_str(": ");
            text.push_str(&s);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::{ErrorDetails, StatusExt};

    #[test]
    fn transient_codes_are_retried_and_the_rest_are_not() {
        for code in [Code::Unavailable, Code::ResourceExhausted, Code::DeadlineExceeded, Code::Aborted] {
            assert!(matches!(classify(&Status::new(code, "x")), SendError::Retryable { .. }), "{code:?}");
        }
        for code in [Code::InvalidArgument, Code::Unauthenticated, Code::PermissionDenied, Code::Unknown] {
            assert!(matches!(classify(&Status::new(code, "x")), SendError::Permanent { .. }), "{code:?}");
        }
        let SendError::Permanent { reason } = classify(&Status::unimplemented("unknown service")) else { panic!() };
        assert!(reason.contains("service.profilesSupport") && reason.contains("unknown service"), "{reason}");
    }

    #[test]
    fn the_servers_retry_delay_is_honoured() {
        let details = ErrorDetails::with_retry_info(Some(Duration::from_millis(1500)));
        let status = Status::with_error_details(Code::ResourceExhausted, "memory limit", details);
        assert_eq!(
            classify(&status),
            SendError::Retryable { reason: "gRPC ResourceExhausted: memory limit".into(), retry_after: Some(Duration::from_millis(1500)) }
        );
    }
}
