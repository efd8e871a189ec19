//! The C thread-locals (src/tls_slot.c) seen from Rust, and where glibc placed them.

use std::ffi::c_void;

extern "C" {
    fn otel_thread_ctx_slot() -> *mut *mut c_void;
    fn otel_thread_ctx_state_slot() -> *mut *mut c_void;
    fn otel_thread_ctx_descriptor() -> *const *const c_void;
    fn otel_thread_ctx_thread_pointer() -> *mut c_void;
}

/// This thread's `otel_thread_ctx_v1` slot (the pointer readers follow to the record).
#[inline(always)]
pub fn record_slot() -> *mut *mut u8 {
    // SAFETY: returns the address of a thread-local of the calling thread.
    unsafe { otel_thread_ctx_slot().cast() }
}

/// This thread's private addon-state slot (hidden symbol, not part of the ABI).
#[inline(always)]
pub fn state_slot() -> *mut *mut c_void {
    // SAFETY: as above.
    unsafe { otel_thread_ctx_state_slot() }
}

/// Where the dynamic linker put the module's TLS block, judged exactly the way an out-of-process
/// reader judges it: from the resolved TLSDESC descriptor's argument word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Static TLS: the slot sits at `thread pointer + tp_offset` on every thread.
    Static { tp_offset: i64 },
    /// Dynamic TLS: readers must walk the DTV.
    Dynamic,
    /// Not x86-64 TLSDESC: placement not known.
    Unknown,
}

pub fn placement() -> Placement {
    let slot = record_slot() as usize;
    // SAFETY: the descriptor is two words in the module's GOT, resolved at load time (the slot
    // access above went through it).
    let (desc, tp) = unsafe { (otel_thread_ctx_descriptor(), otel_thread_ctx_thread_pointer()) };
    if desc.is_null() || tp.is_null() {
        return Placement::Unknown;
    }
    // SAFETY: a resolved descriptor is two readable words (resolver, argument).
    let arg = unsafe { *desc.add(1) } as usize as i64;
    if arg == i64::from(arg as i32) && (tp as usize).wrapping_add(arg as usize) == slot {
        Placement::Static { tp_offset: arg }
    } else {
        Placement::Dynamic
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_is_per_thread() {
        let main = record_slot() as usize;
        let other = std::thread::spawn(|| record_slot() as usize).join().unwrap();
        assert_ne!(main, other, "each thread must have its own otel_thread_ctx_v1");
    }

    // placement() is exercised from Node (threadInfo().tlsOffset): in a test executable the
    // linker relaxes TLSDESC to local exec, so there is no descriptor to read.
}
