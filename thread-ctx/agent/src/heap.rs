//! The agent's own heap as glibc's allocator sees it, for the status line:
//! what is allocated and what is free but still held, so that a reader of a
//! rising RSS can tell live data (a cache filling) from fragmentation.

/// Bytes allocated and bytes free but kept by the allocator, over every arena.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Allocated: in arenas plus large blocks mmapped on their own.
    pub in_use: u64,
    /// Free chunks the arenas hold (resident only where touched and not trimmed).
    pub free: u64,
}

impl HeapStats {
    /// The allocator's figures now (walks every arena's free lists: once a window, not per sample).
    pub fn now() -> HeapStats {
        // SAFETY: mallinfo2 only reads the allocator's own statistics.
        let m = unsafe { libc::mallinfo2() };
        HeapStats { in_use: (m.uordblks + m.hblkhd) as u64, free: m.fordblks as u64 }
    }
}
