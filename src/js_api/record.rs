//! This thread's record: its page and view per Node-API environment, and the record calls.
//! Writes normally come from the JS layer through the view (`recordView`); `setSpanContext` is
//! the one native write, for hex ids (the SSE2 decoder below costs less than a JS one), and the
//! JS layer tells its thread writer about it.

use std::ffi::{c_void, CString};
use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys::{self, napi_callback_info, napi_env, napi_value};
use napi_derive::napi;

use super::{check, ok};
use crate::ids::{self, ErrorKind, IdError};
use crate::page::{page_size, Page};
use crate::record::{SpanContext, MAX_RECORD_LEN, SPAN_ID_LEN, TRACE_ID_LEN};
use crate::thread_state;
use crate::tls::{self, Placement};

/// napi status: the runtime refuses external array buffers (a V8 sandbox build).
const NO_EXTERNAL_BUFFERS_ALLOWED: sys::napi_status = 22;

/// Per Node-API environment: the cached record view, or why there is none.
struct EnvData {
    view: sys::napi_ref,
    error: Option<String>,
}

impl EnvData {
    fn failed(error: String) -> EnvData {
        EnvData { view: ptr::null_mut(), error: Some(error) }
    }
}

/// Gives this environment its view of the thread's page (mapping the page on the thread's first
/// environment) and arranges the teardown.
///
/// # Safety
/// `env` must be a live environment of the calling thread.
pub unsafe fn attach(env: napi_env) -> Result<()> {
    // SAFETY: per this function's contract.
    let data = Box::new(unsafe { attach_thread(env) });
    let data = Box::into_raw(data);
    // SAFETY: live env; Node-API owns `data` from here and frees it with drop_env_data.
    if let Err(e) = check(unsafe { sys::napi_set_instance_data(env, data.cast(), Some(drop_env_data), ptr::null_mut()) }) {
        // SAFETY: not handed over: still ours.
        drop(unsafe { Box::from_raw(data) });
        return Err(e);
    }
    // Runs on this environment's own thread at teardown (worker exit, process exit).
    // SAFETY: live env; the hook takes no data.
    check(unsafe { sys::napi_add_env_cleanup_hook(env, Some(detach_thread), ptr::null_mut()) })
}

/// # Safety
/// As `attach`.
unsafe fn attach_thread(env: napi_env) -> EnvData {
    if thread_state::retain() {
        // SAFETY: live env; the page lives until the last environment on this thread releases it.
        let view = thread_state::with_current(|s| unsafe { external_view(env, &s.page) });
        return match view {
            Some(Ok(view)) => EnvData { view, error: None },
            Some(Err(status)) => EnvData::failed(format!("recordView() unavailable in a second environment on this thread (napi status {status})")),
            None => EnvData::failed("no record page on this thread".into()),
        };
    }
    match Page::map() {
        // SAFETY: live env; the page is installed (kept alive) right after on success.
        Ok(page) => match unsafe { external_view(env, &page) } {
            Ok(view) => {
                let _ = thread_state::install(page);
                return EnvData { view, error: None };
            }
            Err(NO_EXTERNAL_BUFFERS_ALLOWED) => {}
            Err(status) => return EnvData::failed(format!("napi_create_external_arraybuffer failed (status {status})")),
        },
        Err(e) => return EnvData::failed(format!("mmap of the record page failed: {e}")),
    }
    // No external buffers: let V8 allocate two pages and use the aligned one inside (backing
    // stores never move); a strong reference keeps it alive until the environment ends.
    // SAFETY: live env.
    match unsafe { heap_view(env) } {
        Ok((view, page_ptr)) => {
            // SAFETY: page aligned, page_size() bytes inside the ArrayBuffer the strong reference
            // keeps alive until this environment's teardown, which releases the state first.
            let _ = thread_state::install(unsafe { Page::borrow(page_ptr) });
            EnvData { view, error: None }
        }
        Err(status) => EnvData::failed(format!("could not allocate the record page in an ArrayBuffer (status {status})")),
    }
}

/// # Safety
/// `env` live; `page` must outlive the view (it is the thread's page until its teardown).
unsafe fn external_view(env: napi_env, page: &Page) -> std::result::Result<sys::napi_ref, sys::napi_status> {
    // Test hook (CONTRIBUTING.md): Node-API answers as a runtime built with V8's sandbox does, which
    // official Node builds are not, so that the tests reach the refusal's handling above.
    if std::env::var_os("OTEL_THREAD_CTX_HEAP_PAGE").is_some() {
        return Err(NO_EXTERNAL_BUFFERS_ALLOWED);
    }
    let mut ab = ptr::null_mut();
    // SAFETY: the page is page_size() bytes; no finalizer, since the page is not V8's to free.
    let st = unsafe { sys::napi_create_external_arraybuffer(env, page.as_ptr().cast(), page.len(), None, ptr::null_mut(), &mut ab) };
    if !ok(st) {
        return Err(st);
    }
    // SAFETY: live env and a fresh ArrayBuffer.
    unsafe { typed_view(env, ab, 0) }
}

/// # Safety
/// `env` live.
unsafe fn heap_view(env: napi_env) -> std::result::Result<(sys::napi_ref, *mut u8), sys::napi_status> {
    let size = page_size();
    let (mut ab, mut data) = (ptr::null_mut(), ptr::null_mut::<c_void>());
    // SAFETY: valid out pointers.
    let st = unsafe { sys::napi_create_arraybuffer(env, 2 * size, &mut data, &mut ab) };
    if !ok(st) {
        return Err(st);
    }
    let offset = (data as usize).next_multiple_of(size) - data as usize;
    // SAFETY: live env; offset + MAX_RECORD_LEN <= 2 * size.
    let view = unsafe { typed_view(env, ab, offset) }?;
    // SAFETY: offset < size, inside the 2 * size bytes allocated.
    Ok((view, unsafe { data.cast::<u8>().add(offset) }))
}

/// A Uint8Array of the record's MAX_RECORD_LEN bytes at `offset` in `ab`, strongly referenced.
///
/// # Safety
/// `env` live, `ab` an ArrayBuffer of at least `offset + MAX_RECORD_LEN` bytes.
unsafe fn typed_view(env: napi_env, ab: napi_value, offset: usize) -> std::result::Result<sys::napi_ref, sys::napi_status> {
    let (mut view, mut r) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: per the contract; valid out pointer.
    let st = unsafe { sys::napi_create_typedarray(env, sys::TypedarrayType::uint8_array, MAX_RECORD_LEN, ab, offset, &mut view) };
    if !ok(st) {
        return Err(st);
    }
    // SAFETY: live env and value; valid out pointer.
    let st = unsafe { sys::napi_create_reference(env, view, 1, &mut r) };
    if !ok(st) {
        return Err(st);
    }
    Ok(r)
}

unsafe extern "C" fn detach_thread(_: *mut c_void) {
    thread_state::release();
}

unsafe extern "C" fn drop_env_data(_env: napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the Box that `attach` handed to napi_set_instance_data; Node-API calls this
    // once, at environment teardown.
    drop(unsafe { Box::from_raw(data as *mut EnvData) });
}

/// # Safety
/// `env` live.
unsafe fn env_data<'a>(env: napi_env) -> Option<&'a EnvData> {
    let mut data = ptr::null_mut();
    // SAFETY: live env; valid out pointer.
    if !ok(unsafe { sys::napi_get_instance_data(env, &mut data) }) {
        return None;
    }
    // SAFETY: null or the EnvData set by `attach`, alive until the environment's teardown.
    unsafe { (data as *const EnvData).as_ref() }
}

/// Throws `e` as a TypeError or RangeError with its Node-style code. (A failing throw has no
/// better fallback: the call then returns undefined.)
///
/// # Safety
/// `env` live, inside a callback.
unsafe fn throw(env: napi_env, e: &IdError) {
    let code = CString::new(e.code()).unwrap_or_default();
    let msg = CString::new(e.to_string()).unwrap_or_default();
    // SAFETY: live env; NUL-terminated strings.
    unsafe {
        match e.kind() {
            ErrorKind::Type => sys::napi_throw_type_error(env, code.as_ptr(), msg.as_ptr()),
            ErrorKind::Range => sys::napi_throw_range_error(env, code.as_ptr(), msg.as_ptr()),
        };
    }
}

/// How an argument is named in error messages.
///
/// # Safety
/// `env` live; `v` a value of this callback.
unsafe fn type_name(env: napi_env, v: napi_value) -> &'static str {
    let mut t = 0;
    // SAFETY: live env and value; valid out pointer.
    if !ok(unsafe { sys::napi_typeof(env, v, &mut t) }) {
        return "a value of unknown type";
    }
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
            // SAFETY: as above.
            let st = unsafe { sys::napi_is_typedarray(env, v, &mut is_ta) };
            if ok(st) && is_ta {
                "a typed array that is not a Uint8Array"
            } else {
                "an object"
            }
        }
    }
}

/// Reads one id argument (hex string or Uint8Array) into `out` without touching the record.
/// Tries the string read first and asks for the type only when that fails: every Node-API call
/// costs a few ns, and this runs on each `setSpanContext`.
///
/// # Safety
/// `env` live; `v` a value of this callback.
unsafe fn read_id(env: napi_env, v: napi_value, arg: &'static str, out: &mut [u8]) -> std::result::Result<(), IdError> {
    let hex = out.len() * 2;
    let mut buf = [0u16; 2 * TRACE_ID_LEN + 2];
    let mut len = 0usize;
    // Copies at most hex + 1 units: enough to tell "too long" without copying the rest.
    // SAFETY: live env and value; `buf` holds hex + 2 units.
    if ok(unsafe { sys::napi_get_value_string_utf16(env, v, buf.as_mut_ptr(), hex + 2, &mut len) }) {
        // SAFETY: a null buffer asks for the length only.
        if len > hex && !ok(unsafe { sys::napi_get_value_string_utf16(env, v, ptr::null_mut(), 0, &mut len) }) {
            len = hex + 1;
        }
        return ids::decode_hex_utf16(arg, &buf[..len.min(hex + 1)], out).map_err(|e| match e {
            IdError::HexLength { arg, hex, .. } => IdError::HexLength { arg, hex, len },
            e => e,
        });
    }
    let mut is_ta = false;
    // SAFETY: live env and value; valid out pointer.
    if ok(unsafe { sys::napi_is_typedarray(env, v, &mut is_ta) }) && is_ta {
        let (mut ty, mut n, mut data) = (0, 0usize, ptr::null_mut::<c_void>());
        // SAFETY: `v` is a typed array; valid out pointers (the ones not wanted are null).
        let st = unsafe { sys::napi_get_typedarray_info(env, v, &mut ty, &mut n, &mut data, ptr::null_mut(), ptr::null_mut()) };
        if ok(st) && ty == sys::TypedarrayType::uint8_array {
            // SAFETY: a Uint8Array's data is `n` readable bytes for the duration of this call.
            let bytes: &[u8] = if n == 0 || data.is_null() { &[] } else { unsafe { std::slice::from_raw_parts(data as *const u8, n) } };
            return ids::decode_bytes(arg, bytes, out);
        }
    }
    // SAFETY: live env and value.
    Err(IdError::WrongType { arg, hex, bytes: out.len(), got: unsafe { type_name(env, v) } })
}

/// # Safety
/// `env` and `info` of a live callback.
unsafe fn parse_args(env: napi_env, info: napi_callback_info) -> std::result::Result<SpanContext, IdError> {
    let mut argc = 4usize;
    let mut argv = [ptr::null_mut(); 4];
    // SAFETY: `argv` holds `argc` values.
    if !ok(unsafe { sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), ptr::null_mut()) }) {
        return Err(IdError::WrongType { arg: "traceId", hex: 2 * TRACE_ID_LEN, bytes: TRACE_ID_LEN, got: "an unreadable argument" });
    }
    if argc > 3 {
        return Err(IdError::TooManyArgs { got: argc });
    }
    let mut sc = SpanContext { trace_id: [0; TRACE_ID_LEN], span_id: [0; SPAN_ID_LEN], flags: 1 };
    // SAFETY: argv entries past argc are filled with undefined by napi_get_cb_info.
    unsafe {
        read_id(env, argv[0], "traceId", &mut sc.trace_id)?;
        read_id(env, argv[1], "spanId", &mut sc.span_id)?;
    }
    let mut f = 0f64;
    // SAFETY: live env and value; valid out pointer.
    if ok(unsafe { sys::napi_get_value_double(env, argv[2], &mut f) }) {
        sc.flags = ids::flags_from_f64(f)?;
    } else {
        let mut t = 0;
        // SAFETY: as above.
        let st = unsafe { sys::napi_typeof(env, argv[2], &mut t) };
        if !ok(st) || t != sys::ValueType::napi_undefined {
            // SAFETY: as above.
            return Err(IdError::FlagsType { got: unsafe { type_name(env, argv[2]) } });
        }
    }
    Ok(sc)
}

/// `setSpanContext(traceId, spanId, traceFlags = 1)`: validates everything, then writes the
/// record (valid 0, ids, flags, attrs size 0, valid 1). A rejected call changes nothing.
pub unsafe extern "C" fn set_span_context(env: napi_env, info: napi_callback_info) -> napi_value {
    // SAFETY: called by Node-API with a live env and callback info.
    match unsafe { parse_args(env, info) } {
        Ok(sc) => {
            thread_state::with_current(|s| s.record().publish(&sc));
        }
        // SAFETY: as above.
        Err(e) => unsafe { throw(env, &e) },
    }
    ptr::null_mut()
}

/// `recordView()`: the environment's cached Uint8Array of the record.
pub unsafe extern "C" fn record_view(env: napi_env, _info: napi_callback_info) -> napi_value {
    // SAFETY: called by Node-API with a live env.
    let Some(d) = (unsafe { env_data(env) }) else { return ptr::null_mut() };
    let mut v = ptr::null_mut();
    // SAFETY: live env; a non-null `view` is a live strong reference.
    if !d.view.is_null() && ok(unsafe { sys::napi_get_reference_value(env, d.view, &mut v) }) && !v.is_null() {
        return v;
    }
    let msg = CString::new(format!("recordView: {}", d.error.as_deref().unwrap_or("no record page"))).unwrap_or_default();
    // SAFETY: live env; NUL-terminated strings.
    unsafe { sys::napi_throw_error(env, c"ERR_OTEL_THREAD_CTX_NO_PAGE".as_ptr(), msg.as_ptr()) };
    ptr::null_mut()
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
    let sc = thread_state::with_current(|s| s.record().read()).flatten()?;
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

struct PageFacts {
    address: u64,
    pinned: bool,
    pin_error: Option<String>,
    wipe_on_fork: bool,
    mapped: bool,
}

#[napi]
pub fn thread_info(env: Env) -> ThreadInfo {
    let page = thread_state::with_current(|s| PageFacts {
        address: s.page.as_ptr() as u64,
        pinned: s.page.pinned(),
        pin_error: s.page.pin_error.clone(),
        wipe_on_fork: s.page.wipe_error.is_none(),
        mapped: s.page.is_mapped(),
    });
    let (tls_offset, tls_model) = match tls::placement() {
        Placement::Static { tp_offset } => (Some(tp_offset), "static"),
        Placement::Dynamic => (None, "dynamic"),
        Placement::Unknown => (None, "unknown"),
    };
    // SAFETY: napi-rs passes the live env of this call.
    let env_error = unsafe { env_data(env.raw()) }.and_then(|d| d.error.clone());
    ThreadInfo {
        // SAFETY: gettid has no preconditions.
        tid: unsafe { libc::gettid() },
        record_address: page.as_ref().map(|p| BigInt::from(p.address)),
        pinned: page.as_ref().is_some_and(|p| p.pinned),
        pin_error: page.as_ref().and_then(|p| p.pin_error.clone()),
        wipe_on_fork: page.as_ref().is_some_and(|p| p.wipe_on_fork),
        tls_offset,
        tls_model: tls_model.to_string(),
        page_backing: page.as_ref().map(|p| if p.mapped { "mmap" } else { "arraybuffer" }.to_string()),
        error: if page.is_none() { Some(env_error.unwrap_or_else(|| "no record page on this thread".into())) } else { env_error },
    }
}
