//! The 32-byte OTEP 4719 v2 header at the start of the mapping and its publish protocol:
//! `"OTEL_CTX"` · u32 version 2 · u32 payload size · u64 published-at (CLOCK_BOOTTIME ns, 0 while
//! updating) · u64 payload pointer. Readers run in other processes on other CPUs, so the stores are
//! separated by real fences, not just compiler barriers.

use std::ptr;
use std::sync::atomic::{fence, Ordering};

pub const SIGNATURE: &[u8; 8] = b"OTEL_CTX";
pub const VERSION: u32 = 2;
pub const OFF_VERSION: usize = 8;
pub const OFF_PAYLOAD_SIZE: usize = 12;
pub const OFF_PUBLISHED_AT: usize = 16;
pub const OFF_PAYLOAD_PTR: usize = 24;

/// CLOCK_BOOTTIME in ns, strictly greater than `previous` (readers detect an update by a change).
pub fn next_timestamp(previous: u64) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    let now = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    now.max(previous + 1)
}

/// # Safety
/// `base` must point to at least `HEADER_LEN` writable bytes that only the caller writes.
pub unsafe fn write_first(base: *mut u8, payload: &[u8], published_at: u64) {
    // SAFETY: the fields are inside the caller's HEADER_LEN bytes; the mapping is page aligned,
    // so each field is aligned for its type.
    unsafe {
        ptr::write_volatile(base.add(OFF_PUBLISHED_AT).cast::<u64>(), 0);
        ptr::write_volatile(base.cast::<[u8; 8]>(), *SIGNATURE);
        ptr::write_volatile(base.add(OFF_VERSION).cast::<u32>(), VERSION);
        write_payload(base, payload, published_at);
    }
}

/// Update: published-at = 0, fence, new size and pointer, fence, new published-at.
///
/// # Safety
/// As `write_first`, on a header `write_first` initialised.
pub unsafe fn write_update(base: *mut u8, payload: &[u8], published_at: u64) {
    // SAFETY: as in write_first.
    unsafe {
        ptr::write_volatile(base.add(OFF_PUBLISHED_AT).cast::<u64>(), 0);
        write_payload(base, payload, published_at);
    }
}

/// # Safety
/// As `write_first`.
unsafe fn write_payload(base: *mut u8, payload: &[u8], published_at: u64) {
    fence(Ordering::SeqCst);
    // SAFETY: aligned fields inside the caller's HEADER_LEN bytes.
    unsafe {
        ptr::write_volatile(base.add(OFF_PAYLOAD_SIZE).cast::<u32>(), payload.len() as u32);
        ptr::write_volatile(base.add(OFF_PAYLOAD_PTR).cast::<u64>(), payload.as_ptr() as u64);
    }
    fence(Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { ptr::write_volatile(base.add(OFF_PUBLISHED_AT).cast::<u64>(), published_at) };
}

/// What a reader sees: (version, payload size, published-at, payload pointer), signature checked.
///
/// # Safety
/// `base` must point to at least `HEADER_LEN` readable bytes.
#[cfg(test)]
pub unsafe fn read(base: *const u8) -> Option<(u32, u32, u64, u64)> {
    // SAFETY: aligned fields inside the caller's HEADER_LEN bytes.
    unsafe {
        if ptr::read_volatile(base.cast::<[u8; 8]>()) != *SIGNATURE {
            return None;
        }
        Some((
            ptr::read_volatile(base.add(OFF_VERSION).cast()),
            ptr::read_volatile(base.add(OFF_PAYLOAD_SIZE).cast()),
            ptr::read_volatile(base.add(OFF_PUBLISHED_AT).cast()),
            ptr::read_volatile(base.add(OFF_PAYLOAD_PTR).cast()),
        ))
    }
}
