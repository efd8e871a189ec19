//! Static (on-disk) part of discovery: does an ELF object define one of the
//! thread-context TLS symbols (`otel_thread_ctx_v1`, `otel_thread_ctx_nodejs_v1`),
//! and which dynamic relocations reach it?
//!
//! Nothing here touches the live process; `tls_model.rs` turns the result into a
//! `TlsAccess` using the process's memory.

use super::elf_reader::{self, ElfData};
use crate::error::{Error, Result};
use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, ProgramHeader, Rela, SectionHeader, SectionTable, Sym, SymbolTable, VersionTable};
use object::read::ReadCacheOps;
use object::{Endianness, SectionIndex};
use serde::Serialize;

/// The OTEP 4947 TLS symbol name.
pub const SYMBOL: &str = "otel_thread_ctx_v1";
/// The `nodejs_v1_dev` discovery struct's TLS symbol name.
pub const NODEJS_SYMBOL: &str = "otel_thread_ctx_nodejs_v1";

/// A thread-local a writer publishes and a reader knows how to follow: every
/// one is found and resolved the same way (STT_TLS in `.dynsym`, any TLS model);
/// they differ in size and in what the slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TlsSymbol {
    /// OTEP 4947: an 8-byte pointer to the thread's record.
    ThreadCtxV1,
    /// `nodejs_v1_dev`: a 32-byte struct `{cped_slot, als_handle, als_identity_hash, pad, undefined_addr}`
    /// from which the record is found through V8's async-context frame.
    NodejsV1,
}

impl TlsSymbol {
    pub const ALL: [TlsSymbol; 2] = [TlsSymbol::ThreadCtxV1, TlsSymbol::NodejsV1];

    pub fn name(self) -> &'static str {
        match self {
            TlsSymbol::ThreadCtxV1 => SYMBOL,
            TlsSymbol::NodejsV1 => NODEJS_SYMBOL,
        }
    }

    /// st_size the symbol must have.
    pub fn size(self) -> u64 {
        match self {
            TlsSymbol::ThreadCtxV1 => 8,
            TlsSymbol::NodejsV1 => 32,
        }
    }
}

/// A dynamic relocation kind that can reach a TLS symbol (x86-64 numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TlsRelocKind {
    /// R_X86_64_TLSDESC: a two-word descriptor {resolver, argument} in the GOT.
    #[serde(rename = "tlsdesc")]
    TlsDesc,
    /// R_X86_64_DTPMOD64: the module-id word of a general-dynamic GOT pair.
    DtpMod64,
    /// R_X86_64_TPOFF64: initial exec, the thread-pointer offset in the GOT.
    TpOff64,
}

impl TlsRelocKind {
    fn from_r_type(r_type: u32) -> Option<Self> {
        match r_type {
            elf::R_X86_64_TLSDESC => Some(Self::TlsDesc),
            elf::R_X86_64_DTPMOD64 => Some(Self::DtpMod64),
            elf::R_X86_64_TPOFF64 => Some(Self::TpOff64),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TlsReloc {
    pub kind: TlsRelocKind,
    /// Link-time virtual address of the GOT slot the relocation patches.
    pub vaddr: u64,
    pub addend: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LoadSegment {
    pub vaddr: u64,
    pub file_offset: u64,
    pub memsz: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TlsSegment {
    pub memsz: u64,
    pub align: u64,
}

/// An ELF object that defines one of the thread-context symbols.
#[derive(Debug, Clone, Serialize)]
pub struct WriterObject {
    /// Which symbol it defines.
    pub symbol: TlsSymbol,
    /// Offset of the symbol inside the module's TLS block (st_value of an STT_TLS symbol).
    pub symbol_value: u64,
    /// ET_EXEC, or ET_DYN with PT_INTERP (a PIE): may use local exec.
    pub executable_like: bool,
    pub relocations: Vec<TlsReloc>,
    pub load_segments: Vec<LoadSegment>,
    pub tls_segment: Option<TlsSegment>,
}

/// Relocations kept per object: one of each kind is all classification needs;
/// a table listing millions must not become millions of entries here.
pub const MAX_TLS_RELOCS: usize = 16;
/// More program headers than any linker writes.
pub const MAX_PROGRAM_HEADERS: usize = 1024;
/// Symbols searched one by one in an object without `.gnu.hash` (every
/// toolchain of the last decade writes one; node's `.dynsym` has ~90 000).
pub const MAX_UNHASHED_SYMBOLS: usize = 200_000;

/// Opens `open_path` (regular files only, read lazily and within budget:
/// large binaries such as node are not read whole) and scans it for every
/// symbol in [`TlsSymbol::ALL`]; `display` names the object in errors. Empty = not a writer.
pub fn scan_file(open_path: &str, display: &str) -> Result<Vec<WriterObject>> {
    match elf_reader::open(open_path).map_err(|e| Error::io(open_path, e))? {
        Some(data) => scan_all(&data, display),
        None => Ok(Vec::new()),
    }
}

/// [`scan`] for every known symbol, in [`TlsSymbol::ALL`] order.
pub fn scan_all<R: ReadCacheOps>(data: &ElfData<R>, display: &str) -> Result<Vec<WriterObject>> {
    let mut found = Vec::new();
    for symbol in TlsSymbol::ALL {
        found.extend(scan(data, display, symbol)?);
    }
    Ok(found)
}

/// Scans one 64-bit ELF object for a definition of `symbol`: a
/// pure function of the file's bytes (fuzzed), every structure read through
/// `object`'s checked accessors. Only the headers, `.dynsym` (names looked up
/// through `.gnu.hash` when present), and relocation tables linked to it are
/// read; never `.symtab`.
pub fn scan<R: ReadCacheOps>(data: &ElfData<R>, display: &str, symbol: TlsSymbol) -> Result<Option<WriterObject>> {
    let bad = |reason: String| Error::Elf { path: display.into(), reason };
    let broken = |what: &str, e: object::Error| bad(format!("{what}: {e}"));
    let header = FileHeader64::<Endianness>::parse(data).map_err(|e| broken("ELF header", e))?;
    let endian = header.endian().map_err(|e| broken("ELF header", e))?;
    let sections = header.sections(endian, data).map_err(|e| broken("section headers", e))?;
    let dynsym = sections.symbols(endian, data, elf::SHT_DYNSYM).map_err(|e| broken(".dynsym", e))?;
    let Some((sym_index, sym)) = find_defined(&sections, endian, data, &dynsym, symbol.name().as_bytes()).map_err(|e| bad(e.to_string()))? else {
        return Ok(None);
    };
    let (kind, size) = (sym.st_type(), sym.st_size(endian));
    if kind != elf::STT_TLS || size != symbol.size() {
        return Err(bad(format!(
            "{} is in .dynsym but has type {kind} and size {size}, expected a {}-byte STT_TLS symbol",
            symbol.name(),
            symbol.size()
        )));
    }
    if header.e_machine(endian) != elf::EM_X86_64 {
        return Err(bad("only x86-64 objects are supported".into()));
    }
    let symbol_value = sym.st_value(endian);
    let relocations =
        tls_relocations(&sections, endian, data, dynsym.section(), sym_index, symbol_value).map_err(|e| broken("relocation table", e))?;

    let program_headers = header.program_headers(endian, data).map_err(|e| broken("program headers", e))?;
    if program_headers.len() > MAX_PROGRAM_HEADERS {
        return Err(bad(format!("{} program headers, expected at most {MAX_PROGRAM_HEADERS}", program_headers.len())));
    }
    let mut load_segments = Vec::new();
    let mut tls_segment = None;
    let mut has_interp = false;
    for ph in program_headers {
        match ph.p_type(endian) {
            elf::PT_LOAD => {
                load_segments.push(LoadSegment { vaddr: ph.p_vaddr(endian), file_offset: ph.p_offset(endian), memsz: ph.p_memsz(endian) })
            }
            elf::PT_TLS => tls_segment = Some(TlsSegment { memsz: ph.p_memsz(endian), align: ph.p_align(endian).max(1) }),
            elf::PT_INTERP => has_interp = true,
            _ => {}
        }
    }
    let e_type = header.e_type(endian);
    Ok(Some(WriterObject {
        symbol,
        symbol_value,
        executable_like: e_type == elf::ET_EXEC || (e_type == elf::ET_DYN && has_interp),
        relocations,
        load_segments,
        tls_segment,
    }))
}

pub type Sym64 = elf::Sym64<Endianness>;

/// A symbol table without the hash table that finds a name in it in a few reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{symbols} dynamic symbols and no .gnu.hash to look one up")]
pub struct Unhashed {
    pub symbols: usize,
}

/// `name` defined in `.dynsym`: through the GNU hash table the dynamic loader itself uses (a
/// few reads even in node's 90 000 symbols), else by walking a table of at most
/// [`MAX_UNHASHED_SYMBOLS`]. Every symbol lookup of the reader goes through here.
pub fn find_defined<'d, R: ReadCacheOps>(
    sections: &SectionTable<'d, FileHeader64<Endianness>, &'d ElfData<R>>,
    endian: Endianness,
    data: &'d ElfData<R>,
    dynsym: &SymbolTable<'d, FileHeader64<Endianness>, &'d ElfData<R>>,
    name: &[u8],
) -> std::result::Result<Option<(usize, &'d Sym64)>, Unhashed> {
    let defined = |s: &Sym64| s.st_shndx(endian) != elf::SHN_UNDEF;
    for section in sections.iter().filter(|s| s.sh_type(endian) == elf::SHT_GNU_HASH) {
        if section.sh_link(endian) as usize != dynsym.section().0 {
            continue;
        }
        // object's lookup divides by the bucket count and masks by the bloom size: both must be non-zero.
        let Ok(Some(h)) = section.gnu_hash_header(endian, data) else { continue };
        if h.bucket_count.get(endian) == 0 || h.bloom_count.get(endian) == 0 {
            continue;
        }
        let Ok(Some((table, _))) = section.gnu_hash(endian, data) else { continue };
        let found = table.find(endian, name, elf::gnu_hash(name), None, dynsym, &VersionTable::default());
        return Ok(found.filter(|(_, s)| defined(s)).map(|(i, s)| (i.0, s)));
    }
    let symbols = dynsym.symbols();
    if symbols.len() > MAX_UNHASHED_SYMBOLS {
        return Err(Unhashed { symbols: symbols.len() });
    }
    let strings = dynsym.strings();
    Ok(symbols.iter().enumerate().find(|(_, s)| defined(s) && s.name(endian, strings) == Ok(name)))
}

/// Dynamic TLS relocations that reach the symbol: by symbol index (the symbol is
/// preemptible, the usual case), or, for TLSDESC/TPOFF64 against no symbol
/// (linker bound it locally), by an addend equal to the symbol's TLS offset.
/// Reads the RELA tables linked to `.dynsym`.
fn tls_relocations<'d, R: ReadCacheOps>(
    sections: &SectionTable<'d, FileHeader64<Endianness>, &'d ElfData<R>>,
    endian: Endianness,
    data: &'d ElfData<R>,
    dynsym: SectionIndex,
    sym_index: usize,
    symbol_value: u64,
) -> std::result::Result<Vec<TlsReloc>, object::Error> {
    let mut found = Vec::new();
    for section in sections.iter().filter(|s| s.sh_type(endian) == elf::SHT_RELA && s.link(endian) == dynsym) {
        let Some((relas, _)) = section.rela(endian, data)? else { continue };
        for r in relas {
            let Some(kind) = TlsRelocKind::from_r_type(r.r_type(endian, false)) else { continue };
            let addend = r.r_addend(endian);
            let reaches = match r.r_sym(endian, false) as usize {
                0 => kind != TlsRelocKind::DtpMod64 && addend as u64 == symbol_value,
                i => i == sym_index,
            };
            if reaches {
                found.push(TlsReloc { kind, vaddr: r.r_offset(endian), addend });
                if found.len() == MAX_TLS_RELOCS {
                    return Ok(found);
                }
            }
        }
    }
    Ok(found)
}
