//! Why a transport's client could not be built: its own module, so that the transports (grpc.rs,
//! http.rs) and the enum choosing between them (transport.rs) do not import each other.

/// Why a transport's client could not be built from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("endpoint {endpoint}: {cause}")]
    Endpoint { endpoint: String, cause: tonic::transport::Error },
    #[error("user agent: {0}")]
    UserAgent(tonic::transport::Error),
    #[error("HTTP client: {0}")]
    HttpClient(reqwest::Error),
    /// A header (OTEL_EXPORTER_OTLP_HEADERS) the protocol cannot carry: its name, and why.
    #[error("header {name}: {reason}")]
    Header { name: String, reason: String },
}

impl TransportError {
    pub(crate) fn header(name: &str, reason: impl std::fmt::Display) -> TransportError {
        TransportError::Header { name: name.to_string(), reason: reason.to_string() }
    }
}
