//! The JavaScript API (the addon's exports object; `js/native/addon.js` is its only user, the
//! package's API is the JS layer on top). One module per job:
//! - `record`: this thread's record page (`recordView`, `setSpanContext`, `getSpanContext`,
//!   `threadInfo`) and its lifecycle per Node-API environment;
//! - `process_context`: the process-wide OTEP 4719 context and attribute key map;
//! - `thread_name`: the calling thread's OS name (`setThreadName`, for worker threads);
//! - `bench_clock`: a thread CPU clock for the repository's benchmarks, not part of the package.
//!
//! The calls made often (`setSpanContext`, `recordView`, `attributeKeyCount`, `keyCountView`) are registered as
//! raw Node-API callbacks: napi-rs's generated wrappers cost ~20 ns per call without arguments and
//! ~100 ns with, a raw callback a few ns. The rest goes through napi-rs.

mod bench_clock;
mod process_context;
mod record;
mod thread_name;

use std::ffi::{c_void, CStr};
use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys::{self, napi_callback_info, napi_env, napi_value};
use napi_derive::napi;

#[napi(module_exports)]
pub fn init(exports: Object, env: Env) -> Result<()> {
    let raw_env = env.raw();
    // SAFETY: called by Node-API on the environment's own thread with a live env and exports object.
    unsafe {
        record::attach(raw_env)?;
        define(raw_env, exports.raw(), c"setSpanContext", record::set_span_context)?;
        define(raw_env, exports.raw(), c"recordView", record::record_view)?;
        define(raw_env, exports.raw(), c"attributeKeyCount", process_context::attribute_key_count)?;
        define(raw_env, exports.raw(), c"keyCountView", process_context::key_count_view)?;
        define(raw_env, exports.raw(), c"__benchThreadCpuTimeNs", bench_clock::thread_cpu_time_ns)?;
    }
    Ok(())
}

type RawCallback = unsafe extern "C" fn(napi_env, napi_callback_info) -> napi_value;

/// # Safety
/// `env` and `exports` must be live handles of the calling thread's environment.
unsafe fn define(env: napi_env, exports: napi_value, name: &CStr, cb: RawCallback) -> Result<()> {
    let mut f = ptr::null_mut();
    // SAFETY: live env; `name` is NUL-terminated; `f` is a valid out pointer.
    check(unsafe {
        sys::napi_create_function(env, name.as_ptr(), -1 /* NAPI_AUTO_LENGTH */, Some(cb), ptr::null_mut::<c_void>(), &mut f)
    })?;
    // SAFETY: live env and objects.
    check(unsafe { sys::napi_set_named_property(env, exports, name.as_ptr(), f) })
}

fn check(status: sys::napi_status) -> Result<()> {
    if ok(status) {
        Ok(())
    } else {
        Err(Error::from_reason(format!("Node-API call failed with status {status}")))
    }
}

fn ok(status: sys::napi_status) -> bool {
    status == sys::Status::napi_ok
}
