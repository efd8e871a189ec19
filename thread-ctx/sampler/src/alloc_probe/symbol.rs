//! Where to put the allocation uprobe in one ELF file: the file offset of
//! `v8::internal::SamplingHeapProfiler::SampleObject(Address, size_t)`, which
//! V8 calls once per sampled allocation while its sampling heap profiler runs.
//!
//! Builds differ in where they keep it: Debian's Node 20 and the official 18
//! and 22 export it in `.dynsym` (found through `.gnu.hash`, a few reads); the
//! official 24 and 26 have it only as a local symbol in `.symtab` (found by
//! its name in `.strtab`, then the entry naming that string). A stripped
//! binary without a `.dynsym` entry has no place for the probe.
//!
//! Everything is read through [`elf_reader`](thread_ctx_discovery::elf_reader):
//! the target chooses the file, so every read is bounded.

use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable, Sym, SymbolTable};
use object::read::ReadCacheOps;
use object::Endianness;
use thread_ctx_discovery::elf_reader::{self, ElfData, MAX_READ_BYTES};
use thread_ctx_discovery::elf_tls_symbol::{find_defined, Sym64, MAX_PROGRAM_HEADERS};

/// The mangled name of `v8::internal::SamplingHeapProfiler::SampleObject(unsigned long, unsigned long)`.
pub const SAMPLE_OBJECT: &str = "_ZN2v88internal20SamplingHeapProfiler12SampleObjectEmm";

/// Where the probe goes, and which table named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeOffset {
    /// File offset of the function's first instruction (what a uprobe is attached at).
    pub file_offset: u64,
    /// The symbol's link-time address.
    pub vaddr: u64,
    pub table: SymbolTableKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolTableKind {
    Dynsym,
    Symtab,
}

impl SymbolTableKind {
    pub fn name(self) -> &'static str {
        match self {
            SymbolTableKind::Dynsym => ".dynsym",
            SymbolTableKind::Symtab => ".symtab",
        }
    }
}

/// Why a file offers no place for the probe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeSymbolError {
    #[error("{path}: no {SAMPLE_OBJECT} in .dynsym or .symtab (not V8, or stripped): its allocations cannot be probed")]
    Missing { path: String },
    #[error("{path}: not a 64-bit ELF file")]
    NotElf { path: String },
    #[error("{path}: {reason}")]
    Malformed { path: String, reason: String },
    #[error("{path}: {cause}")]
    Io { path: String, cause: String },
}

/// Opens `open_path` and finds the probe's offset; `display` names the file in errors.
pub fn probe_offset_in_file(open_path: &str, display: &str) -> Result<ProbeOffset, ProbeSymbolError> {
    match elf_reader::open(open_path) {
        Ok(Some(data)) => probe_offset(&data, display),
        Ok(None) => Err(ProbeSymbolError::NotElf { path: display.into() }),
        Err(e) => Err(ProbeSymbolError::Io { path: display.into(), cause: e.to_string() }),
    }
}

/// The probe's offset in one ELF object: a pure function of its bytes.
pub fn probe_offset<R: ReadCacheOps>(data: &ElfData<R>, display: &str) -> Result<ProbeOffset, ProbeSymbolError> {
    let bad = |what: &str, e: object::Error| ProbeSymbolError::Malformed { path: display.into(), reason: format!("{what}: {e}") };
    let header = FileHeader64::<Endianness>::parse(data).map_err(|e| bad("ELF header", e))?;
    let endian = header.endian().map_err(|e| bad("ELF header", e))?;
    let sections = header.sections(endian, data).map_err(|e| bad("section headers", e))?;
    let name = SAMPLE_OBJECT.as_bytes();
    // In .dynsym through the one symbol lookup of the reader (a table it cannot search is as good
    // as none here: .symtab is read next).
    let in_dynsym = sections.symbols(endian, data, elf::SHT_DYNSYM).ok().and_then(|dynsym| {
        let (_, sym) = find_defined(&sections, endian, data, &dynsym, name).ok()??;
        is_defined_function(sym, endian).then(|| sym.st_value(endian))
    });
    let found = in_dynsym.map(|v| (v, SymbolTableKind::Dynsym));
    let found = match found {
        Some(f) => Some(f),
        None => {
            let symtab = sections.symbols(endian, data, elf::SHT_SYMTAB).map_err(|e| bad(".symtab", e))?;
            let malformed = |reason: &str| ProbeSymbolError::Malformed { path: display.into(), reason: format!(".symtab: {reason}") };
            in_symtab(&sections, endian, data, &symtab, name).map_err(malformed)?.map(|v| (v, SymbolTableKind::Symtab))
        }
    };
    let Some((vaddr, table)) = found else {
        return Err(ProbeSymbolError::Missing { path: display.into() });
    };
    let program_headers = header.program_headers(endian, data).map_err(|e| bad("program headers", e))?;
    if program_headers.len() > MAX_PROGRAM_HEADERS {
        return Err(ProbeSymbolError::Malformed {
            path: display.into(),
            reason: format!("{} program headers, expected at most {MAX_PROGRAM_HEADERS}", program_headers.len()),
        });
    }
    // The executable PT_LOAD segment holding the code: file offset = vaddr - p_vaddr + p_offset.
    let segment = program_headers.iter().find(|ph| {
        let (start, size) = (ph.p_vaddr(endian), ph.p_filesz(endian));
        ph.p_type(endian) == elf::PT_LOAD && ph.p_flags(endian) & elf::PF_X != 0 && start <= vaddr && vaddr - start < size
    });
    let Some(ph) = segment else {
        return Err(ProbeSymbolError::Malformed {
            path: display.into(),
            reason: format!("{SAMPLE_OBJECT} at {vaddr:#x} ({}) lies in no executable segment", table.name()),
        });
    };
    Ok(ProbeOffset { file_offset: vaddr - ph.p_vaddr(endian) + ph.p_offset(endian), vaddr, table })
}

type Sections<'d, R> = SectionTable<'d, FileHeader64<Endianness>, &'d ElfData<R>>;
type Symbols<'d, R> = SymbolTable<'d, FileHeader64<Endianness>, &'d ElfData<R>>;

fn is_defined_function(s: &Sym64, endian: Endianness) -> bool {
    s.st_type() == elf::STT_FUNC && s.st_shndx(endian) != elf::SHN_UNDEF && s.st_value(endian) != 0
}

/// A defined function `name` in `.symtab`: the string's offsets in `.strtab` first (one pass over
/// bytes), then the entry whose st_name is one of them. Comparing every entry's name would read
/// each of node's ~120,000 strings on its own.
fn in_symtab<'d, R: ReadCacheOps>(
    sections: &Sections<'d, R>,
    endian: Endianness,
    data: &'d ElfData<R>,
    symtab: &Symbols<'d, R>,
    name: &[u8],
) -> Result<Option<u64>, &'static str> {
    if symtab.is_empty() {
        return Ok(None);
    }
    let strtab = sections.section(symtab.string_section()).map_err(|_| "no string table")?;
    if strtab.sh_size(endian) > MAX_READ_BYTES {
        return Err("string table larger than the reader reads");
    }
    let strings = strtab.data(endian, data).map_err(|_| "string table unreadable")?;
    let mut needle = name.to_vec();
    needle.push(0);
    let offsets: Vec<u32> = memchr::memmem::find_iter(strings, &needle).filter_map(|at| u32::try_from(at).ok()).take(16).collect();
    if offsets.is_empty() {
        return Ok(None);
    }
    Ok(symtab.symbols().iter().find(|s| offsets.contains(&s.st_name(endian)) && is_defined_function(s, endian)).map(|s| s.st_value(endian)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_are_not_elf_are_refused_by_name() {
        assert_eq!(probe_offset_in_file("/proc/self/status", "status"), Err(ProbeSymbolError::NotElf { path: "status".into() }));
        assert!(matches!(probe_offset_in_file("/nonexistent/node", "node"), Err(ProbeSymbolError::Io { .. })));
    }

    #[test]
    fn a_binary_without_v8_has_no_probe_offset() {
        let exe = std::env::current_exe().unwrap();
        let e = probe_offset_in_file(exe.to_str().unwrap(), "self").unwrap_err();
        assert_eq!(e, ProbeSymbolError::Missing { path: "self".into() });
        assert!(e.to_string().contains("stripped"), "{e}");
    }
}
