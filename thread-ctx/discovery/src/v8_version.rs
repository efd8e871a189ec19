//! The V8 version a target runs, read from outside: V8 exports its version
//! numbers as data symbols (`v8::internal::Version::major_`, `minor_`, ints in
//! `.data`), and node exports every V8 symbol in `.dynsym` for addons. Looked up
//! in the object that defines them (node, or a libnode.so) and read in the live
//! process at load bias + st_value: the numbers the running V8 was built with,
//! not what a writer says about itself.

use super::elf_reader::ElfData;
use super::elf_tls_symbol::{find_defined, LoadSegment};
use super::remote_memory::TargetMemory;
use crate::error::{Error, Result};
use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, ProgramHeader, Sym};
use object::read::ReadCacheOps;
use object::Endianness;
use serde::Serialize;
use std::sync::Arc;

/// `v8::internal::Version::major_` and `minor_`, mangled.
pub const MAJOR_SYMBOL: &str = "_ZN2v88internal7Version6major_E";
pub const MINOR_SYMBOL: &str = "_ZN2v88internal7Version6minor_E";

/// Where an object keeps V8's version numbers (link-time addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSymbols {
    pub major_vaddr: u64,
    pub minor_vaddr: u64,
    pub load_segments: Vec<LoadSegment>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct V8Version {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for V8Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "V8 {}.{}", self.major, self.minor)
    }
}

/// The object's definitions of both version symbols (4-byte STT_OBJECT in
/// `.dynsym`), or None when it has none. Read like the TLS symbols: through
/// `.gnu.hash`, within the object reader's budget.
pub fn scan<R: ReadCacheOps>(data: &ElfData<R>, display: &str) -> Result<Option<VersionSymbols>> {
    let bad = |reason: String| Error::Elf { path: display.into(), reason };
    let header = FileHeader64::<Endianness>::parse(data).map_err(|e| bad(format!("ELF header: {e}")))?;
    let endian = header.endian().map_err(|e| bad(format!("ELF header: {e}")))?;
    let sections = header.sections(endian, data).map_err(|e| bad(format!("section headers: {e}")))?;
    let dynsym = sections.symbols(endian, data, elf::SHT_DYNSYM).map_err(|e| bad(format!(".dynsym: {e}")))?;
    let vaddr = |name: &str| -> Result<Option<u64>> {
        let Some((_, sym)) = find_defined(&sections, endian, data, &dynsym, name.as_bytes()).map_err(|e| bad(e.to_string()))? else {
            return Ok(None);
        };
        if sym.st_type() != elf::STT_OBJECT || sym.st_size(endian) != 4 {
            return Err(bad(format!("{name} is not a 4-byte data symbol")));
        }
        Ok(Some(sym.st_value(endian)))
    };
    let (Some(major_vaddr), Some(minor_vaddr)) = (vaddr(MAJOR_SYMBOL)?, vaddr(MINOR_SYMBOL)?) else {
        return Ok(None);
    };
    let program_headers = header.program_headers(endian, data).map_err(|e| bad(format!("program headers: {e}")))?;
    let load_segments = program_headers
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
        .take(super::elf_tls_symbol::MAX_PROGRAM_HEADERS)
        .map(|ph| LoadSegment { vaddr: ph.p_vaddr(endian), file_offset: ph.p_offset(endian), memsz: ph.p_memsz(endian) })
        .collect();
    Ok(Some(VersionSymbols { major_vaddr, minor_vaddr, load_segments }))
}

/// Why the target's V8 version is not known.
#[derive(Debug, Clone, thiserror::Error)]
pub enum V8VersionError {
    #[error("no mapped object defines V8's version symbols")]
    NoSymbols,
    #[error("{path}: no mapping matches a PT_LOAD segment")]
    NotMapped { path: String },
    #[error(transparent)]
    Read(Arc<Error>),
    #[error("V8 version symbols hold {major}.{minor}, not a V8 version")]
    Implausible { major: u32, minor: u32 },
}

/// Reads the numbers in the live process. Implausible values (a stripped or
/// foreign object that happens to define the names) are an error, not a version.
pub fn read(syms: &VersionSymbols, bias: u64, mem: &impl TargetMemory) -> std::result::Result<V8Version, V8VersionError> {
    let read_u32 = |vaddr: u64, what: &str| -> std::result::Result<u32, V8VersionError> {
        let mut b = [0u8; 4];
        mem.read(bias.wrapping_add(vaddr), &mut b, what).map_err(|e| V8VersionError::Read(Arc::new(e)))?;
        Ok(u32::from_ne_bytes(b))
    };
    let v = V8Version { major: read_u32(syms.major_vaddr, "V8 major version")?, minor: read_u32(syms.minor_vaddr, "V8 minor version")? };
    if !(1..=99).contains(&v.major) || v.minor > 99 {
        return Err(V8VersionError::Implausible { major: v.major, minor: v.minor });
    }
    Ok(v)
}
