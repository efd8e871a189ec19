//! The target's memory as the readers see it, and the budget every naming
//! spends from: a frame is named with at most [`Budget::reads`] reads and
//! [`Budget::bytes`] bytes, whatever the heap says about lengths and links, so
//! a lying heap costs a bounded read and a counted miss, never a hang.

use crate::error::Miss;
use std::cell::Cell;

/// A read that could not be served in full (unmapped, or the process is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub addr: u64,
    pub len: usize,
}

/// Memory of a target process. Every read fills its buffer or fails: a short
/// read is a [`Fault`], never partial data. Implemented by the agent's reader
/// of another process, and by the heap images of the tests and fuzz targets.
pub trait HeapMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault>;

    /// Fills each buffer from its address, as many at once as the memory allows (a live
    /// process: up to 1,024 in one system call). A read that fails is a [`Fault`] in its
    /// place and leaves the others unaffected.
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Result<(), Fault>> {
        reads.iter_mut().map(|(addr, buf)| self.read(*addr, buf)).collect()
    }
}

impl<M: HeapMemory + ?Sized> HeapMemory for &M {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        (**self).read(addr, buf)
    }

    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Result<(), Fault>> {
        (**self).read_many(reads)
    }
}

/// What one naming may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Reads of the target (each a syscall for a live process).
    pub reads: u32,
    /// Bytes read, strings and tables included.
    pub bytes: u64,
}

impl Budget {
    /// A frame: its function, scope info, script and name (~10 reads), a code
    /// lookup (≤ 32 reads of 16 KiB, see `code::MAX_SCAN_BYTES`), position
    /// tables, inlined functions (each ~10 reads, up to `code::MAX_INLINED`),
    /// and once per script its source for the line ends (≤ 16 MiB, read in
    /// 64 KiB chunks).
    pub const FRAME: Budget = Budget { reads: 2048, bytes: 24 << 20 };
}

/// A [`HeapMemory`] that charges every read to a [`Budget`]; once it is spent
/// every read fails with [`Miss::Budget`].
pub struct Metered<'m, M: HeapMemory + ?Sized> {
    mem: &'m M,
    reads_left: Cell<u32>,
    bytes_left: Cell<u64>,
    pub(crate) reads: Cell<u32>,
    pub(crate) bytes: Cell<u64>,
}

impl<'m, M: HeapMemory + ?Sized> Metered<'m, M> {
    pub fn new(mem: &'m M, budget: Budget) -> Self {
        Metered { mem, reads_left: Cell::new(budget.reads), bytes_left: Cell::new(budget.bytes), reads: Cell::new(0), bytes: Cell::new(0) }
    }

    /// Reads spent so far.
    pub fn reads(&self) -> u32 {
        self.reads.get()
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.get()
    }

    /// Fills `buf` from `addr`, charged to the budget.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Miss> {
        let len = buf.len() as u64;
        if self.reads_left.get() == 0 || self.bytes_left.get() < len {
            return Err(Miss::Budget);
        }
        self.reads_left.set(self.reads_left.get() - 1);
        self.bytes_left.set(self.bytes_left.get() - len);
        self.reads.set(self.reads.get() + 1);
        self.bytes.set(self.bytes.get() + len);
        if addr.checked_add(len).is_none() {
            return Err(Miss::Fault);
        }
        self.mem.read(addr, buf).map_err(|_| Miss::Fault)
    }

    pub fn u64(&self, addr: u64) -> Result<u64, Miss> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn u32(&self, addr: u64) -> Result<u32, Miss> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub fn u16(&self, addr: u64) -> Result<u16, Miss> {
        let mut b = [0u8; 2];
        self.read(addr, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    /// `len` bytes from `addr`; `len` must already be bounded by the caller.
    pub fn bytes_at(&self, addr: u64, len: usize) -> Result<Vec<u8>, Miss> {
        let mut v = vec![0u8; len];
        self.read(addr, &mut v)?;
        Ok(v)
    }
}

/// Little-endian words of a buffer read at once (an object's header).
pub(crate) fn word(buf: &[u8], offset: usize) -> u64 {
    buf.get(offset..offset + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 64 bytes of memory at 0x1000.
    struct Page([u8; 64]);

    impl HeapMemory for Page {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
            let o = addr.checked_sub(0x1000).filter(|o| o + buf.len() as u64 <= 64).ok_or(Fault { addr, len: buf.len() })? as usize;
            buf.copy_from_slice(&self.0[o..o + buf.len()]);
            Ok(())
        }
    }

    #[test]
    fn the_budget_stops_reads_and_says_so() {
        let mut img = Page([0; 64]);
        img.0[0] = 7;
        let m = Metered::new(&img, Budget { reads: 2, bytes: 12 });
        assert_eq!(m.u64(0x1000), Ok(7));
        assert_eq!(m.u64(0x1000), Err(Miss::Budget), "4 bytes left, 8 asked");
        assert_eq!(m.u32(0x1000), Ok(7));
        assert_eq!(m.u32(0x1000), Err(Miss::Budget), "no reads left");
        assert_eq!((m.reads(), m.bytes()), (2, 12));
    }

    #[test]
    fn faults_and_wrapping_addresses_are_misses() {
        let img = Page([0; 64]);
        let m = Metered::new(&img, Budget::FRAME);
        assert_eq!(m.u64(0x2000), Err(Miss::Fault));
        assert_eq!(m.u64(u64::MAX - 3), Err(Miss::Fault));
    }
}
