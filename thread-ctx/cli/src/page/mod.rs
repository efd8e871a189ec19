//! `thread-ctx report --serve ADDR` and `report --html FILE`: the page of a Collector's files,
//! the traces file (`--traces`) and the profiles file (`--otlp`), each read as `report` reads it:
//! routes and the causes of their slowest requests, a request's spans across services with
//! each span's cause bar and the connector's critical path, flame graphs of a request, a route
//! or a holder, and who made whom wait. Summarised once at start (`summary.rs`, `flames.rs`),
//! then served on loopback (`server.rs`) or written as one file with its data (`html.rs`).

mod flames;
mod html;
mod server;
mod summary;

use crate::console::say;
use crate::exit_codes::{existing_file, usage};
use anyhow::Result;
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The page's flags of `report`.
#[derive(clap::Args, Debug, Default)]
pub struct PageArgs {
    /// Serve the page of --traces (and --otlp's flame graphs) on this address: PORT or IP:PORT,
    /// loopback unless --serve-remote (e.g. 127.0.0.1:8080; port 0 picks a free one).
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<String>,
    /// Serve on an address that is not loopback (the page shows routes, lines and trace ids).
    #[arg(long, requires = "serve")]
    pub serve_remote: bool,
    /// Write the page as one self-contained HTML file (its data and scripts inside, nothing fetched).
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// With --serve/--html: link each request to its trace in this Jaeger UI (e.g. http://127.0.0.1:16686).
    #[arg(long, value_name = "URL")]
    pub jaeger: Option<String>,
}

impl PageArgs {
    pub fn wanted(&self) -> bool {
        self.serve.is_some() || self.html.is_some()
    }
}

/// `--serve` or `--html` over `traces` and, when given, `profiles`.
pub fn run(page: &PageArgs, traces: Option<&Path>, profiles: Option<&Path>) -> Result<ExitCode> {
    let Some(traces) = traces else {
        return Err(usage("--serve/--html: give --traces FILE (the spans the page lists; --otlp FILE adds their flame graphs)"));
    };
    existing_file("--traces", traces)?;
    if let Some(p) = profiles {
        existing_file("--otlp", p)?;
    }
    if let Some(url) = &page.jaeger {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(usage(format!("--jaeger: {url:?} is not an http:// or https:// URL (e.g. http://127.0.0.1:16686)")));
        }
    }
    let addr = page.serve.as_deref().map(|a| parse_addr(a, page.serve_remote)).transpose()?;
    let started = Instant::now();
    let summary = summary::summarise(traces)?;
    let flames = profiles.map(flames::Flames::read).transpose()?;
    let meta = json!({
        "traces_file": traces.display().to_string(),
        "profiles_file": profiles.map(|p| p.display().to_string()),
        "jaeger": page.jaeger.as_deref().map(|u| u.trim_end_matches('/')),
        "kinds": flames.as_ref().map(flames::Flames::kinds).unwrap_or_default(),
        "incomplete_tail": summary.scan.incomplete_tail,
    });
    say!(
        "thread-ctx: read {} spans of {} and {} in {:.1} s",
        summary.scan.spans,
        traces.display(),
        profiles.map_or("no profiles (--otlp FILE adds flame graphs)".to_string(), |p| format!("the profiles of {}", p.display())),
        started.elapsed().as_secs_f64()
    );
    if let Some(file) = &page.html {
        let text = html::export(&summary, flames.as_ref(), &meta);
        std::fs::write(file, text).map_err(|e| usage(format!("--html: cannot write {}: {e}", file.display())))?;
        say!("thread-ctx: wrote the page {} (open it in a browser: it fetches nothing)", file.display());
    }
    match addr {
        Some(addr) => server::serve(addr, summary, flames, meta),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// `--serve`'s value: PORT (on 127.0.0.1) or IP:PORT, loopback unless `remote`.
fn parse_addr(value: &str, remote: bool) -> Result<SocketAddr> {
    let addr: SocketAddr = match value.parse::<u16>() {
        Ok(port) => SocketAddr::from(([127, 0, 0, 1], port)),
        Err(_) => {
            value.parse().map_err(|_| usage(format!("--serve: {value:?} is not an address (expected PORT or IP:PORT, e.g. 127.0.0.1:8080)")))?
        }
    };
    if !addr.ip().is_loopback() && !remote {
        return Err(usage(format!("--serve: {addr} is not a loopback address (add --serve-remote to serve the page on other interfaces)")));
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_takes_a_port_or_a_loopback_address_and_names_a_bad_one() {
        assert_eq!(parse_addr("8080", false).unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(parse_addr("[::1]:0", false).unwrap().to_string(), "[::1]:0");
        let e = parse_addr("0.0.0.0:8080", false).unwrap_err().to_string();
        assert!(e.contains("--serve: 0.0.0.0:8080 is not a loopback address") && e.contains("--serve-remote"), "{e}");
        assert!(parse_addr("0.0.0.0:8080", true).is_ok());
        let e = parse_addr("localhost", false).unwrap_err().to_string();
        assert!(e.contains("--serve: \"localhost\" is not an address"), "{e}");
    }
}
