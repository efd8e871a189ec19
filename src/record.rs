//! The OTEP 4947 Thread-Local Context Record and its update protocol.
//!
//! The layout is defined here once for the addon (and once for the JS layer, in js/record/layout.js).
//! Byte-packed, host endian:
//! `[0,16)` trace id · `[16,24)` span id · `24` valid · `25` trace flags · `[26,28)` attrs size (u16)
//! · `[28, 28+size)` attrs `[key u8][len u8][len bytes]`.
//!
//! Only the owning thread writes. Readers interrupt it (perf-event eBPF, ptrace stop), so plain
//! stores suffice as long as the compiler keeps them in program order: `valid = 0` first,
//! `valid = 1` last. Volatile stores are never reordered with each other or elided.

use std::ptr;
use std::sync::atomic::{compiler_fence, Ordering};

pub const TRACE_ID_LEN: usize = 16;
pub const SPAN_ID_LEN: usize = 8;
pub const OFF_SPAN_ID: usize = 16;
pub const OFF_VALID: usize = 24;
pub const OFF_FLAGS: usize = 25;
pub const OFF_ATTRS_SIZE: usize = 26;
#[allow(dead_code)] // the layout, complete: the addon itself never writes attrs-data
pub const HEADER_LEN: usize = 28;
/// The eBPF profiler's limit on a whole record (attrs-data: `MAX_RECORD_LEN - HEADER_LEN`).
pub const MAX_RECORD_LEN: usize = 640;

/// The ids and flags of one span context, as they are stored in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: [u8; TRACE_ID_LEN],
    pub span_id: [u8; SPAN_ID_LEN],
    pub flags: u8,
}

/// A record in memory owned by the calling thread.
#[derive(Clone, Copy)]
pub struct Record(*mut u8);

impl Record {
    /// # Safety
    /// `base` must point to at least `MAX_RECORD_LEN` writable bytes owned by this thread.
    pub unsafe fn from_raw(base: *mut u8) -> Self {
        Record(base)
    }

    /// valid = 0, ids/flags/size, valid = 1. Attributes are dropped (size 0).
    pub fn publish(self, sc: &SpanContext) {
        let p = self.0;
        // SAFETY: in bounds per `from_raw`; volatile keeps order and count of the stores.
        unsafe {
            ptr::write_volatile(p.add(OFF_VALID), 0);
            compiler_fence(Ordering::SeqCst);
            ptr::write_volatile(p.cast::<[u8; TRACE_ID_LEN]>(), sc.trace_id);
            ptr::write_volatile(p.add(OFF_SPAN_ID).cast::<[u8; SPAN_ID_LEN]>(), sc.span_id);
            ptr::write_volatile(p.add(OFF_FLAGS), sc.flags);
            ptr::write_volatile(p.add(OFF_ATTRS_SIZE).cast::<[u8; 2]>(), [0, 0]);
            compiler_fence(Ordering::SeqCst);
            ptr::write_volatile(p.add(OFF_VALID), 1);
        }
    }

    /// Detach (OTEP 4947), the package's one "none": the 4 bytes valid, flags and attrs size
    /// zeroed in one store (the JS writer stores them as one u32 word). The ids stay as they were;
    /// every reader ignores them under valid 0, and the JS writer relies on that to return to a
    /// span cheaply.
    pub fn detach(self) {
        // SAFETY: in bounds per `from_raw`; volatile keeps the store.
        unsafe { ptr::write_volatile(self.0.add(OFF_VALID).cast::<[u8; 4]>(), [0; 4]) };
    }

    pub fn valid(self) -> u8 {
        // SAFETY: in bounds per `from_raw`.
        unsafe { ptr::read_volatile(self.0.add(OFF_VALID)) }
    }

    /// The published span context, or None when `valid != 1`.
    pub fn read(self) -> Option<SpanContext> {
        if self.valid() != 1 {
            return None;
        }
        // SAFETY: in bounds per `from_raw`; unaligned-safe (byte arrays and a byte).
        unsafe {
            Some(SpanContext {
                trace_id: ptr::read_volatile(self.0.cast()),
                span_id: ptr::read_volatile(self.0.add(OFF_SPAN_ID).cast()),
                flags: ptr::read_volatile(self.0.add(OFF_FLAGS)),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_then_detach_roundtrip() {
        let mut buf = [0xAAu8; MAX_RECORD_LEN];
        // SAFETY: the buffer is MAX_RECORD_LEN bytes and lives for the test.
        let rec = unsafe { Record::from_raw(buf.as_mut_ptr()) };
        let sc = SpanContext { trace_id: [1; 16], span_id: [2; 8], flags: 3 };
        rec.publish(&sc);
        assert_eq!(rec.read(), Some(sc));
        assert_eq!(&buf[..HEADER_LEN], &[[1u8; 16].as_slice(), &[2; 8], &[1, 3, 0, 0]].concat()[..]);
        rec.detach();
        assert_eq!(rec.read(), None);
        // Detach zeroes valid, flags and attrs size; the ids are left for the next publish.
        assert_eq!(&buf[..HEADER_LEN], &[[1u8; 16].as_slice(), &[2; 8], &[0, 0, 0, 0]].concat()[..]);
    }
}
