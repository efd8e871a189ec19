//! What a tracked process is called in profiles: its OTLP resource (the
//! process context's resource attributes, with `service.name`, `process.pid`,
//! `process.executable.*` and `host.name` added when missing, and where it runs:
//! its namespace pid, container and pod) and its service name.

use super::container::{read_placement, Placement};
use super::process_context_proto::{any_value, as_str, string_value, AnyValue, KeyValue, Resource};
use super::Discovery;

/// The OTLP resource of a process: its process context's resource attributes,
/// with `service.name` = `unknown_service:<comm>` when it has none, plus
/// `process.executable.name`/`.path`, `host.name` and where it runs
/// ([`placement_attributes`]). `process.pid` is the pid this reader knows it
/// by, whatever the process published: in a PID namespace of its own a service
/// publishes its pid there, which names no process on the host.
pub fn resource_of(d: &Discovery, host_name: &str) -> Resource {
    let pid = d.pid;
    let mut attributes: Vec<KeyValue> = d.context().and_then(|pc| pc.decoded.resource.as_ref()).map(|r| r.attributes.clone()).unwrap_or_default();
    let has = |attrs: &[KeyValue], k: &str| attrs.iter().any(|kv| kv.key == k);
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|s| s.trim_end().to_string()).unwrap_or_default();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok().map(|p| p.to_string_lossy().into_owned());
    if !has(&attributes, "service.name") {
        attributes.push(kv("service.name", string_value(format!("unknown_service:{comm}"))));
    }
    attributes.retain(|kv| kv.key != "process.pid");
    attributes.push(kv("process.pid", int_value(pid as i64)));
    let mut add = |k: &str, v: AnyValue| {
        if !has(&attributes, k) {
            attributes.push(kv(k, v));
        }
    };
    // Unreadable (the process exited, or /proc is not ours to read): nothing to add.
    for (k, v) in read_placement(pid).map(|p| placement_attributes(&p)).unwrap_or_default() {
        add(k, v);
    }
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

/// The semantic conventions' attributes of where a process runs: `process.vpid`
/// (its pid in its own PID namespace, when that is not the reader's),
/// `container.id`, `container.runtime.name` and `k8s.pod.uid`, those known.
pub fn placement_attributes(p: &Placement) -> Vec<(&'static str, AnyValue)> {
    let mut out = Vec::new();
    if let Some(vpid) = p.namespace_pid {
        out.push(("process.vpid", int_value(vpid as i64)));
    }
    if let Some(id) = &p.container.id {
        out.push(("container.id", string_value(id.clone())));
    }
    if let Some(runtime) = p.container.runtime {
        out.push(("container.runtime.name", string_value(runtime)));
    }
    if let Some(uid) = &p.container.pod_uid {
        out.push(("k8s.pod.uid", string_value(uid.clone())));
    }
    out
}

fn int_value(v: i64) -> AnyValue {
    AnyValue { value: Some(any_value::Value::IntValue(v)) }
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
    KeyValue { key: key.to_string(), value: Some(value) }
}
