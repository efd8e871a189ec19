//! OTLP/Profiles export: sends `ExportProfilesServiceRequest`s to an OpenTelemetry Collector (or
//! any OTLP profiles endpoint) over gRPC (`ProfilesService/Export`) or OTLP/HTTP
//! (`POST /v1development/profiles`, binary protobuf), optionally gzipped, configured by the
//! standard `OTEL_EXPORTER_OTLP_*` variables with explicit overrides ([`ExporterConfig`]).
//!
//! [`Exporter`] never blocks its caller: requests wait in a bounded queue (the oldest is dropped
//! when it is full) for a background thread that sends them one at a time, retrying transient
//! failures (connection refused, timeouts, gRPC `UNAVAILABLE`/`RESOURCE_EXHAUSTED`, HTTP
//! 429/502/503/504) with exponential backoff or the server's own delay, and reporting permanent
//! ones. [`ExporterStats`] counts every outcome; [`Exporter::shutdown`] sends what is queued
//! within a deadline.
//!
//! [`received`] reads back what a Collector's file exporter wrote (the tests, `thread-ctx report`).
//!
//! ```no_run
//! use std::time::Duration;
//! use thread_ctx_otlp::{Exporter, ExporterConfig, Overrides, ExportProfilesServiceRequest};
//!
//! let config = ExporterConfig::from_env(&Overrides::default())?;
//! let exporter = Exporter::start(config)?;
//! exporter.export(ExportProfilesServiceRequest::default());
//! let stats = exporter.shutdown(Duration::from_secs(5));
//! eprintln!("sent {} requests, dropped {}", stats.sent.requests, stats.dropped().requests);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
pub mod encode;
mod exporter;
pub mod framed;
mod grpc;
mod http;
pub mod into_profile;
mod outcome;
pub mod received;
mod retry;
mod sink;
mod stats;
mod to_otlp;
pub mod traces;
mod transport;
mod transport_error;

pub use config::{Compression, ConfigError, ExporterConfig, Overrides, Protocol, DEFAULT_QUEUE_CAPACITY, HTTP_PROFILES_PATH};
pub use exporter::{Exporter, StartCause, StartError};
pub use retry::RetryPolicy;
pub use sink::OtlpSink;
pub use stats::{Count, ExporterStats};

/// The OTLP messages, for building requests.
pub use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
pub use opentelemetry_proto::tonic::{common::v1 as common, profiles::v1development as profiles, resource::v1 as resource};

/// Sent with every request.
const USER_AGENT: &str = concat!("thread-ctx/", env!("CARGO_PKG_VERSION"));
