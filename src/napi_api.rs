//! The JavaScript API. The calls made on hot paths (`setSpanContext`, `clearSpanContext` on a
//! switch that does not use the typed-array fast path; `attributeKeyCount` once per new span) are
//! registered as raw Node-API callbacks: napi-rs's generated wrappers cost ~20 ns per call without
//! arguments and ~100 ns with, a raw callback a few ns. The rest goes through napi-rs.

use std::ffi::{c_void, CString};
use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys::{self, napi_callback_info, napi_env, napi_value};
use napi_derive::napi;

use crate::ids::{self, ErrorKind, IdError};
use crate::page::{page_size, Page};
use crate::record::{SpanContext, MAX_RECORD_LEN, SPAN_ID_LEN, TRACE_ID_LEN};
use crate::thread_state::{self, ThreadState};
use crate::tls::{self, Placement};

/// napi status: the runtime refuses external array buffers (a V8 sandbox build).
const NO_EXTERNAL_BUFFERS_ALLOWED: sys::napi_status = 22;

/// Per Node-API environment: the cached record view, or why there is none.
struct EnvData {
    view: sys::napi_ref,
    error: Option<String>,
}

#[napi(module_exports)]
pub fn init(exports: Object, env: Env) -> Result<()> {
    let raw_env = env.raw();
    let data = Box::new(unsafe { attach_thread(raw_env) });
    unsafe {
        check(sys::napi_set_instance_data(raw_env, Box::into_raw(data).cast(), Some(drop_env_data), ptr::null_mut()))?;
        // Runs on this environment's own thread at teardown (worker exit, process exit).
        check(sys::napi_add_env_cleanup_hook(raw_env, Some(detach_thread), ptr::null_mut()))?;
        define(raw_env, exports.raw(), c"setSpanContext", set_span_context)?;
        define(raw_env, exports.raw(), c"clearSpanContext", clear_span_context)?;
        define(raw_env, exports.raw(), c"recordView", record_view)?;
        define(raw_env, exports.raw(), c"attributeKeyCount", attribute_key_count)?;
        define(raw_env, exports.raw(), c"threadCpuTimeNs", thread_cpu_time_ns)?;
    }
    Ok(())
}

/// Gives this thread its page (or joins the one it has) and builds this environment's view of it.
unsafe fn attach_thread(env: napi_env) -> EnvData {
    if let Some(state) = thread_state::retain() {
        return match external_view(env, &state.page) {
            Ok(view) => EnvData { view, error: None },
            Err(status) => EnvData { view: ptr::null_mut(), error: Some(format!("recordView() unavailable in a second environment on this thread (napi status {status})")) },
        };
    }
    let forced_heap = std::env::var_os("OTEL_THREAD_CTX_HEAP_PAGE").is_some();
    let mapped = if forced_heap { None } else { Some(Page::map()) };
    match mapped {
        Some(Ok(page)) => match external_view(env, &page) {
            Ok(view) => {
                let _ = thread_state::install(page);
                return EnvData { view, error: None };
            }
            Err(NO_EXTERNAL_BUFFERS_ALLOWED) => {}
            Err(status) => return EnvData { view: ptr::null_mut(), error: Some(format!("napi_create_external_arraybuffer failed (status {status})")) },
        },
        Some(Err(e)) => return EnvData { view: ptr::null_mut(), error: Some(format!("mmap of the record page failed: {e}")) },
        None => {}
    }
    // No external buffers: let V8 allocate two pages and use the aligned one inside (backing
    // stores never move); a strong reference keeps it alive until the environment ends.
    match heap_view(env) {
        Ok((view, page_ptr)) => {
            let _ = thread_state::install(Page::borrow(page_ptr));
            EnvData { view, error: None }
        }
        Err(status) => EnvData { view: ptr::null_mut(), error: Some(format!("could not allocate the record page in an ArrayBuffer (status {status})")) },
    }
}

unsafe fn external_view(env: napi_env, page: &Page) -> std::result::Result<sys::napi_ref, sys::napi_status> {
    let mut ab = ptr::null_mut();
    let st = sys::napi_create_external_arraybuffer(env, page.as_ptr().cast(), page.len(), None, ptr::null_mut(), &mut ab);
    if st != sys::Status::napi_ok {
        return Err(st);
    }
    typed_view(env, ab, 0)
}

unsafe fn heap_view(env: napi_env) -> std::result::Result<(sys::napi_ref, *mut u8), sys::napi_status> {
    let size = page_size();
    let (mut ab, mut data) = (ptr::null_mut(), ptr::null_mut::<c_void>());
    let st = sys::napi_create_arraybuffer(env, 2 * size, &mut data, &mut ab);
    if st != sys::Status::napi_ok {
        return Err(st);
    }
    let offset = (data as usize).next_multiple_of(size) - data as usize;
    let view = typed_view(env, ab, offset)?;
    Ok((view, data.cast::<u8>().add(offset)))
}

unsafe fn typed_view(env: napi_env, ab: napi_value, offset: usize) -> std::result::Result<sys::napi_ref, sys::napi_status> {
    let (mut view, mut r) = (ptr::null_mut(), ptr::null_mut());
    let st = sys::napi_create_typedarray(env, sys::TypedarrayType::uint8_array, MAX_RECORD_LEN, ab, offset, &mut view);
    if st != sys::Status::napi_ok {
        return Err(st);
    }
    let st = sys::napi_create_reference(env, view, 1, &mut r);
    if st != sys::Status::napi_ok {
        return Err(st);
    }
    Ok(r)
}

unsafe extern "C" fn detach_thread(_: *mut c_void) {
    thread_state::release();
}

unsafe extern "C" fn drop_env_data(_env: napi_env, data: *mut c_void, _hint: *mut c_void) {
    drop(Box::from_raw(data as *mut EnvData));
}

unsafe fn define(env: napi_env, exports: napi_value, name: &std::ffi::CStr, cb: unsafe extern "C" fn(napi_env, napi_callback_info) -> napi_value) -> Result<()> {
    let mut f = ptr::null_mut();
    check(sys::napi_create_function(env, name.as_ptr(), -1 /* NAPI_AUTO_LENGTH */, Some(cb), ptr::null_mut(), &mut f))?;
    check(sys::napi_set_named_property(env, exports, name.as_ptr(), f))
}

fn check(status: sys::napi_status) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::from_reason(format!("Node-API call failed with status {status}")))
    }
}

unsafe fn throw(env: napi_env, e: &IdError) {
    let code = CString::new(e.code()).unwrap_or_default();
    let msg = CString::new(format!("setSpanContext: {e}")).unwrap_or_default();
    match e.kind() {
        ErrorKind::Type => sys::napi_throw_type_error(env, code.as_ptr(), msg.as_ptr()),
        ErrorKind::Range => sys::napi_throw_range_error(env, code.as_ptr(), msg.as_ptr()),
    };
}

unsafe fn type_name(env: napi_env, v: napi_value) -> &'static str {
    let mut t = 0;
    sys::napi_typeof(env, v, &mut t);
    match t {
        sys::ValueType::napi_undefined => "undefined",
        sys::ValueType::napi_null => "null",
        sys::ValueType::napi_boolean => "a boolean",
        sys::ValueType::napi_number => "a number",
        sys::ValueType::napi_string => "a string",
        sys::ValueType::napi_symbol => "a symbol",
        sys::ValueType::napi_function => "a function",
        sys::ValueType::napi_bigint => "a bigint",
        _ => {
            let mut is_ta = false;
            sys::napi_is_typedarray(env, v, &mut is_ta);
            if is_ta { "a typed array that is not a Uint8Array" } else { "an object" }
        }
    }
}

/// Reads one id argument (hex string or Uint8Array) into `out` without touching the record.
/// Tries the string read first and asks for the type only when that fails: every Node-API call
/// costs a few ns, and this runs on each `setSpanContext`.
unsafe fn read_id(env: napi_env, v: napi_value, arg: &'static str, out: &mut [u8]) -> std::result::Result<(), IdError> {
    let hex = out.len() * 2;
    let mut buf = [0u16; 2 * TRACE_ID_LEN + 2];
    let mut len = 0usize;
    // Copies at most hex + 1 units: enough to tell "too long" without copying the rest.
    if sys::napi_get_value_string_utf16(env, v, buf.as_mut_ptr(), hex + 2, &mut len) == sys::Status::napi_ok {
        if len > hex {
            sys::napi_get_value_string_utf16(env, v, ptr::null_mut(), 0, &mut len);
        }
        return ids::decode_hex_utf16(arg, &buf[..len.min(hex + 1)], out).map_err(|e| match e {
            IdError::HexLength { arg, hex, .. } => IdError::HexLength { arg, hex, len },
            e => e,
        });
    }
    let mut is_ta = false;
    sys::napi_is_typedarray(env, v, &mut is_ta);
    if is_ta {
        let (mut ty, mut n, mut data) = (0, 0usize, ptr::null_mut::<c_void>());
        sys::napi_get_typedarray_info(env, v, &mut ty, &mut n, &mut data, ptr::null_mut(), ptr::null_mut());
        if ty == sys::TypedarrayType::uint8_array {
            let bytes: &[u8] = if n == 0 { &[] } else { std::slice::from_raw_parts(data as *const u8, n) };
            return ids::decode_bytes(arg, bytes, out);
        }
    }
    Err(IdError::WrongType { arg, hex, bytes: out.len(), got: type_name(env, v) })
}

unsafe fn parse_args(env: napi_env, info: napi_callback_info) -> std::result::Result<SpanContext, IdError> {
    let mut argc = 4usize;
    let mut argv = [ptr::null_mut(); 4];
    sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), ptr::null_mut());
    if argc > 3 {
        return Err(IdError::TooManyArgs { got: argc });
    }
    let mut sc = SpanContext { trace_id: [0; TRACE_ID_LEN], span_id: [0; SPAN_ID_LEN], flags: 1 };
    read_id(env, argv[0], "traceId", &mut sc.trace_id)?;
    read_id(env, argv[1], "spanId", &mut sc.span_id)?;
    let mut f = 0f64;
    if sys::napi_get_value_double(env, argv[2], &mut f) == sys::Status::napi_ok {
        sc.flags = ids::flags_from_f64(f)?;
    } else {
        let mut t = 0;
        sys::napi_typeof(env, argv[2], &mut t);
        if t != sys::ValueType::napi_undefined {
            return Err(IdError::FlagsType { got: type_name(env, argv[2]) });
        }
    }
    Ok(sc)
}

unsafe extern "C" fn set_span_context(env: napi_env, info: napi_callback_info) -> napi_value {
    match parse_args(env, info) {
        Ok(sc) => {
            if let Some(s) = thread_state::current() {
                s.record().publish(&sc);
            }
        }
        Err(e) => throw(env, &e),
    }
    ptr::null_mut()
}

unsafe extern "C" fn clear_span_context(_env: napi_env, _info: napi_callback_info) -> napi_value {
    if let Some(s) = thread_state::current() {
        s.record().clear();
    }
    ptr::null_mut()
}

unsafe extern "C" fn record_view(env: napi_env, _info: napi_callback_info) -> napi_value {
    let mut data = ptr::null_mut();
    sys::napi_get_instance_data(env, &mut data);
    let Some(d) = (data as *const EnvData).as_ref() else { return ptr::null_mut() };
    if d.view.is_null() {
        let msg = CString::new(format!("recordView: {}", d.error.as_deref().unwrap_or("no record page"))).unwrap_or_default();
        sys::napi_throw_error(env, c"ERR_OTEL_THREAD_CTX_NO_PAGE".as_ptr(), msg.as_ptr());
        return ptr::null_mut();
    }
    let mut v = ptr::null_mut();
    sys::napi_get_reference_value(env, d.view, &mut v);
    v
}

#[napi(object)]
pub struct JsSpanContext {
    pub trace_id: String,
    pub span_id: String,
    pub trace_flags: u32,
}

/// The span context published for this thread, read back from the record (what a reader sees).
#[napi]
pub fn get_span_context() -> Option<JsSpanContext> {
    let sc = thread_state::current()?.record().read()?;
    Some(JsSpanContext { trace_id: ids::to_hex(&sc.trace_id), span_id: ids::to_hex(&sc.span_id), trace_flags: sc.flags as u32 })
}

#[napi(object, use_nullable = true)]
pub struct ThreadInfo {
    /// Linux thread id of the calling JS thread.
    pub tid: i32,
    /// Address of the record (what `otel_thread_ctx_v1` holds), or null without a page.
    pub record_address: Option<BigInt>,
    /// Whether the page is mlock'ed.
    pub pinned: bool,
    /// Why the page is not pinned (or other page trouble), else null.
    pub pin_error: Option<String>,
    /// Whether fork children get a zeroed copy (MADV_WIPEONFORK).
    pub wipe_on_fork: bool,
    /// Static thread-pointer offset of `otel_thread_ctx_v1`, or null in dynamic TLS.
    pub tls_offset: Option<i64>,
    /// "static", "dynamic" or "unknown".
    pub tls_model: String,
    /// "mmap" (own anonymous mapping) or "arraybuffer" (V8-allocated, external buffers refused).
    pub page_backing: Option<String>,
    /// Why this thread has no record, else null.
    pub error: Option<String>,
}

#[napi]
pub fn thread_info(env: Env) -> ThreadInfo {
    let state: Option<&ThreadState> = thread_state::current().map(|s| &*s);
    let (tls_offset, tls_model) = match tls::placement() {
        Placement::Static { tp_offset } => (Some(tp_offset), "static"),
        Placement::Dynamic => (None, "dynamic"),
        Placement::Unknown => (None, "unknown"),
    };
    let env_error = unsafe {
        let mut data = ptr::null_mut();
        sys::napi_get_instance_data(env.raw(), &mut data);
        (data as *const EnvData).as_ref().and_then(|d| d.error.clone())
    };
    ThreadInfo {
        tid: unsafe { libc::gettid() },
        record_address: state.map(|s| BigInt::from(s.page.as_ptr() as u64)),
        pinned: state.is_some_and(|s| s.page.pinned()),
        pin_error: state.and_then(|s| s.page.pin_error.clone()),
        wipe_on_fork: state.is_some_and(|s| s.page.wipe_error.is_none()),
        tls_offset,
        tls_model: tls_model.to_string(),
        page_backing: state.map(|s| if s.page.is_mapped() { "mmap" } else { "arraybuffer" }.to_string()),
        error: if state.is_none() { Some(env_error.unwrap_or_else(|| "no record page on this thread".into())) } else { env_error },
    }
}

// ---------------------------------------------------------------------------------------------
// OTEP 4719 process context (src/process_ctx). Process-wide: any JS thread may call these. The JS
// layer (js/process-context.js) validates arguments with precise messages before calling.
// ---------------------------------------------------------------------------------------------

use std::sync::atomic::{AtomicU32, Ordering};

use crate::process_ctx::{self, AttrValue, ContextError};

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
        schema_version: process_ctx::SCHEMA_VERSION.to_string(),
    }
}

fn context_error(e: ContextError) -> Error {
    // Status InvalidArg -> code 'InvalidArg': js/process-context.js rethrows it as a RangeError.
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

/// Replaces the process context's resource attributes and (re)publishes OTEL_CTX.
#[napi]
pub fn publish_process_context(resource: Vec<ProcessAttribute>) -> Result<ProcessContextInfo> {
    let attrs = resource.into_iter().map(|a| (a.key, attr_value(a.value))).collect();
    process_ctx::writer().set_resource(attrs).map(to_js_info).map_err(context_error)
}

/// Appends keys to the process-wide attribute key map (known keys keep their index),
/// republishing when it grew; returns each key's index (the record's key byte).
#[napi]
pub fn append_attribute_keys(keys: Vec<String>) -> Result<Vec<u32>> {
    let mut writer = process_ctx::writer();
    let result = writer.append_keys(&keys).map_err(context_error);
    KEY_COUNT.store(writer.keys().len() as u32, Ordering::Release);
    result
}

/// The key map's length, readable without the Mutex: every thread asks once per new span.
static KEY_COUNT: AtomicU32 = AtomicU32::new(0);

/// The process-wide attribute key map (index = key byte in record attrs).
#[napi]
pub fn attribute_key_map() -> Vec<String> {
    process_ctx::writer().keys().to_vec()
}

/// Length of the key map: append-only, so it identifies the map's version cheaply.
unsafe extern "C" fn attribute_key_count(env: napi_env, _info: napi_callback_info) -> napi_value {
    let mut v = ptr::null_mut();
    sys::napi_create_uint32(env, KEY_COUNT.load(Ordering::Acquire), &mut v);
    v
}

/// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), in ns, as a double. For the
/// benchmarks (not part of the package API): unlike wall time it excludes what the hypervisor
/// steals from this shared VM, and unlike process.cpuUsage() it excludes V8's helper threads.
unsafe extern "C" fn thread_cpu_time_ns(env: napi_env, _info: napi_callback_info) -> napi_value {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    let mut v = ptr::null_mut();
    sys::napi_create_double(env, ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64, &mut v);
    v
}

/// The published process context's header facts, or null before the first publish.
#[napi]
pub fn process_context_info() -> Option<ProcessContextInfo> {
    process_ctx::writer().info().map(to_js_info)
}
