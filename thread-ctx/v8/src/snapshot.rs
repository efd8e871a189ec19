//! A batch's reads of a target, with as few system calls as the batch allows:
//! - the ranges the namer says it will read first (the checks of its cached objects,
//!   [`crate::Namer::batch_reads`]) are read together ([`HeapMemory::read_many`]: one system
//!   call for up to 1,024 of them, where each read alone is one);
//! - any other small read brings the whole aligned block around it ([`BLOCK`] bytes, never
//!   across a page), kept for the batch: reading an object not cached yet is a dozen reads of
//!   its fields, of the maps that give their types (a few pages of V8's read-only space for all
//!   of them) and of the strings beside it, mostly in blocks read already;
//! - a read that failed is not tried again within the batch (a negative entry): a frame whose
//!   object is gone costs one fault, not one per frame of it.
//!
//! A copy is as good as the batch's other assumption (objects checked once in a batch are
//! trusted for the rest of it, [`crate::cache`]): taken at the batch's start, dropped at its end.

use crate::memory::{Fault, HeapMemory};
use std::cell::RefCell;

/// Ranges taken per batch at most (~6 per frame: a batch names a few hundred frames at most).
pub const MAX_RANGES: usize = 4096;
/// Bytes taken per batch at most (each range is an object's header, a few hundred bytes).
pub const MAX_BYTES: usize = 1 << 20;
/// Failed reads remembered per batch.
const MAX_FAULTS: usize = 1024;
/// Ranges this close are taken as one (two headers in one object, or objects side by side).
const JOIN_GAP: u64 = 64;
/// The block a small read brings along: a page, the unit of what is mapped, so a block is
/// readable whenever the read is.
pub const BLOCK: u64 = 4096;
/// Blocks kept per batch.
pub const MAX_BLOCKS: usize = 256;

/// A range copied from the target: `len` bytes at `addr`, at `at` in the copy.
#[derive(Debug, Clone, Copy)]
struct Block {
    addr: u64,
    len: u64,
    at: usize,
}

/// Memory `M` with a batch's ranges copied in front of it.
pub struct Snapshot<M: HeapMemory> {
    inner: M,
    blocks: Vec<Block>,
    data: Vec<u8>,
    faults: RefCell<Vec<(u64, usize)>>,
    /// Aligned blocks read this batch, by address.
    pages: RefCell<Vec<(u64, Box<[u8]>)>>,
    /// Reads served from the copy, and refused from the negative entries, so far.
    pub served: std::cell::Cell<u64>,
    pub refused: std::cell::Cell<u64>,
}

impl<M: HeapMemory> Snapshot<M> {
    pub fn new(inner: M) -> Self {
        Snapshot {
            inner,
            blocks: Vec::new(),
            data: Vec::new(),
            faults: RefCell::new(Vec::new()),
            pages: RefCell::new(Vec::new()),
            served: Default::default(),
            refused: Default::default(),
        }
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// Drops the last batch's copy and negative entries, and copies `ranges` (address, length)
    /// of the target at once, as many as [`MAX_RANGES`] and [`MAX_BYTES`] allow. A range that
    /// cannot be read is left out (reading it later tells why).
    pub fn take(&mut self, ranges: &[(u64, usize)]) {
        self.clear();
        let mut wanted: Vec<(u64, u64)> = ranges.iter().filter(|r| r.1 > 0).filter_map(|&(a, n)| Some((a, a.checked_add(n as u64)?))).collect();
        wanted.sort_unstable();
        let mut joined: Vec<(u64, u64)> = Vec::with_capacity(wanted.len());
        for (start, end) in wanted {
            match joined.last_mut() {
                Some(last) if start <= last.1.saturating_add(JOIN_GAP) => last.1 = last.1.max(end),
                _ => joined.push((start, end)),
            }
        }
        let mut kept: Vec<(u64, u64)> = Vec::with_capacity(joined.len().min(MAX_RANGES));
        let mut total = 0usize;
        for (start, end) in joined {
            let n = (end - start) as usize;
            if kept.len() == MAX_RANGES {
                break;
            }
            if total + n <= MAX_BYTES {
                total += n;
                kept.push((start, end));
            }
        }
        self.data = vec![0u8; total];
        let mut reads: Vec<(u64, &mut [u8])> = Vec::with_capacity(kept.len());
        let mut rest: &mut [u8] = &mut self.data;
        for &(s, e) in &kept {
            let (buf, tail) = std::mem::take(&mut rest).split_at_mut((e - s) as usize);
            reads.push((s, buf));
            rest = tail;
        }
        let results = self.inner.read_many(&mut reads);
        let mut at = 0usize;
        for (&(s, e), ok) in kept.iter().zip(results) {
            if ok.is_ok() {
                self.blocks.push(Block { addr: s, len: e - s, at });
            }
            at += (e - s) as usize;
        }
    }

    /// Forgets the copy and the negative entries (the batch is over).
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.data = Vec::new();
        self.faults.get_mut().clear();
        self.pages.get_mut().clear();
    }

    /// The copy of `[addr, addr + len)`, if one block holds all of it.
    fn copied(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let i = self.blocks.partition_point(|b| b.addr <= addr).checked_sub(1)?;
        let b = self.blocks[i];
        let off = addr - b.addr;
        (off.checked_add(len as u64)? <= b.len).then(|| &self.data[b.at + off as usize..b.at + off as usize + len])
    }
}

impl<M: HeapMemory> HeapMemory for Snapshot<M> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        if let Some(copy) = self.copied(addr, buf.len()) {
            buf.copy_from_slice(copy);
            self.served.set(self.served.get() + 1);
            return Ok(());
        }
        let fault = Fault { addr, len: buf.len() };
        if self.faults.borrow().contains(&(addr, buf.len())) {
            self.refused.set(self.refused.get() + 1);
            return Err(fault);
        }
        let block = addr & !(BLOCK - 1);
        if addr.checked_add(buf.len() as u64).is_some_and(|end| end <= block + BLOCK) {
            let off = (addr - block) as usize;
            let mut pages = self.pages.borrow_mut();
            if let Some((_, page)) = pages.iter().find(|(a, _)| *a == block) {
                buf.copy_from_slice(&page[off..off + buf.len()]);
                self.served.set(self.served.get() + 1);
                return Ok(());
            }
            if pages.len() < MAX_BLOCKS {
                let mut page = vec![0u8; BLOCK as usize].into_boxed_slice();
                // The block is inside the read's page: it fails only when the read would.
                let r = self.inner.read(block, &mut page).map(|()| {
                    buf.copy_from_slice(&page[off..off + buf.len()]);
                    pages.push((block, page));
                });
                drop(pages);
                return self.remember(addr, buf.len(), r.map_err(|_| fault));
            }
        }
        let r = self.inner.read(addr, buf);
        self.remember(addr, buf.len(), r)
    }
}

impl<M: HeapMemory> Snapshot<M> {
    /// Keeps a failed read as a negative entry for the rest of the batch.
    fn remember(&self, addr: u64, len: usize, r: Result<(), Fault>) -> Result<(), Fault> {
        if r.is_err() {
            let mut faults = self.faults.borrow_mut();
            if faults.len() < MAX_FAULTS {
                faults.push((addr, len));
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// 4 KiB of memory at 0x10000 whose byte at offset i is i mod 251, counting its reads.
    struct Counted {
        calls: Cell<u32>,
    }

    impl HeapMemory for Counted {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
            self.calls.set(self.calls.get() + 1);
            let off = addr.checked_sub(0x10000).filter(|o| o + buf.len() as u64 <= 4096).ok_or(Fault { addr, len: buf.len() })?;
            for (i, b) in buf.iter_mut().enumerate() {
                *b = ((off as usize + i) % 251) as u8;
            }
            Ok(())
        }

        fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Result<(), Fault>> {
            let calls = self.calls.get();
            let r = reads.iter_mut().map(|(a, b)| self.read(*a, b)).collect();
            self.calls.set(calls + 1);
            r
        }
    }

    #[test]
    fn a_batch_is_read_at_once_and_served_from_the_copy() {
        let mut s = Snapshot::new(Counted { calls: Cell::new(0) });
        s.take(&[(0x10010, 8), (0x10800, 32), (0x10014, 8), (0x20000, 8)]);
        assert_eq!(s.inner().calls.get(), 1, "one call for the whole batch");
        let mut b = [0u8; 8];
        s.read(0x10014, &mut b).unwrap();
        assert_eq!(b[0], 0x14);
        let mut c = [0u8; 16];
        s.read(0x10808, &mut c).unwrap();
        assert_eq!(c[0], (0x808 % 251) as u8);
        assert_eq!((s.inner().calls.get(), s.served.get()), (1, 2), "both inside the copy");
        s.read(0x10900, &mut b).unwrap();
        assert_eq!(s.inner().calls.get(), 2, "outside the copy: read from the target");
        assert!(s.read(0x20000, &mut b).is_err(), "the range that failed in the batch is not in the copy");
        assert!(s.read(0x20000, &mut b).is_err());
        assert_eq!((s.inner().calls.get(), s.refused.get()), (3, 1), "a failed read is tried once per batch");
        s.clear();
        assert!(s.read(0x20000, &mut b).is_err());
        assert_eq!(s.inner().calls.get(), 4, "a new batch tries again");
        s.read(0x10014, &mut b).unwrap();
        assert_eq!(s.inner().calls.get(), 5, "and reads the target again");
    }

    #[test]
    fn small_reads_bring_their_block_for_the_batch() {
        let mut s = Snapshot::new(Counted { calls: Cell::new(0) });
        let (mut a, mut b) = ([0u8; 8], [0u8; 2]);
        s.read(0x10100, &mut a).unwrap();
        s.read(0x10ffe, &mut b).unwrap();
        s.read(0x10008, &mut a).unwrap();
        assert_eq!((a[0], b[0], s.inner().calls.get()), (8, (0xffe % 251) as u8, 1), "one read of the page serves all three");
        let mut big = vec![0u8; 5000];
        s.read(0x10000 - 8, &mut [0u8; 16]).unwrap_err();
        assert!(s.read(0x10000, &mut big).is_err(), "larger than a block: read as asked");
        assert_eq!(s.inner().calls.get(), 3, "across a page boundary and larger than a block, each read alone");
        s.clear();
        s.read(0x10100, &mut a).unwrap();
        assert_eq!(s.inner().calls.get(), 4, "a new batch reads the target again");
    }

    #[test]
    fn reads_across_a_block_end_go_to_the_target() {
        let mut s = Snapshot::new(Counted { calls: Cell::new(0) });
        s.take(&[(0x10000, 16), (0x10100, 16)]);
        let mut b = [0u8; 8];
        s.read(0x1000c, &mut b).unwrap();
        assert_eq!((b[0], s.served.get()), (12, 0), "straddles the block's end");
        s.take(&[(u64::MAX - 4, 8), (0x10000, 0)]);
        assert!(s.blocks.is_empty(), "wrapping and empty ranges are left out");
    }
}
