//! Started by the package's `thread-ctx` command (`bin/thread-ctx.js`, a Node
//! shim that runs this binary and forwards signals to it), the binary must not
//! outlive the shim: a shim killed with SIGKILL cannot forward anything, and
//! an orphaned `agent` would go on exporting for nobody. The shim names itself
//! in [`SHIM_PID_VAR`]; the binary then asks the kernel for SIGTERM when its
//! parent dies (`PR_SET_PDEATHSIG`), which `agent` and `record` handle like a
//! stop request (the last window is sent, the recording written). Started any
//! other way (a shell, `nohup`, systemd) it keeps outliving its parent.

/// The shim's pid, set by `bin/thread-ctx.js` in the binary's environment.
pub const SHIM_PID_VAR: &str = "THREAD_CTX_SHIM_PID";

/// Ties this process's life to the shim's, when the shim started it.
pub fn end_with_shim() {
    let Some(shim) = std::env::var(SHIM_PID_VAR).ok().and_then(|v| v.parse::<libc::pid_t>().ok()) else {
        return;
    };
    // The death signal follows the thread that forked us; the shim spawns from its main thread
    // (libuv's uv_spawn runs on the loop's thread), which lives as long as the shim.
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and no pointers.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) };
    // The shim may have died between the fork and the prctl: then no signal will come.
    // SAFETY: getppid and raise have no preconditions.
    if unsafe { libc::getppid() } != shim {
        unsafe { libc::raise(libc::SIGTERM) };
    }
}
