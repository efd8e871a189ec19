//! Where and how to export: the standard OTLP exporter variables
//! (`OTEL_EXPORTER_OTLP_{PROFILES_,}{ENDPOINT,PROTOCOL,HEADERS,TIMEOUT,COMPRESSION,CERTIFICATE}`), with
//! explicit overrides (the agent's flags) over them.
//!
//! Precedence, per setting: an override, then the profiles-specific variable, then the generic
//! one, then the default. An empty variable counts as unset.
//!
//! The HTTP URL: the profiles-specific endpoint is used exactly as given (a URL without a path
//! posts to `/`); the generic endpoint is a base to which `v1development/profiles` is appended
//! (`http://collector:4318/otlp` posts to `/otlp/v1development/profiles`); an overriding endpoint
//! with a path is used as given, and one without a path gets `/v1development/profiles`, so that
//! `--endpoint http://collector:4318` does what one means. gRPC uses only the scheme, host and
//! port.

use std::fmt;
use std::time::Duration;

use url::Url;

use super::retry::RetryPolicy;

/// The OTLP/HTTP path of the profiles signal, relative to a base endpoint.
pub const HTTP_PROFILES_PATH: &str = "v1development/profiles";

const DEFAULT_GRPC_ENDPOINT: &str = "http://localhost:4317";
const DEFAULT_HTTP_BASE: &str = "http://localhost:4318";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests waiting for the exporter (the one being sent not included). At one request per
/// aggregation window, 8 windows of 10 s ride out a Collector restart of over a minute.
pub const DEFAULT_QUEUE_CAPACITY: usize = 8;

/// The OTLP transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `ProfilesService/Export` over gRPC (HTTP/2).
    Grpc,
    /// `POST /v1development/profiles` with a binary protobuf body (HTTP/1.1).
    HttpProtobuf,
}

impl Protocol {
    /// The value the `_PROTOCOL` variables use.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }

    /// The port an OpenTelemetry Collector's OTLP receiver serves this protocol on by default.
    pub fn usual_port(self) -> u16 {
        match self {
            Protocol::Grpc => 4317,
            Protocol::HttpProtobuf => 4318,
        }
    }

    /// The other transport.
    pub fn other(self) -> Protocol {
        match self {
            Protocol::Grpc => Protocol::HttpProtobuf,
            Protocol::HttpProtobuf => Protocol::Grpc,
        }
    }

    fn default_endpoint(self) -> &'static str {
        match self {
            Protocol::Grpc => DEFAULT_GRPC_ENDPOINT,
            Protocol::HttpProtobuf => DEFAULT_HTTP_BASE,
        }
    }
}

/// Compression of request bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

/// Explicit settings that win over the environment (the agent's command-line flags). `None`
/// (or an empty list) leaves a setting to the environment.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// A URL: `http://host:port` or, for HTTP, a full URL with a path.
    pub endpoint: Option<String>,
    /// `grpc` or `http/protobuf`.
    pub protocol: Option<String>,
    /// Extra headers (gRPC metadata), over the environment's for the same name.
    pub headers: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    /// `gzip` or `none`.
    pub compression: Option<String>,
}

/// A complete, validated exporter configuration.
#[derive(Clone, Debug)]
pub struct ExporterConfig {
    pub protocol: Protocol,
    /// For HTTP the URL requests are posted to; for gRPC the server (`scheme://host:port`).
    pub endpoint: Url,
    /// Header names are lower case (gRPC metadata requires it; HTTP does not care).
    pub headers: Vec<(String, String)>,
    /// Per attempt: connecting, sending and the answer.
    pub timeout: Duration,
    pub compression: Compression,
    /// The CA (PEM) an `https://` gRPC endpoint's certificate must chain to
    /// (`OTEL_EXPORTER_OTLP_CERTIFICATE`); None: the system's CAs.
    pub ca_pem: Option<Vec<u8>>,
    /// Requests waiting to be sent; when full, the oldest is dropped and counted.
    pub queue_capacity: usize,
    pub retry: RetryPolicy,
}

/// A setting that cannot be used, naming where it came from and what was expected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{origin}: invalid endpoint {value:?}: {reason}")]
    Endpoint { origin: String, value: String, reason: String },
    #[error("{origin}: unknown protocol {value:?}: expected \"grpc\" or \"http/protobuf\"")]
    Protocol { origin: String, value: String },
    #[error("{origin}: invalid header {entry:?}: {reason}")]
    Header { origin: String, entry: String, reason: String },
    #[error("{origin}: invalid timeout {value:?}: expected a whole number of milliseconds > 0")]
    Timeout { origin: String, value: String },
    #[error("{origin}: unknown compression {value:?}: expected \"gzip\" or \"none\"")]
    Compression { origin: String, value: String },
    #[error("{origin}: cannot use {path:?}: {reason}")]
    Certificate { origin: String, path: String, reason: String },
}

/// Where an override came from, in error messages.
const OVERRIDE: &str = "override";

impl ExporterConfig {
    /// The configuration from the process environment and `overrides`.
    pub fn from_env(overrides: &Overrides) -> Result<ExporterConfig, ConfigError> {
        Self::from_lookup(overrides, |name| std::env::var(name).ok())
    }

    /// The configuration from `lookup` (a variable's value by name) and `overrides`.
    pub fn from_lookup(overrides: &Overrides, lookup: impl Fn(&str) -> Option<String>) -> Result<ExporterConfig, ConfigError> {
        // The profiles variable wins over the generic one; empty means unset.
        let var = |suffix: &str| -> Option<(String, String)> {
            [format!("OTEL_EXPORTER_OTLP_PROFILES_{suffix}"), format!("OTEL_EXPORTER_OTLP_{suffix}")]
                .into_iter()
                .find_map(|name| lookup(&name).filter(|v| !v.trim().is_empty()).map(|v| (name, v)))
        };

        let protocol = match (&overrides.protocol, var("PROTOCOL")) {
            (Some(p), _) => parse_protocol(OVERRIDE, p)?,
            (None, Some((name, p))) => parse_protocol(&name, &p)?,
            (None, None) => Protocol::HttpProtobuf, // the specification's default
        };

        let endpoint = match (&overrides.endpoint, var("ENDPOINT")) {
            (Some(e), _) => endpoint_url(OVERRIDE, e, protocol, EndpointKind::Override)?,
            (None, Some((name, e))) => {
                let kind = if name.contains("PROFILES") { EndpointKind::Signal } else { EndpointKind::Base };
                endpoint_url(&name, &e, protocol, kind)?
            }
            (None, None) => endpoint_url("default", protocol.default_endpoint(), protocol, EndpointKind::Base)?,
        };

        let mut headers = match var("HEADERS") {
            Some((name, h)) => parse_headers(&name, &h)?,
            None => Vec::new(),
        };
        for (k, v) in &overrides.headers {
            let (k, v) = checked_header(OVERRIDE, k, v)?;
            headers.retain(|(name, _)| *name != k);
            headers.push((k, v));
        }

        let timeout = match (overrides.timeout, var("TIMEOUT")) {
            (Some(t), _) if t.is_zero() => return Err(ConfigError::Timeout { origin: OVERRIDE.into(), value: "0".into() }),
            (Some(t), _) => t,
            (None, Some((name, t))) => parse_timeout(&name, &t)?,
            (None, None) => DEFAULT_TIMEOUT,
        };

        let compression = match (&overrides.compression, var("COMPRESSION")) {
            (Some(c), _) => parse_compression(OVERRIDE, c)?,
            (None, Some((name, c))) => parse_compression(&name, &c)?,
            (None, None) => Compression::None, // the specification's default
        };

        let ca_pem = match var("CERTIFICATE") {
            Some((name, path)) => Some(read_certificate(&name, path.trim())?),
            None => None,
        };

        Ok(ExporterConfig {
            protocol,
            endpoint,
            headers,
            timeout,
            compression,
            ca_pem,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            retry: RetryPolicy::default(),
        })
    }
}

impl ExporterConfig {
    /// A note when the endpoint's port is the one the other protocol usually listens on (gRPC
    /// sent to 4318, OTLP/HTTP to 4317): the likeliest cause of an endpoint that answers in a
    /// protocol the exporter does not speak.
    pub fn port_note(&self) -> Option<String> {
        let other = self.protocol.other();
        (self.endpoint.port_or_known_default() == Some(other.usual_port())).then(|| {
            format!(
                "the endpoint's port {} is where OTLP receivers usually serve {}, but the protocol is {}: \
                 if exports fail, use --protocol {} (or OTEL_EXPORTER_OTLP_PROTOCOL={}) or port {}",
                other.usual_port(),
                other.name(),
                self.protocol.name(),
                other.name(),
                other.name(),
                self.protocol.usual_port()
            )
        })
    }
}

impl fmt::Display for ExporterConfig {
    /// `grpc http://collector:4317/ (gzip)`: for log lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gzip = if self.compression == Compression::Gzip { " (gzip)" } else { "" };
        write!(f, "{} {}{}", self.protocol.name(), self.endpoint, gzip)
    }
}

fn parse_protocol(origin: &str, value: &str) -> Result<Protocol, ConfigError> {
    match value.trim() {
        "grpc" => Ok(Protocol::Grpc),
        "http/protobuf" => Ok(Protocol::HttpProtobuf),
        _ => Err(ConfigError::Protocol { origin: origin.into(), value: value.into() }),
    }
}

fn parse_compression(origin: &str, value: &str) -> Result<Compression, ConfigError> {
    match value.trim() {
        "gzip" => Ok(Compression::Gzip),
        "none" => Ok(Compression::None),
        _ => Err(ConfigError::Compression { origin: origin.into(), value: value.into() }),
    }
}

/// A CA file: PEM with at least one certificate (the TLS library says more at connection time).
fn read_certificate(origin: &str, path: &str) -> Result<Vec<u8>, ConfigError> {
    let err = |reason: String| ConfigError::Certificate { origin: origin.into(), path: path.into(), reason };
    let pem = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
        return Err(err("expected a PEM file with a -----BEGIN CERTIFICATE----- block".into()));
    }
    Ok(pem)
}

fn parse_timeout(origin: &str, value: &str) -> Result<Duration, ConfigError> {
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(ConfigError::Timeout { origin: origin.into(), value: value.into() }),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EndpointKind {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: HTTP appends the signal path to it.
    Base,
    /// `OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT`: used as is.
    Signal,
    /// A flag: as is when it has a path, else the signal path.
    Override,
}

fn endpoint_url(origin: &str, value: &str, protocol: Protocol, kind: EndpointKind) -> Result<Url, ConfigError> {
    let err = |reason: &str| ConfigError::Endpoint { origin: origin.into(), value: value.into(), reason: reason.into() };
    if !value.contains("://") {
        return Err(err(&format!("expected a URL such as {} ({})", protocol.default_endpoint(), protocol.name())));
    }
    let mut url = Url::parse(value.trim()).map_err(|e| err(&e.to_string()))?;
    match url.scheme() {
        "http" => {}
        "https" if protocol == Protocol::Grpc => {}
        "https" => return Err(err("TLS (https) is supported over grpc only; use --protocol grpc, or http://")),
        other => return Err(err(&format!("scheme {other:?} is not supported; use http://"))),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(err("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(err("credentials in the URL are not supported; pass them as headers"));
    }
    url.set_fragment(None);
    match protocol {
        Protocol::Grpc => {
            url.set_path("");
            url.set_query(None);
        }
        Protocol::HttpProtobuf => {
            let has_path = url.path() != "/" && !url.path().is_empty();
            if kind == EndpointKind::Base || (kind == EndpointKind::Override && !has_path) {
                let base = url.path().trim_end_matches('/').to_string();
                url.set_path(&format!("{base}/{HTTP_PROFILES_PATH}"));
            }
        }
    }
    Ok(url)
}

/// `key1=value1,key2=value2`, values percent-decoded (the W3C baggage form the variables use).
fn parse_headers(origin: &str, value: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut headers: Vec<(String, String)> = Vec::new();
    for entry in value.split(',').filter(|e| !e.trim().is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            return Err(ConfigError::Header { origin: origin.into(), entry: entry.into(), reason: "expected key=value".into() });
        };
        let decoded = percent_encoding::percent_decode_str(v.trim()).decode_utf8().map_err(|_| ConfigError::Header {
            origin: origin.into(),
            entry: entry.into(),
            reason: "the value is not UTF-8 once percent-decoded".into(),
        })?;
        let (k, v) = checked_header(origin, k.trim(), &decoded)?;
        headers.retain(|(name, _)| *name != k);
        headers.push((k, v));
    }
    Ok(headers)
}

/// A header both HTTP and gRPC metadata accept: a lower-case token name (not a `grpc-` or
/// pseudo header) and a visible-ASCII value.
fn checked_header(origin: &str, name: &str, value: &str) -> Result<(String, String), ConfigError> {
    let entry = format!("{name}={value}");
    let fail = |reason: &str| ConfigError::Header { origin: origin.into(), entry: entry.clone(), reason: reason.into() };
    let name = name.to_ascii_lowercase();
    if name.is_empty() {
        return Err(fail("empty name"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        return Err(fail("a name may hold only letters, digits, '-', '_' and '.'"));
    }
    if name.starts_with("grpc-") || ["content-type", "content-encoding", "te"].contains(&name.as_str()) {
        return Err(fail("the exporter sets this header itself"));
    }
    if !value.bytes().all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic()) {
        return Err(fail("a value may hold only printable ASCII"));
    }
    Ok((name, value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)], overrides: &Overrides) -> Result<ExporterConfig, ConfigError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ExporterConfig::from_lookup(overrides, |name| vars.get(name).cloned())
    }

    fn ok(vars: &[(&str, &str)], overrides: &Overrides) -> ExporterConfig {
        config(vars, overrides).unwrap()
    }

    #[test]
    fn defaults_follow_the_specification() {
        let c = ok(&[], &Overrides::default());
        assert_eq!(c.protocol, Protocol::HttpProtobuf);
        assert_eq!(c.endpoint.as_str(), "http://localhost:4318/v1development/profiles");
        assert_eq!(c.timeout, Duration::from_secs(10));
        assert_eq!(c.compression, Compression::None);
        let g = ok(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], &Overrides::default());
        assert_eq!(g.protocol, Protocol::Grpc);
        assert_eq!(g.endpoint.as_str(), "http://localhost:4317/");
    }

    #[test]
    fn the_generic_http_endpoint_is_a_base_and_the_profiles_one_is_used_as_is() {
        let base = |e: &str| ok(&[("OTEL_EXPORTER_OTLP_ENDPOINT", e)], &Overrides::default()).endpoint.to_string();
        assert_eq!(base("http://c:4318"), "http://c:4318/v1development/profiles");
        assert_eq!(base("http://c:4318/"), "http://c:4318/v1development/profiles");
        assert_eq!(base("http://c:4318/otlp"), "http://c:4318/otlp/v1development/profiles");
        assert_eq!(base("http://c:4318/otlp/"), "http://c:4318/otlp/v1development/profiles");
        let signal = |e: &str| ok(&[("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", e)], &Overrides::default()).endpoint.to_string();
        assert_eq!(signal("http://c:4318/custom/path"), "http://c:4318/custom/path");
        assert_eq!(signal("http://c:4318"), "http://c:4318/");
        // The profiles variable wins over the generic one.
        let both =
            ok(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"), ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "http://b:2/p")], &Overrides::default());
        assert_eq!(both.endpoint.as_str(), "http://b:2/p");
    }

    // gRPC takes https:// with the CA OTEL_EXPORTER_OTLP_CERTIFICATE names (the profiles one
    // first); a file that is missing or holds no certificate is refused naming the variable.
    #[test]
    fn grpc_takes_tls_with_the_certificate_the_variables_name() {
        let dir = std::env::temp_dir().join(format!("otlp-config-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let (ca, junk) = (ca.to_str().unwrap(), junk.to_str().unwrap());
        let grpc = [("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4317")];
        let c =
            ok(&[grpc[0], grpc[1], ("OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE", ca), ("OTEL_EXPORTER_OTLP_CERTIFICATE", junk)], &Overrides::default());
        assert_eq!(c.endpoint.as_str(), "https://c:4317/");
        assert!(c.ca_pem.unwrap().starts_with(b"-----BEGIN CERTIFICATE-----"));
        assert_eq!(ok(&grpc, &Overrides::default()).ca_pem, None, "the system's CAs");
        let e = config(&[grpc[0], grpc[1], ("OTEL_EXPORTER_OTLP_CERTIFICATE", junk)], &Overrides::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("OTEL_EXPORTER_OTLP_CERTIFICATE: cannot use {junk:?}: expected a PEM file with a -----BEGIN CERTIFICATE----- block")
        );
        let e = config(&[grpc[0], grpc[1], ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem")], &Overrides::default()).unwrap_err();
        assert!(e.to_string().starts_with("OTEL_EXPORTER_OTLP_CERTIFICATE: cannot use \"/nonexistent/ca.pem\": No such file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_override_wins_and_gets_the_signal_path_only_without_a_path_of_its_own() {
        let vars = [("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "http://env:1/x"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")];
        let o = |e: &str, p: &str| Overrides { endpoint: Some(e.into()), protocol: Some(p.into()), ..Default::default() };
        assert_eq!(ok(&vars, &o("http://f:4318", "http/protobuf")).endpoint.as_str(), "http://f:4318/v1development/profiles");
        assert_eq!(ok(&vars, &o("http://f:4318/mine", "http/protobuf")).endpoint.as_str(), "http://f:4318/mine");
        let g = ok(&vars, &o("http://f:4317/ignored?q=1", "grpc"));
        assert_eq!((g.protocol, g.endpoint.as_str()), (Protocol::Grpc, "http://f:4317/"));
    }

    #[test]
    fn a_port_that_the_other_protocol_usually_uses_gets_a_note() {
        let o = |e: &str, p: &str| Overrides { endpoint: Some(e.into()), protocol: Some(p.into()), ..Default::default() };
        let note = ok(&[], &o("http://c:4318", "grpc")).port_note().expect("gRPC to 4318");
        assert!(note.contains("port 4318") && note.contains("--protocol http/protobuf") && note.contains("port 4317"), "{note}");
        let note = ok(&[], &o("http://c:4317", "http/protobuf")).port_note().expect("HTTP to 4317");
        assert!(note.contains("port 4317") && note.contains("--protocol grpc") && note.contains("port 4318"), "{note}");
        for (e, p) in [("http://c:4317", "grpc"), ("http://c:4318", "http/protobuf"), ("http://c:7070", "grpc"), ("http://c", "grpc")] {
            assert_eq!(ok(&[], &o(e, p)).port_note(), None, "{e} {p}");
        }
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let c = ok(&[("OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", " "), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], &Overrides::default());
        assert_eq!(c.protocol, Protocol::Grpc);
    }

    #[test]
    fn headers_are_percent_decoded_lower_cased_and_overridden_by_name() {
        let c = ok(
            &[
                ("OTEL_EXPORTER_OTLP_HEADERS", "ignored=1"),
                ("OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "Authorization=Basic%20abc%3D, x-scope-orgid = t1 ,"),
            ],
            &Overrides { headers: vec![("X-Scope-OrgID".into(), "t2".into())], ..Default::default() },
        );
        assert_eq!(c.headers, vec![("authorization".into(), "Basic abc=".into()), ("x-scope-orgid".into(), "t2".into())]);
    }

    #[test]
    fn bad_settings_are_refused_with_their_origin_and_what_was_expected() {
        let none = Overrides::default();
        let e = config(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")], &none).unwrap_err();
        assert_eq!(e.to_string(), "OTEL_EXPORTER_OTLP_PROTOCOL: unknown protocol \"http/json\": expected \"grpc\" or \"http/protobuf\"");
        let e = config(&[], &Overrides { endpoint: Some("collector:4318".into()), ..Default::default() }).unwrap_err();
        assert_eq!(e.to_string(), "override: invalid endpoint \"collector:4318\": expected a URL such as http://localhost:4318 (http/protobuf)");
        let grpc = Overrides { endpoint: Some("collector:4317".into()), protocol: Some("grpc".into()), ..Default::default() };
        assert_eq!(
            config(&[], &grpc).unwrap_err().to_string(),
            "override: invalid endpoint \"collector:4317\": expected a URL such as http://localhost:4317 (grpc)"
        );
        let e = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://")], &none).unwrap_err();
        assert!(e.to_string().starts_with("OTEL_EXPORTER_OTLP_ENDPOINT: invalid endpoint \"http://\": "), "{e}");
        let e = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://c:21")], &none).unwrap_err();
        assert!(e.to_string().contains("scheme \"ftp\" is not supported"), "{e}");
        let e = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4318")], &none).unwrap_err();
        assert!(e.to_string().contains("TLS (https) is supported over grpc only"), "{e}");
        let e = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:p@c:4318")], &none).unwrap_err();
        assert!(e.to_string().contains("credentials"), "{e}");
        let e = config(&[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")], &none).unwrap_err();
        assert_eq!(e.to_string(), "OTEL_EXPORTER_OTLP_HEADERS: invalid header \"novalue\": expected key=value");
        let e = config(&[("OTEL_EXPORTER_OTLP_HEADERS", "bad name=1")], &none).unwrap_err();
        assert!(e.to_string().contains("only letters, digits"), "{e}");
        let e = config(&[("OTEL_EXPORTER_OTLP_HEADERS", "k=%0A")], &none).unwrap_err();
        assert!(e.to_string().contains("printable ASCII"), "{e}");
        let e = config(&[("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "10s")], &none).unwrap_err();
        assert_eq!(e.to_string(), "OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT: invalid timeout \"10s\": expected a whole number of milliseconds > 0");
        let e = config(&[("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd")], &none).unwrap_err();
        assert!(e.to_string().contains("expected \"gzip\" or \"none\""), "{e}");
        let e = config(&[], &Overrides { timeout: Some(Duration::ZERO), ..Default::default() }).unwrap_err();
        assert!(matches!(e, ConfigError::Timeout { .. }), "{e}");
    }

    #[test]
    fn timeout_and_compression_come_from_the_variables() {
        let c = ok(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"), ("OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION", "gzip")], &Overrides::default());
        assert_eq!((c.timeout, c.compression), (Duration::from_millis(2500), Compression::Gzip));
        let c = ok(&[("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")], &Overrides { compression: Some("none".into()), ..Default::default() });
        assert_eq!(c.compression, Compression::None);
    }
}
