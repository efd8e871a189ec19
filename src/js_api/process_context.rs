//! The OTEP 4719 process context (src/process_ctx) for JavaScript. Process-wide: any JS thread may
//! call these. The JS layer (js/process-context/process-context.js) validates arguments with
//! precise messages before calling; errors here carry status InvalidArg, which it rethrows as a
//! RangeError.

use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use napi::bindgen_prelude::*;
use napi::sys::{self, napi_callback_info, napi_env, napi_value};
use napi_derive::napi;

use super::ok;
use crate::process_ctx::{self, AttrValue, ContextError, Dropped, Origin, Schema};

/// One resource attribute: a string, number (integral -> int, else double), boolean or string[].
#[napi(object)]
pub struct ProcessAttribute {
    pub key: String,
    pub value: Either4<String, f64, bool, Vec<String>>,
}

#[napi(object, use_nullable = true)]
pub struct ProcessContextInfo {
    /// Address of the 32-byte OTEL_CTX header (the mapping's start).
    pub header_address: BigInt,
    pub payload_address: BigInt,
    pub payload_size: u32,
    /// CLOCK_BOOTTIME ns of the last publish.
    pub published_at: BigInt,
    pub publish_count: f64,
    /// "memfd" or "anonymous".
    pub backing: String,
    pub memfd_error: Option<String>,
    pub anon_name_error: Option<String>,
    pub dontfork_error: Option<String>,
    pub service_instance_id: String,
    pub key_count: u32,
    pub schema_version: String,
    /// Where the resource came from: "environment", "sdk" or "explicit" (null: keys only).
    pub origin: Option<String>,
    /// Resource attributes left out of the payload.
    pub dropped_attribute_count: u32,
}

/// A resource attribute left out, and why.
#[napi(object)]
pub struct DroppedAttribute {
    pub key: String,
    pub reason: String,
}

#[napi(object)]
pub struct PublishResult {
    pub info: ProcessContextInfo,
    pub dropped: Vec<DroppedAttribute>,
}

#[napi(object)]
pub struct AppendResult {
    pub indices: Vec<u32>,
    pub dropped: Vec<DroppedAttribute>,
}

fn to_js_info(i: process_ctx::Info) -> ProcessContextInfo {
    ProcessContextInfo {
        header_address: BigInt::from(i.header_address),
        payload_address: BigInt::from(i.payload_address),
        payload_size: i.payload_size,
        published_at: BigInt::from(i.published_at),
        publish_count: i.publish_count as f64,
        backing: i.backing.as_str().to_string(),
        memfd_error: i.memfd_error,
        anon_name_error: i.anon_name_error,
        dontfork_error: i.dontfork_error,
        service_instance_id: i.service_instance_id,
        key_count: i.key_count as u32,
        schema_version: i.schema.version().to_string(),
        origin: i.origin.map(|o| o.as_str().to_string()),
        dropped_attribute_count: i.dropped_attribute_count as u32,
    }
}

fn to_js_dropped(dropped: Dropped) -> Vec<DroppedAttribute> {
    dropped.into_iter().map(|(key, reason)| DroppedAttribute { key, reason: reason.describe() }).collect()
}

fn context_error(e: ContextError) -> Error {
    let status = if e.is_range() { Status::InvalidArg } else { Status::GenericFailure };
    Error::new(status, e.to_string())
}

fn attr_value(v: Either4<String, f64, bool, Vec<String>>) -> AttrValue {
    match v {
        Either4::A(s) => AttrValue::Str(s),
        Either4::B(n) if n.fract() == 0.0 && n.abs() <= 9_007_199_254_740_991.0 => AttrValue::Int(n as i64),
        Either4::B(n) => AttrValue::Double(n),
        Either4::C(b) => AttrValue::Bool(b),
        Either4::D(a) => AttrValue::Strings(a),
    }
}

/// Replaces the process context's resource attributes and (re)publishes OTEL_CTX. `origin`:
/// "environment", "sdk" or "explicit"; `droppedBefore`: attributes the caller left out.
#[napi]
pub fn publish_process_context(resource: Vec<ProcessAttribute>, origin: String, dropped_before: u32) -> Result<PublishResult> {
    let Some(origin) = Origin::parse(&origin) else {
        return Err(Error::new(Status::InvalidArg, format!("origin: expected \"environment\", \"sdk\" or \"explicit\", got {origin:?}")));
    };
    let attrs = resource.into_iter().map(|a| (a.key, attr_value(a.value))).collect();
    let published = process_ctx::writer().set_resource(attrs, origin, dropped_before as usize).map_err(context_error)?;
    Ok(PublishResult { info: to_js_info(published.info), dropped: to_js_dropped(published.dropped) })
}

/// Appends keys to the process-wide attribute key map (known keys keep their index),
/// republishing when it grew; returns each key's index (the record's key byte).
#[napi]
pub fn append_attribute_keys(keys: Vec<String>) -> Result<AppendResult> {
    let mut writer = process_ctx::writer();
    let result = writer.append_keys(&keys).map_err(context_error);
    KEY_COUNT.store(writer.keys().len() as u32, Ordering::Release);
    let (indices, dropped) = result?;
    Ok(AppendResult { indices, dropped: to_js_dropped(dropped) })
}

/// The key map's length, readable without the Mutex: every thread asks once per new span.
static KEY_COUNT: AtomicU32 = AtomicU32::new(0);

/// napi_no_external_buffers_allowed: a runtime that refuses external ArrayBuffers.
const NO_EXTERNAL_BUFFERS_ALLOWED: sys::napi_status = 22;

/// `keyCountView()`: a one-element Uint32Array over `KEY_COUNT` itself, or null where the runtime
/// allows no external ArrayBuffer. Every thread reads the process-wide count with a typed-array
/// load instead of a call per new span (a Node-API call is ~170 instructions per span of the span
/// workload, callgrind, Node 24). The JS layer only reads it.
pub unsafe extern "C" fn key_count_view(env: napi_env, _info: napi_callback_info) -> napi_value {
    let (mut ab, mut view) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: a static, so the memory outlives every ArrayBuffer over it; no finalizer (not V8's
    // to free); valid out pointer.
    let st = unsafe { sys::napi_create_external_arraybuffer(env, KEY_COUNT.as_ptr().cast(), 4, None, ptr::null_mut(), &mut ab) };
    if st == NO_EXTERNAL_BUFFERS_ALLOWED {
        // SAFETY: live env; valid out pointer.
        return if ok(unsafe { sys::napi_get_null(env, &mut view) }) { view } else { ptr::null_mut() };
    }
    if !ok(st) {
        return ptr::null_mut();
    }
    // SAFETY: live env, a fresh 4-byte ArrayBuffer; valid out pointer.
    let st = unsafe { sys::napi_create_typedarray(env, sys::TypedarrayType::uint32_array, 1, ab, 0, &mut view) };
    if ok(st) {
        view
    } else {
        ptr::null_mut()
    }
}

/// Publishes V8's heap sampling interval (bytes) in the process context, for readers that scale
/// allocation samples; the first interval asked for in the process stays. Returns the one in effect.
#[napi]
pub fn publish_heap_sampling_interval(bytes: f64) -> Result<f64> {
    if !(bytes.is_finite() && bytes >= 1.0 && bytes.fract() == 0.0 && bytes <= 9_007_199_254_740_991.0) {
        return Err(Error::new(Status::InvalidArg, format!("bytes: expected a positive integer, got {bytes}")));
    }
    process_ctx::writer().set_heap_sampling_interval(bytes as u64).map(|b| b as f64).map_err(context_error)
}

/// The heap sampling interval published for this process, or null.
#[napi]
pub fn heap_sampling_interval() -> Option<f64> {
    process_ctx::writer().heap_sampling_interval().map(|b| b as f64)
}

/// The process-wide attribute key map (index = key byte in record attrs).
#[napi]
pub fn attribute_key_map() -> Vec<String> {
    process_ctx::writer().keys().to_vec()
}

/// `attributeKeyCount()`: the key map's length. Append-only, so it identifies the map's version.
pub unsafe extern "C" fn attribute_key_count(env: napi_env, _info: napi_callback_info) -> napi_value {
    let mut v = ptr::null_mut();
    // SAFETY: called by Node-API with a live env; valid out pointer.
    let status = unsafe { sys::napi_create_uint32(env, KEY_COUNT.load(Ordering::Acquire), &mut v) };
    if ok(status) {
        v
    } else {
        ptr::null_mut()
    }
}

/// The published process context's header facts, or null before the first publish.
#[napi]
pub fn process_context_info() -> Option<ProcessContextInfo> {
    process_ctx::writer().info().map(to_js_info)
}

/// Announces the thread-context schema in the process context, by its `threadlocal.schema_version`
/// (`"tlsdesc_v1_dev"`, `"tls_v1"` or `"nodejs_v1_dev"`). Returns the new facts, or null while
/// nothing is published yet (the schema then goes out with the first publish).
#[napi]
pub fn set_thread_context_schema(schema_version: String) -> Result<Option<ProcessContextInfo>> {
    let schema = Schema::of_version(&schema_version).ok_or_else(|| {
        let expected: Vec<String> = Schema::ALL.iter().map(|s| format!("{:?}", s.version())).collect();
        Error::new(Status::InvalidArg, format!("schemaVersion: expected {}, got {schema_version:?}", expected.join(", ")))
    })?;
    Ok(process_ctx::writer().set_schema(schema).map_err(context_error)?.map(to_js_info))
}
