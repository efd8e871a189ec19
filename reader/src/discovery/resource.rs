//! What a tracked process is called in profiles: its OTLP resource (the
//! process context's resource attributes, with `service.name`, `process.pid`,
//! `process.executable.*` and `host.name` added when missing) and its service name.

use super::process_context_proto::{any_value, as_str, string_value, AnyValue, KeyValue, Resource};
use super::Discovery;

/// The OTLP resource of a process: its process context's resource attributes,
/// with `service.name` = `unknown_service:<comm>` when it has none, plus
/// `process.pid`, `process.executable.name`/`.path` and `host.name`.
pub fn resource_of(d: &Discovery, host_name: &str) -> Resource {
    let pid = d.pid;
    let mut attributes: Vec<KeyValue> = d.context().and_then(|pc| pc.decoded.resource.as_ref()).map(|r| r.attributes.clone()).unwrap_or_default();
    let has = |attrs: &[KeyValue], k: &str| attrs.iter().any(|kv| kv.key == k);
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|s| s.trim_end().to_string()).unwrap_or_default();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok().map(|p| p.to_string_lossy().into_owned());
    if !has(&attributes, "service.name") {
        attributes.push(kv("service.name", string_value(format!("unknown_service:{comm}"))));
    }
    let mut add = |k: &str, v: AnyValue| {
        if !has(&attributes, k) {
            attributes.push(kv(k, v));
        }
    };
    add("process.pid", AnyValue { value: Some(any_value::Value::IntValue(pid as i64)) });
    if !comm.is_empty() {
        add("process.executable.name", string_value(comm.clone()));
    }
    if let Some(exe) = exe {
        add("process.executable.path", string_value(exe));
    }
    if !host_name.is_empty() {
        add("host.name", string_value(host_name));
    }
    Resource { attributes, ..Default::default() }
}

/// The resource's `service.name`.
pub fn service_name_of(resource: &Resource) -> String {
    resource
        .attributes
        .iter()
        .find(|kv| kv.key == "service.name")
        .and_then(|kv| kv.value.as_ref())
        .and_then(as_str)
        .unwrap_or("unknown_service")
        .to_string()
}

/// This host's name (gethostname), or "" when it cannot be read.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer and its length are valid; gethostname NUL-terminates within it or fails.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn kv(key: &str, value: AnyValue) -> KeyValue {
    KeyValue { key: key.to_string(), value: Some(value), ..Default::default() }
}
