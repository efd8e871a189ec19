//! The benchmarks' clock, exported as `__benchThreadCpuTimeNs`: internal to this repository (the
//! package's JS layer never exposes it; the double underscore says so to anyone holding the raw
//! addon). Thread CPU time, unlike wall time, excludes what a hypervisor steals from a shared VM,
//! and unlike process.cpuUsage() it excludes V8's helper threads.

use std::ptr;

use napi::sys::{self, napi_callback_info, napi_env, napi_value};

/// CLOCK_THREAD_CPUTIME_ID of the calling thread, in ns, as a double (undefined if it fails).
pub unsafe extern "C" fn thread_cpu_time_ns(env: napi_env, _info: napi_callback_info) -> napi_value {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return ptr::null_mut();
    }
    let mut v = ptr::null_mut();
    // SAFETY: called by Node-API with a live env; `v` is a valid out pointer.
    let status = unsafe { sys::napi_create_double(env, ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64, &mut v) };
    if super::ok(status) {
        v
    } else {
        ptr::null_mut()
    }
}
