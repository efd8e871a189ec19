//! Stops one thread with PTRACE_SEIZE + PTRACE_INTERRUPT so its record can be
//! read consistently, and always detaches (Drop), re-injecting any signal the
//! stop intercepted.

use crate::error::{Error, Result};
use std::io;

const EPERM_HINT: &str = " (ptrace needs root, CAP_SYS_PTRACE, or the same uid with kernel.yama.ptrace_scope permitting; \
                          a thread already traced by another debugger cannot be seized)";

pub struct StoppedThread {
    tid: i32,
    /// Signal to hand back on detach when the stop was a signal-delivery stop.
    pending_signal: i32,
    attached: bool,
}

fn ptrace_err(tid: i32, op: &'static str, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ESRCH) => Error::ThreadExited { tid },
        Some(libc::EPERM) => Error::Ptrace { tid, op, cause: e, hint: EPERM_HINT },
        _ => Error::Ptrace { tid, op, cause: e, hint: "" },
    }
}

impl StoppedThread {
    /// Seizes and interrupts `tid`, waiting until it is in a ptrace stop.
    pub fn stop(tid: i32) -> Result<Self> {
        // SAFETY: plain ptrace requests on a tid; no memory is passed.
        if unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0) } != 0 {
            return Err(ptrace_err(tid, "PTRACE_SEIZE", io::Error::last_os_error()));
        }
        let mut me = StoppedThread { tid, pending_signal: 0, attached: true };
        if unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) } != 0 {
            return Err(ptrace_err(tid, "PTRACE_INTERRUPT", io::Error::last_os_error()));
        }
        loop {
            let mut status = 0;
            // SAFETY: status is a valid out pointer.
            let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                if e.raw_os_error() == Some(libc::ECHILD) {
                    me.attached = false;
                    return Err(Error::ThreadExited { tid });
                }
                return Err(ptrace_err(tid, "waitpid", e));
            }
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                me.attached = false;
                return Err(Error::ThreadExited { tid });
            }
            if libc::WIFSTOPPED(status) {
                let event = (status >> 16) & 0xff;
                let sig = libc::WSTOPSIG(status);
                if event == 0 && sig != libc::SIGTRAP {
                    // A signal-delivery stop came first: remember it so detach delivers it.
                    me.pending_signal = sig;
                }
                return Ok(me);
            }
        }
    }

    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// The thread pointer (x86-64 fs_base) from the stopped thread's registers.
    pub fn thread_pointer(&self) -> Result<u64> {
        // SAFETY: user_regs_struct is plain data; PTRACE_GETREGS fills it whole.
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::ptrace(libc::PTRACE_GETREGS, self.tid, 0, &mut regs as *mut _) };
        if r != 0 {
            return Err(ptrace_err(self.tid, "PTRACE_GETREGS", io::Error::last_os_error()));
        }
        Ok(regs.fs_base)
    }
}

impl Drop for StoppedThread {
    fn drop(&mut self) {
        if self.attached {
            // SAFETY: detaching a tracee we seized; ESRCH (already gone) is harmless.
            unsafe { libc::ptrace(libc::PTRACE_DETACH, self.tid, 0, self.pending_signal as libc::c_long) };
        }
    }
}
