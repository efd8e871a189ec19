//! OTEP 4719 process context: one `OTEL_CTX` mapping per process whose header points at a
//! protobuf `ProcessContext` (resource attributes + `threadlocal.*` attributes), republished on
//! every change. Process-wide (all JS threads share it) behind one Mutex; any thread may publish.

mod header;
mod mapping;
pub mod proto;

use std::sync::{LazyLock, Mutex, MutexGuard};

use prost::Message;

pub use mapping::Backing;
use mapping::Mapping;
use proto::{any_value::Value, KeyValue, ProcessContext, Resource};

/// The thread-context schema readers key on. The one place to change when the spec renames it:
/// every reader seen so far (eBPF profiler PR 1229, datadog-agent) and the OTEP 4947 text use
/// `tlsdesc_v1_dev` for the TLSDESC `otel_thread_ctx_v1` record.
pub const SCHEMA_VERSION: &str = "tlsdesc_v1_dev";
pub const SCHEMA_VERSION_KEY: &str = "threadlocal.schema_version";
pub const KEY_MAP_KEY: &str = "threadlocal.attribute_key_map";
/// Record attrs carry the key as one byte.
pub const MAX_KEYS: usize = 256;
const INSTANCE_ID_KEY: &str = "service.instance.id";

/// A resource attribute value as the JS layer hands it over.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    Strings(Vec<String>),
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ContextError {
    #[error("{arg}: expected non-empty strings, got an empty string at index {index}")]
    EmptyKey { arg: &'static str, index: usize },
    #[error("{arg}: expected unique keys, got {key:?} twice")]
    DuplicateKey { arg: &'static str, key: String },
    #[error("keys: expected at most {MAX_KEYS} keys in the attribute key map, got {got} ({existing} registered + {added} new)")]
    TooManyKeys { got: usize, existing: usize, added: usize },
    #[error("process context: could not map OTEL_CTX: {0}")]
    Map(String),
}

impl ContextError {
    /// Whether JS should see a RangeError (vs a plain Error).
    pub fn is_range(&self) -> bool {
        !matches!(self, ContextError::Map(_))
    }
}

/// What `processContextInfo()` reports.
#[derive(Debug, Clone)]
pub struct Info {
    pub header_address: u64,
    pub payload_address: u64,
    pub payload_size: u32,
    pub published_at: u64,
    pub publish_count: u64,
    pub backing: Backing,
    pub memfd_error: Option<String>,
    pub anon_name_error: Option<String>,
    pub dontfork_error: Option<String>,
    pub service_instance_id: String,
    pub key_count: usize,
}

pub struct Writer {
    pid: u32,
    mapping: Option<Mapping>,
    resource: Vec<KeyValue>,
    keys: Vec<String>,
    instance_id: String,
    /// The published payload; the one before it stays allocated for a reader still copying it.
    payload: Vec<u8>,
    previous_payload: Vec<u8>,
    published_at: u64,
    publish_count: u64,
}

impl Writer {
    pub fn new() -> Self {
        Writer {
            pid: std::process::id(),
            mapping: None,
            resource: Vec::new(),
            keys: Vec::new(),
            instance_id: new_instance_id(),
            payload: Vec::new(),
            previous_payload: Vec::new(),
            published_at: 0,
            publish_count: 0,
        }
    }

    /// Replaces the resource attributes and publishes. `service.instance.id` is added (generated
    /// once per process) when absent.
    pub fn set_resource(&mut self, attrs: Vec<(String, AttrValue)>) -> Result<Info, ContextError> {
        check_keys("resource", attrs.iter().map(|(k, _)| k.as_str()))?;
        self.refresh_after_fork();
        let mut resource: Vec<KeyValue> = attrs.into_iter().map(|(k, v)| KeyValue::new(k, to_proto(v))).collect();
        if !resource.iter().any(|kv| kv.key == INSTANCE_ID_KEY) {
            resource.push(KeyValue::string(INSTANCE_ID_KEY, self.instance_id.clone()));
        }
        let keys = self.keys.clone();
        self.publish(resource, keys)
    }

    /// Appends keys to the attribute key map (keys already in it keep their index) and
    /// republishes; returns each key's index. All or nothing.
    pub fn append_keys(&mut self, new_keys: &[String]) -> Result<Vec<u32>, ContextError> {
        check_keys("keys", new_keys.iter().map(String::as_str))?;
        let mut keys = self.keys.clone();
        let added: Vec<&String> = new_keys.iter().filter(|k| !self.keys.contains(k)).collect();
        if keys.len() + added.len() > MAX_KEYS {
            return Err(ContextError::TooManyKeys { got: keys.len() + added.len(), existing: keys.len(), added: added.len() });
        }
        keys.extend(added.iter().map(|k| (*k).clone()));
        if keys.len() != self.keys.len() || self.mapping.is_none() {
            self.refresh_after_fork();
            let resource = if self.resource.is_empty() { vec![KeyValue::string(INSTANCE_ID_KEY, self.instance_id.clone())] } else { self.resource.clone() };
            self.publish(resource, keys)?;
        }
        Ok(new_keys.iter().map(|k| self.keys.iter().position(|x| x == k).unwrap() as u32).collect())
    }

    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    pub fn info(&self) -> Option<Info> {
        let m = self.mapping.as_ref()?;
        Some(Info {
            header_address: m.as_ptr() as u64,
            payload_address: self.payload.as_ptr() as u64,
            payload_size: self.payload.len() as u32,
            published_at: self.published_at,
            publish_count: self.publish_count,
            backing: m.backing,
            memfd_error: m.memfd_error.clone(),
            anon_name_error: m.anon_name_error.clone(),
            dontfork_error: m.dontfork_error.clone(),
            service_instance_id: self.instance_id.clone(),
            key_count: self.keys.len(),
        })
    }

    /// A fork() child has no mapping (MADV_DONTFORK) and is another service instance.
    fn refresh_after_fork(&mut self) {
        let pid = std::process::id();
        if pid == self.pid {
            return;
        }
        if let Some(m) = self.mapping.take() {
            std::mem::forget(m); // not mapped in this process: nothing to unmap
        }
        self.pid = pid;
        self.instance_id = new_instance_id();
        self.published_at = 0;
        self.resource.retain(|kv| kv.key != INSTANCE_ID_KEY);
        self.resource.push(KeyValue::string(INSTANCE_ID_KEY, self.instance_id.clone()));
    }

    /// Encodes and publishes; the new resource and keys become the state only on success.
    fn publish(&mut self, resource: Vec<KeyValue>, keys: Vec<String>) -> Result<Info, ContextError> {
        let message = ProcessContext {
            resource: Some(Resource { attributes: resource.clone() }),
            attributes: vec![KeyValue::string(SCHEMA_VERSION_KEY, SCHEMA_VERSION), KeyValue::strings(KEY_MAP_KEY, &keys)],
        };
        let payload = message.encode_to_vec();
        let first = self.mapping.is_none();
        if first {
            self.mapping = Some(Mapping::create().map_err(|e| ContextError::Map(e.to_string()))?);
        }
        let base = self.mapping.as_ref().unwrap().as_ptr();
        let published_at = header::next_timestamp(self.published_at);
        // SAFETY: the mapping is at least a page; the Mutex around the Writer makes us its only writer.
        unsafe {
            if first {
                header::write_first(base, &payload, published_at)
            } else {
                header::write_update(base, &payload, published_at)
            }
        }
        self.previous_payload = std::mem::replace(&mut self.payload, payload);
        self.published_at = published_at;
        self.publish_count += 1;
        self.resource = resource;
        self.keys = keys;
        Ok(self.info().unwrap())
    }
}

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

/// The process's writer.
pub fn writer() -> MutexGuard<'static, Writer> {
    static WRITER: LazyLock<Mutex<Writer>> = LazyLock::new(|| Mutex::new(Writer::new()));
    // A panic cannot leave the Writer half-updated (state is committed after the header write).
    WRITER.lock().unwrap_or_else(|p| p.into_inner())
}

fn check_keys<'a>(arg: &'static str, keys: impl Iterator<Item = &'a str>) -> Result<(), ContextError> {
    let mut seen = std::collections::HashSet::new();
    for (index, k) in keys.enumerate() {
        if k.is_empty() {
            return Err(ContextError::EmptyKey { arg, index });
        }
        if !seen.insert(k) {
            return Err(ContextError::DuplicateKey { arg, key: k.to_string() });
        }
    }
    Ok(())
}

fn to_proto(v: AttrValue) -> Value {
    match v {
        AttrValue::Str(s) => Value::StringValue(s),
        AttrValue::Int(i) => Value::IntValue(i),
        AttrValue::Double(d) => Value::DoubleValue(d),
        AttrValue::Bool(b) => Value::BoolValue(b),
        AttrValue::Strings(a) => Value::ArrayValue(proto::ArrayValue {
            values: a.into_iter().map(|s| proto::AnyValue { value: Some(Value::StringValue(s)) }).collect(),
        }),
    }
}

/// A random (version 4) UUID, the usual form of `service.instance.id`.
fn new_instance_id() -> String {
    let mut b = [0u8; 16];
    // SAFETY: writes at most 16 bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != 16 {
        // No entropy source: still unique enough per host (pid + boot-time clock).
        let seed = header::next_timestamp(0) ^ ((std::process::id() as u64) << 40);
        b[..8].copy_from_slice(&seed.to_le_bytes());
        b[8..].copy_from_slice(&seed.rotate_left(29).to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

#[cfg(test)]
mod tests;
