//! OTEP 4719 process context: one `OTEL_CTX` mapping per process whose header points at a
//! protobuf `ProcessContext` (resource attributes + `threadlocal.*` attributes), republished on
//! every change. Process-wide (all JS threads share it) behind one Mutex; any thread may publish.

mod header;
pub mod limits;
mod mapping;
pub mod proto;

use std::sync::{LazyLock, Mutex, MutexGuard};

use prost::Message;

use limits::{DropReason, MAX_KEY_LEN, MAX_KEY_MAP_LEN, MAX_PAYLOAD_LEN};
pub use mapping::Backing;
use mapping::Mapping;
use proto::{any_value::Value, KeyValue, ProcessContext, Resource};

/// The thread-context schema readers key on for the TLSDESC `otel_thread_ctx_v1` record: every
/// reader seen so far (eBPF profiler PR 1229, datadog-agent) and the merged OTEP 4947 text use
/// `tlsdesc_v1_dev`, the default.
pub const SCHEMA_VERSION: &str = "tlsdesc_v1_dev";
/// The same record under the name OTEP 4947 gives it next, announced when asked for.
pub const TLS_V1_SCHEMA_VERSION: &str = "tls_v1";
/// The Node.js-specific discovery (`otel_thread_ctx_nodejs_v1` -> the AsyncContextFrame -> the
/// record), as the OpenTelemetry eBPF profiler's RFC #1861 and Datadog's writer name it. The RFC's
/// latest text fixes the V8 layout by schema and puts the one offset that moves between V8
/// versions in the TLS struct: it adds no process-context attribute.
pub const NODEJS_SCHEMA_VERSION: &str = "nodejs_v1_dev";

/// Which thread-context schema the process context announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// The OTEP 4947 TLS record (`otel_thread_ctx_v1`) as `tlsdesc_v1_dev`.
    TlsdescV1Dev,
    /// The same record as `tls_v1`.
    TlsV1,
    /// `nodejs_v1_dev`.
    NodeJs,
}

impl Schema {
    pub const ALL: [Schema; 3] = [Schema::TlsdescV1Dev, Schema::TlsV1, Schema::NodeJs];

    pub fn version(&self) -> &'static str {
        match self {
            Schema::TlsdescV1Dev => SCHEMA_VERSION,
            Schema::TlsV1 => TLS_V1_SCHEMA_VERSION,
            Schema::NodeJs => NODEJS_SCHEMA_VERSION,
        }
    }

    /// The schema whose `threadlocal.schema_version` is `version`.
    pub fn of_version(version: &str) -> Option<Schema> {
        Schema::ALL.into_iter().find(|s| s.version() == version)
    }

    /// The `threadlocal.*` attributes of the schema, key map included.
    fn attributes(&self, keys: &[String]) -> Vec<KeyValue> {
        vec![KeyValue::string(SCHEMA_VERSION_KEY, self.version()), KeyValue::strings(KEY_MAP_KEY, keys)]
    }
}
pub const SCHEMA_VERSION_KEY: &str = "threadlocal.schema_version";
pub const KEY_MAP_KEY: &str = "threadlocal.attribute_key_map";
/// Record attrs carry the key as one byte.
pub const MAX_KEYS: usize = 256;
const INSTANCE_ID_KEY: &str = "service.instance.id";
/// The mean sampling interval of V8's sampling heap profiler in this process, when the package
/// runs it: what an allocation sample of size s stands for depends on it (s / (1 - e^(-s/I))).
/// Not `threadlocal.*` (it says nothing about the record) and not in the resource (it describes
/// the profiler, not the service).
pub const HEAP_SAMPLING_INTERVAL_KEY: &str = "v8.heap_sampling_interval_bytes";

/// Where the published resource came from. A resource followed from SDK spans never replaces an
/// explicit one (the JS layer decides; the origin is kept here because it is process-wide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES (published before the SDK's is known).
    Environment,
    /// The resource of the OpenTelemetry SDK's spans.
    Sdk,
    /// Given by the application.
    Explicit,
}

impl Origin {
    pub fn parse(s: &str) -> Option<Origin> {
        match s {
            "environment" => Some(Origin::Environment),
            "sdk" => Some(Origin::Sdk),
            "explicit" => Some(Origin::Explicit),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Environment => "environment",
            Origin::Sdk => "sdk",
            Origin::Explicit => "explicit",
        }
    }
}

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
    #[error("keys[{index}]: expected a key of at most {MAX_KEY_LEN} UTF-8 bytes, got {len}")]
    KeyTooLong { index: usize, len: usize },
    #[error("keys: expected at most {MAX_KEY_MAP_LEN} UTF-8 bytes of keys in the attribute key map, got {got}")]
    KeyMapTooLong { got: usize },
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
    pub schema: Schema,
    pub origin: Option<Origin>,
    /// Resource attributes left out of the published payload (by the JS layer or by the limits).
    pub dropped_attribute_count: usize,
}

/// Resource attributes the payload limits left out, and why.
pub type Dropped = Vec<(String, DropReason)>;

/// A publish's outcome: the new facts, and the attributes the limits left out.
#[derive(Debug, Clone)]
pub struct Published {
    pub info: Info,
    pub dropped: Dropped,
}

pub struct Writer {
    pid: u32,
    mapping: Option<Mapping>,
    /// The resource as given (with `service.instance.id`), before the limits: refitted on every
    /// publish, since the key map takes part of the same payload budget.
    resource: Vec<KeyValue>,
    origin: Option<Origin>,
    /// Attributes the JS layer already left out of `resource` (unpublishable values).
    dropped_before: usize,
    dropped_count: usize,
    keys: Vec<String>,
    /// HEAP_SAMPLING_INTERVAL_KEY's value: the first interval asked for (one per process).
    heap_sampling_interval: Option<u64>,
    schema: Schema,
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
            origin: None,
            dropped_before: 0,
            dropped_count: 0,
            keys: Vec::new(),
            heap_sampling_interval: None,
            schema: Schema::TlsdescV1Dev,
            instance_id: new_instance_id(),
            payload: Vec::new(),
            previous_payload: Vec::new(),
            published_at: 0,
            publish_count: 0,
        }
    }

    /// Replaces the resource attributes and publishes. `service.instance.id` is added (generated
    /// once per process) when absent. `dropped_before`: attributes the caller already left out.
    pub fn set_resource(&mut self, attrs: Vec<(String, AttrValue)>, origin: Origin, dropped_before: usize) -> Result<Published, ContextError> {
        check_keys("resource", attrs.iter().map(|(k, _)| k.as_str()))?;
        self.refresh_after_fork();
        let mut resource: Vec<KeyValue> = attrs.into_iter().map(|(k, v)| KeyValue::new(k, to_proto(v))).collect();
        if !resource.iter().any(|kv| kv.key == INSTANCE_ID_KEY) {
            resource.push(KeyValue::string(INSTANCE_ID_KEY, self.instance_id.clone()));
        }
        let keys = self.keys.clone();
        self.publish(resource, Some(origin), dropped_before, keys)
    }

    /// Appends keys to the attribute key map (keys already in it keep their index) and
    /// republishes; returns each key's index, and the resource attributes the grown map pushed
    /// out of the payload budget. All or nothing.
    pub fn append_keys(&mut self, new_keys: &[String]) -> Result<(Vec<u32>, Dropped), ContextError> {
        check_keys("keys", new_keys.iter().map(String::as_str))?;
        if let Some((index, k)) = new_keys.iter().enumerate().find(|(_, k)| k.len() > MAX_KEY_LEN) {
            return Err(ContextError::KeyTooLong { index, len: k.len() });
        }
        let mut keys = self.keys.clone();
        let added: Vec<&String> = new_keys.iter().filter(|k| !self.keys.contains(k)).collect();
        if keys.len() + added.len() > MAX_KEYS {
            return Err(ContextError::TooManyKeys { got: keys.len() + added.len(), existing: keys.len(), added: added.len() });
        }
        keys.extend(added.iter().map(|k| (*k).clone()));
        let total: usize = keys.iter().map(String::len).sum();
        if total > MAX_KEY_MAP_LEN {
            return Err(ContextError::KeyMapTooLong { got: total });
        }
        let mut dropped = Vec::new();
        if keys.len() != self.keys.len() || self.mapping.is_none() {
            self.refresh_after_fork();
            let resource =
                if self.resource.is_empty() { vec![KeyValue::string(INSTANCE_ID_KEY, self.instance_id.clone())] } else { self.resource.clone() };
            dropped = self.publish(resource, self.origin, self.dropped_before, keys)?.dropped;
        }
        let indices = new_keys.iter().map(|k| self.keys.iter().position(|x| x == k).unwrap() as u32).collect();
        Ok((indices, dropped))
    }

    /// Publishes V8's heap sampling interval (bytes) with the process context; the first one asked
    /// for stays, since a reader scales every sample of the process by one interval. Returns the
    /// interval in effect. Goes out with the next publish when nothing was published yet.
    pub fn set_heap_sampling_interval(&mut self, bytes: u64) -> Result<u64, ContextError> {
        if let Some(kept) = self.heap_sampling_interval {
            return Ok(kept);
        }
        self.heap_sampling_interval = Some(bytes);
        if self.mapping.is_some() {
            self.refresh_after_fork();
            let (resource, keys) = (self.resource.clone(), self.keys.clone());
            if let Err(e) = self.publish(resource, self.origin, self.dropped_before, keys) {
                self.heap_sampling_interval = None;
                return Err(e);
            }
        }
        Ok(bytes)
    }

    pub fn heap_sampling_interval(&self) -> Option<u64> {
        self.heap_sampling_interval
    }

    /// Announces `schema` (the last enabled context manager's) and republishes when it changed
    /// and something was published already; otherwise it goes out with the first publish.
    pub fn set_schema(&mut self, schema: Schema) -> Result<Option<Info>, ContextError> {
        if schema == self.schema {
            return Ok(self.info());
        }
        self.schema = schema;
        if self.mapping.is_none() {
            return Ok(None);
        }
        self.refresh_after_fork();
        let (resource, keys) = (self.resource.clone(), self.keys.clone());
        Ok(Some(self.publish(resource, self.origin, self.dropped_before, keys)?.info))
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
            schema: self.schema,
            origin: self.origin,
            dropped_attribute_count: self.dropped_count,
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

    /// Fits the resource to the payload limits, encodes and publishes; the new state is kept only
    /// on success.
    fn publish(
        &mut self,
        resource: Vec<KeyValue>,
        origin: Option<Origin>,
        dropped_before: usize,
        keys: Vec<String>,
    ) -> Result<Published, ContextError> {
        let attributes = with_heap_sampling_interval(self.schema.attributes(&keys), self.heap_sampling_interval);
        // Everything but the resource's attributes, plus the resource field's tag and a length
        // varint of up to 3 bytes.
        let fixed = ProcessContext { resource: Some(Resource { attributes: Vec::new() }), attributes: attributes.clone() }.encoded_len() + 3;
        let (kept, dropped) = limits::fit(&resource, MAX_PAYLOAD_LEN.saturating_sub(fixed));
        let payload = ProcessContext { resource: Some(Resource { attributes: kept }), attributes }.encode_to_vec();
        debug_assert!(payload.len() <= MAX_PAYLOAD_LEN, "payload of {} bytes", payload.len());
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
        self.origin = origin;
        self.dropped_before = dropped_before;
        self.dropped_count = dropped_before + dropped.len();
        self.keys = keys;
        Ok(Published { info: self.info().unwrap(), dropped })
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

fn with_heap_sampling_interval(mut attributes: Vec<KeyValue>, interval: Option<u64>) -> Vec<KeyValue> {
    if let Some(bytes) = interval {
        attributes.push(KeyValue::new(HEAP_SAMPLING_INTERVAL_KEY, Value::IntValue(bytes.min(i64::MAX as u64) as i64)));
    }
    attributes
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
        AttrValue::Strings(a) => {
            Value::ArrayValue(proto::ArrayValue { values: a.into_iter().map(|s| proto::AnyValue { value: Some(Value::StringValue(s)) }).collect() })
        }
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
