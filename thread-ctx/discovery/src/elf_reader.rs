//! The ELF objects a target maps, read so that the file cannot choose how
//! much we read or allocate: only regular files, opened without blocking (a
//! FIFO swapped in under a mapped path must not hang discovery), every read
//! inside the file and under a per-read and a per-object budget. A section
//! header claiming gigabytes then fails as "too large" instead of allocating.
//!
//! The parsing itself is the `object` crate's checked API over this reader:
//! nothing here interprets ELF structures.

use object::read::{ReadCache, ReadCacheOps, ReadRef};
use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::os::unix::fs::OpenOptionsExt;

/// Largest single read: a whole symbol table, relocation table or hash table.
/// The largest real one we meet is node's `.dynstr` (~8 MiB).
pub const MAX_READ_BYTES: u64 = 32 << 20;
/// Everything read from one object, cached reads included.
pub const MAX_TOTAL_BYTES: u64 = 64 << 20;

/// An ELF file behind a budget; `&ElfData` is what `object` parses.
pub struct ElfData<R: ReadCacheOps> {
    cache: ReadCache<R>,
    spent: Cell<u64>,
}

impl<R: ReadCacheOps> ElfData<R> {
    pub fn new(stream: R) -> Self {
        ElfData { cache: ReadCache::new(stream), spent: Cell::new(0) }
    }

    /// Bytes read (or cached) so far.
    pub fn spent(&self) -> u64 {
        self.spent.get()
    }

    fn charge(&self, bytes: u64) -> Result<(), ()> {
        let total = self.spent.get().saturating_add(bytes);
        if total > MAX_TOTAL_BYTES {
            return Err(());
        }
        self.spent.set(total);
        Ok(())
    }
}

impl<'a, R: ReadCacheOps> ReadRef<'a> for &'a ElfData<R> {
    fn len(self) -> Result<u64, ()> {
        (&self.cache).len()
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        // ReadCache already refuses reads past the end of the file; these bound what is
        // inside it (a sparse file can be as large as the target likes).
        if size > MAX_READ_BYTES {
            return Err(());
        }
        self.charge(size)?;
        (&self.cache).read_bytes_at(offset, size)
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        // A string read allocates at most a few KiB (ReadCache's own limit) and keeps
        // what it found: refuse once the budget is spent, charge what was kept.
        if self.spent.get() >= MAX_TOTAL_BYTES {
            return Err(());
        }
        let found = (&self.cache).read_bytes_at_until(range, delimiter)?;
        self.charge(found.len() as u64 + 1)?;
        Ok(found)
    }
}

/// Opens `path` as a 64-bit ELF object. Ok(None): not a regular file, or not
/// a 64-bit ELF file (nothing to read there).
pub fn open(path: &str) -> io::Result<Option<ElfData<File>>> {
    use std::os::unix::fs::MetadataExt;
    // Look before opening: opening a mapped device node (a GPU, /dev/zero...) is not harmless.
    let before = std::fs::metadata(path)?;
    if !before.is_file() {
        return Ok(None);
    }
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY).open(path)?;
    let opened = file.metadata()?;
    if !opened.is_file() || (opened.dev(), opened.ino()) != (before.dev(), before.ino()) {
        return Ok(None); // swapped between the look and the open
    }
    let mut magic = [0u8; 5];
    if Read::read_exact(&mut file, &mut magic).is_err() || &magic[..4] != b"\x7fELF" || magic[4] != object::elf::ELFCLASS64 {
        return Ok(None);
    }
    Ok(Some(ElfData::new(file)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn reads_are_bounded_per_read_and_per_object() {
        let data = ElfData::new(Cursor::new(vec![7u8; 4096]));
        let d = &data;
        assert_eq!(d.read_bytes_at(0, 16).unwrap(), &[7u8; 16]);
        assert!(d.read_bytes_at(4000, 200).is_err(), "past the end of the file");
        assert!(d.read_bytes_at(0, MAX_READ_BYTES + 1).is_err(), "larger than one read may be");
        data.spent.set(MAX_TOTAL_BYTES - 10);
        assert!(d.read_bytes_at(0, 11).is_err(), "over the object's budget");
        assert!(d.read_bytes_at_until(0..4096, 0).is_err(), "no string reads once the budget is spent");
    }

    #[test]
    fn non_regular_and_non_elf_files_are_not_opened_as_elf() {
        assert!(open("/dev/null").unwrap().is_none());
        assert!(open("/proc/self/status").unwrap().is_none());
        assert!(open("/nonexistent").is_err());
        assert!(open(std::env::current_exe().unwrap().to_str().unwrap()).unwrap().is_some());
    }
}
