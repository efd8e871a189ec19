//! The one part of an HTTP/1.1 request the binary's two small servers read (`agent
//! --metrics-addr`, `report --serve`): its method and target, from a request line and headers
//! read up to their blank line, `max` bytes at most, within the connection's own timeouts.

use std::io::Read;
use std::net::TcpStream;

/// (method, path, query) of the request on `conn`; empty strings for what it did not send.
pub fn read_request(conn: &mut TcpStream, max: usize) -> std::io::Result<(String, String, String)> {
    let mut request = Vec::new();
    let mut buf = [0u8; 2048];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < max {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&request);
    let mut parts = line.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Ok((method.to_string(), path.to_string(), query.to_string()))
}
