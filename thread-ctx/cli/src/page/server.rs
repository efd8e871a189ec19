//! `report --serve`: the page and its data over plain HTTP/1.1, one thread per connection, as
//! `agent --metrics-addr` serves its metrics (no HTTP server crate is in the build, and a
//! local page of a few GET routes needs none). The data was summarised at start; a flame
//! graph is folded when asked for, from the profiles held.

use super::flames::{self, Flames, Of};
use super::html;
use super::summary::Summary;
use crate::console::println_stdout;
use crate::exit_codes::usage;
use crate::http_request::read_request;
use anyhow::Result;
use serde_json::Value;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// A browser that connects and says nothing holds its thread this long at most.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// A request line and headers beyond this are not the page's: answered 400.
const MAX_REQUEST: usize = 16 * 1024;

struct State {
    page: String,
    data: String,
    flames: Option<Flames>,
}

pub fn serve(addr: SocketAddr, summary: Summary, flames: Option<Flames>, meta: Value) -> Result<ExitCode> {
    let listener = TcpListener::bind(addr).map_err(|e| usage(format!("--serve: cannot listen on {addr}: {e}")))?;
    let mut data = summary.data;
    data["meta"] = meta;
    let state = Arc::new(State { page: html::page(None), data: data.to_string(), flames });
    drop(data);
    let local = listener.local_addr()?;
    println_stdout(&format!("thread-ctx: the page is on http://{local}/ (Ctrl-C stops it)"))?;
    for conn in listener.incoming().flatten() {
        let s = state.clone();
        // A client's fault ends its own connection, never the server.
        let _ = std::thread::Builder::new().name("page".into()).spawn(move || answer(conn, &s));
    }
    Ok(ExitCode::SUCCESS)
}

fn answer(mut conn: TcpStream, state: &State) -> std::io::Result<()> {
    conn.set_read_timeout(Some(IO_TIMEOUT))?;
    conn.set_write_timeout(Some(IO_TIMEOUT))?;
    let (method, path, query) = read_request(&mut conn, MAX_REQUEST)?;
    const HTML: &str = "text/html; charset=utf-8";
    const JSON: &str = "application/json";
    const TEXT: &str = "text/plain; charset=utf-8";
    let (status, content_type, body): (u16, &str, std::borrow::Cow<str>) = match (method.as_str(), path.as_str()) {
        ("GET", "/") => (200, HTML, state.page.as_str().into()),
        ("GET", "/api/data") => (200, JSON, state.data.as_str().into()),
        ("GET", "/api/flame") => flame(state, &query),
        ("GET", _) => (404, TEXT, "not found: / is the page\n".into()),
        _ => (405, TEXT, "only GET\n".into()),
    };
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Method Not Allowed",
    };
    write!(
        conn,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    conn.write_all(body.as_bytes())?;
    conn.flush()
}

/// `/api/flame?of=trace|route&key=…&kind=cpu|off-cpu|alloc`.
fn flame(state: &State, query: &str) -> (u16, &'static str, std::borrow::Cow<'static, str>) {
    let param = |name: &str| query.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| percent_decode(v));
    let Some(flames) = &state.flames else {
        return (404, "text/plain; charset=utf-8", "no profiles: give report --otlp FILE\n".into());
    };
    let of = param("of").and_then(|o| Of::parse(&o));
    let kind = param("kind").and_then(|k| flames::kind(&k));
    match (of, param("key"), kind) {
        (Some(of), Some(key), Some(kind)) => match flames.folded(of, &key, kind) {
            Some(v) => (200, "application/json", v.to_string().into()),
            None => (400, "text/plain; charset=utf-8", format!("key: {key:?} is not a trace id\n").into()),
        },
        _ => (400, "text/plain; charset=utf-8", "expected of=trace|route, key=…, kind=cpu|off-cpu|alloc\n".into()),
    }
}

/// A query value's `%XX` and `+` decoded; bytes that do not decode stay as they are.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit() => {
                let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                out.push(hex(b[i + 1]) * 16 + hex(b[i + 2]));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn query_values_are_percent_decoded() {
        assert_eq!(percent_decode("%2Fapi%2Fusers%2F%3Aid"), "/api/users/:id");
        assert_eq!(percent_decode("GET+%2Fx"), "GET /x");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
