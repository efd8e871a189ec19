//! `agent --metrics-addr`: a plain HTTP/1.1 endpoint on its own thread serving `/metrics` (the
//! Prometheus text of agent_metrics.rs) and `/healthz` (200 once the BPF programs are loaded and
//! while windows keep ending), for a scraper and for probes. Two GET routes answered one
//! connection at a time: no HTTP server crate is in the build (hyper's server side would bring
//! a runtime into the sampling process for a scrape every 15 s or so).

use crate::agent_metrics::{resident_bytes, AgentMetrics};
use crate::exit_codes::usage;
use crate::http_request::read_request;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A scraper that connects and says nothing holds the (single) serving thread this long at most.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// A request line and headers beyond this are not a scrape: answered 400.
const MAX_REQUEST: usize = 8192;

/// What the endpoint serves, updated by the sampling loop.
pub struct Shared {
    pub metrics: AgentMetrics,
    /// When the BPF programs were loaded (None: not yet), and when the last window ended.
    ready_at: Option<Instant>,
    last_window: Option<Instant>,
    /// /healthz fails once no window has ended for this long (three windows, at least 30 s:
    /// a busy host may delay one window, not three).
    stale_after: Duration,
}

impl Shared {
    pub fn ready(&mut self) {
        self.ready_at = Some(Instant::now());
    }

    pub fn window_ended(&mut self) {
        self.last_window = Some(Instant::now());
    }

    fn health(&self) -> (u16, String) {
        let Some(ready_at) = self.ready_at else { return (503, "starting: the BPF programs are not loaded yet".into()) };
        let since = self.last_window.unwrap_or(ready_at).elapsed();
        if since > self.stale_after {
            return (503, format!("no window has ended for {:.0}s (expected one every interval)", since.as_secs_f64()));
        }
        (200, "ok".into())
    }
}

/// The address `--metrics-addr` names: loopback only unless `allow_remote` (the metrics say how
/// busy the host's services are; a pod's own network namespace is where a remote address fits).
pub fn parse_addr(value: &str, allow_remote: bool) -> anyhow::Result<SocketAddr> {
    let addr: SocketAddr = value
        .parse()
        .map_err(|_| usage(format!("--metrics-addr: {value:?} is not an address (expected IP:PORT, e.g. 127.0.0.1:9465 or [::1]:9465)")))?;
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(usage(format!(
            "--metrics-addr: {addr} is not a loopback address (expected 127.0.0.1:PORT or [::1]:PORT; \
             add --metrics-allow-remote to serve the agent's metrics on other interfaces)"
        )));
    }
    Ok(addr)
}

/// Binds `addr` and serves it on a thread of its own; the error says why it cannot (the caller
/// samples on without the endpoint: a port another service took must not stop the profiler).
pub fn start(addr: SocketAddr, interval: Duration) -> Result<Arc<Mutex<Shared>>, String> {
    let listener =
        TcpListener::bind(addr).map_err(|e| format!("--metrics-addr: cannot listen on {addr}: {e}; running without the metrics endpoint"))?;
    let stale_after = (interval * 3).max(Duration::from_secs(30));
    let shared = Arc::new(Mutex::new(Shared { metrics: AgentMetrics::default(), ready_at: None, last_window: None, stale_after }));
    let s = shared.clone();
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                // A client's fault ends its own connection, never the thread.
                let _ = answer(conn, &s);
            }
        })
        .map_err(|e| format!("--metrics-addr: starting its thread: {e}; running without the metrics endpoint"))?;
    Ok(shared)
}

fn answer(mut conn: TcpStream, shared: &Mutex<Shared>) -> std::io::Result<()> {
    conn.set_read_timeout(Some(IO_TIMEOUT))?;
    conn.set_write_timeout(Some(IO_TIMEOUT))?;
    let (method, path, _) = read_request(&mut conn, MAX_REQUEST)?;
    let (status, content_type, body) = match (method.as_str(), path.as_str()) {
        ("GET", "/metrics") => {
            let text = shared.lock().map(|s| s.metrics.render(resident_bytes())).unwrap_or_default();
            (200, "text/plain; version=0.0.4; charset=utf-8", text)
        }
        ("GET", "/healthz") => {
            let (status, text) = shared.lock().map(|s| s.health()).unwrap_or((500, "the metrics state is poisoned".into()));
            (status, "text/plain; charset=utf-8", text + "\n")
        }
        ("GET", _) => (404, "text/plain; charset=utf-8", "not found: /metrics or /healthz\n".into()),
        _ => (405, "text/plain; charset=utf-8", "only GET\n".into()),
    };
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    write!(conn, "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())?;
    conn.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_address_is_refused_unless_allowed_and_a_bad_one_is_named() {
        assert!(parse_addr("127.0.0.1:9465", false).is_ok());
        assert!(parse_addr("[::1]:9465", false).is_ok());
        let e = parse_addr("0.0.0.0:9465", false).unwrap_err().to_string();
        assert!(e.contains("--metrics-addr: 0.0.0.0:9465 is not a loopback address") && e.contains("--metrics-allow-remote"), "{e}");
        assert!(parse_addr("0.0.0.0:9465", true).is_ok());
        let e = parse_addr("localhost", false).unwrap_err().to_string();
        assert!(e.contains("--metrics-addr: \"localhost\" is not an address (expected IP:PORT"), "{e}");
    }
}
