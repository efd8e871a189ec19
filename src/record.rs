//! The OTEP 4947 Thread-Local Context Record and its update protocol.
//!
//! Layout (byte-packed, host endian):
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
#[allow(dead_code)] // used by the attrs writer
pub const HEADER_LEN: usize = 28;
/// The eBPF profiler's limit on a whole record.
pub const MAX_RECORD_LEN: usize = 640;
#[allow(dead_code)]
pub const MAX_ATTRS_LEN: usize = MAX_RECORD_LEN - HEADER_LEN;

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

    /// Detach: valid = 0 first, then zero ids, flags and attrs size.
    pub fn clear(self) {
        let p = self.0;
        // SAFETY: as in `publish`.
        unsafe {
            ptr::write_volatile(p.add(OFF_VALID), 0);
            compiler_fence(Ordering::SeqCst);
            ptr::write_volatile(p.cast::<[u8; TRACE_ID_LEN + SPAN_ID_LEN]>(), [0; TRACE_ID_LEN + SPAN_ID_LEN]);
            ptr::write_volatile(p.add(OFF_FLAGS), 0);
            ptr::write_volatile(p.add(OFF_ATTRS_SIZE).cast::<[u8; 2]>(), [0, 0]);
        }
    }

    pub fn valid(self) -> u8 {
        // SAFETY: in bounds.
        unsafe { ptr::read_volatile(self.0.add(OFF_VALID)) }
    }

    /// The published span context, or None when `valid != 1`.
    pub fn read(self) -> Option<SpanContext> {
        if self.valid() != 1 {
            return None;
        }
        // SAFETY: in bounds.
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
    fn publish_then_clear_roundtrip() {
        let mut buf = [0xAAu8; MAX_RECORD_LEN];
        let rec = unsafe { Record::from_raw(buf.as_mut_ptr()) };
        let sc = SpanContext { trace_id: [1; 16], span_id: [2; 8], flags: 3 };
        rec.publish(&sc);
        assert_eq!(rec.read(), Some(sc));
        assert_eq!(&buf[..28], &[[1u8; 16].as_slice(), &[2; 8], &[1, 3, 0, 0]].concat()[..]);
        rec.clear();
        assert_eq!(rec.read(), None);
        assert!(buf[..28].iter().all(|&b| b == 0));
    }
}
