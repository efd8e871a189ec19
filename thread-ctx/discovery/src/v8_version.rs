//! The V8 version a target runs, read from outside: V8 exports its version
//! numbers as data symbols (`v8::internal::Version::major_`, `minor_`, `build_`,
//! `patch_`, ints in `.data`), and node exports every V8 symbol in `.dynsym` for addons. Looked up
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
use std::sync::Arc;

/// `v8::internal::Version::major_`, `minor_`, `build_` and `patch_`, mangled.
pub const VERSION_SYMBOLS: [&str; 4] =
    ["_ZN2v88internal7Version6major_E", "_ZN2v88internal7Version6minor_E", "_ZN2v88internal7Version6build_E", "_ZN2v88internal7Version6patch_E"];

/// The version type of thread-ctx-v8, whose list of supported V8s every reader of V8 here follows.
pub use thread_ctx_v8::V8Version;

/// Where an object keeps V8's version numbers (link-time addresses, in [`VERSION_SYMBOLS`]' order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSymbols {
    pub vaddrs: [u64; 4],
    pub load_segments: Vec<LoadSegment>,
}

/// A V8 version in JSON: `{"major": 13, "minor": 6, "build": 233, "patch": 17}`.
pub fn serialize_version<S: serde::Serializer>(v: &Option<V8Version>, s: S) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    match v {
        None => s.serialize_none(),
        Some(v) => {
            let mut st = s.serialize_struct("V8Version", 4)?;
            st.serialize_field("major", &v.major)?;
            st.serialize_field("minor", &v.minor)?;
            st.serialize_field("build", &v.build)?;
            st.serialize_field("patch", &v.patch)?;
            st.end()
        }
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
    let mut vaddrs = [0; 4];
    for (slot, name) in vaddrs.iter_mut().zip(VERSION_SYMBOLS) {
        let Some(v) = vaddr(name)? else { return Ok(None) };
        *slot = v;
    }
    let program_headers = header.program_headers(endian, data).map_err(|e| bad(format!("program headers: {e}")))?;
    let load_segments = program_headers
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
        .take(super::elf_tls_symbol::MAX_PROGRAM_HEADERS)
        .map(|ph| LoadSegment { vaddr: ph.p_vaddr(endian), file_offset: ph.p_offset(endian), memsz: ph.p_memsz(endian) })
        .collect();
    Ok(Some(VersionSymbols { vaddrs, load_segments }))
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
    #[error("V8 version symbols hold {0}, not a V8 version")]
    Implausible(String),
}

/// Reads the numbers in the live process. Implausible values (a stripped or
/// foreign object that happens to define the names) are an error, not a version.
pub fn read(syms: &VersionSymbols, bias: u64, mem: &impl TargetMemory) -> std::result::Result<V8Version, V8VersionError> {
    let read_u32 = |vaddr: u64, what: &str| -> std::result::Result<u32, V8VersionError> {
        let mut b = [0u8; 4];
        mem.read(bias.wrapping_add(vaddr), &mut b, what).map_err(|e| V8VersionError::Read(Arc::new(e)))?;
        Ok(u32::from_ne_bytes(b))
    };
    let [major, minor, build, patch] = syms.vaddrs;
    let v = V8Version::new(
        read_u32(major, "V8 major version")?,
        read_u32(minor, "V8 minor version")?,
        read_u32(build, "V8 build number")?,
        read_u32(patch, "V8 patch number")?,
    );
    if !v.is_plausible() {
        return Err(V8VersionError::Implausible(format!("{}.{}.{}.{}", v.major, v.minor, v.build, v.patch)));
    }
    Ok(v)
}
