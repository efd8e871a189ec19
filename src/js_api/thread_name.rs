//! `setThreadName(name)`: names the calling OS thread (`prctl(PR_SET_NAME)`). A profiler's
//! samples carry a thread's name as the kernel keeps it (`comm`), and Node before 24 leaves every
//! worker thread named after the process; the JS layer names each worker after its `Worker`
//! (`js/native/thread-identity.js`).

use std::ffi::CString;

use napi::bindgen_prelude::*;
use napi_derive::napi;

/// The kernel keeps 15 bytes of a name and its NUL (`TASK_COMM_LEN` 16).
const MAX_NAME_BYTES: usize = 15;

/// `name` cut to what the kernel keeps, at a character boundary.
fn kernel_name(name: &str) -> &str {
    let mut cut = name.len().min(MAX_NAME_BYTES);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    &name[..cut]
}

#[napi]
pub fn set_thread_name(name: String) -> Result<()> {
    if name.is_empty() || name.contains('\0') {
        return Err(Error::new(Status::InvalidArg, format!("setThreadName(name): expected a non-empty string without NUL characters, got {name:?}")));
    }
    let name = CString::new(kernel_name(&name)).expect("checked: no NUL");
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes from the pointer,
    // which stays valid for the call.
    if unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(Error::new(Status::GenericFailure, format!("setThreadName: prctl(PR_SET_NAME) failed: {e}")));
    }
    Ok(())
}
