//! Static (on-disk) part of discovery: does an ELF object define
//! `otel_thread_ctx_v1`, and which dynamic relocations reach it?
//!
//! Nothing here touches the live process; `resolve.rs` turns the result into a
//! `TlsAccess` using the process's memory.

use crate::error::{Error, Result};
use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{Endianness, Object, ObjectSymbol, ReadCache, RelocationFlags, RelocationTarget};
use serde::Serialize;
use std::fs::File;
use std::io::Read;

/// The OTEP 4947 TLS symbol name.
pub const SYMBOL: &str = "otel_thread_ctx_v1";

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

/// An ELF object that defines `otel_thread_ctx_v1`.
#[derive(Debug, Clone, Serialize)]
pub struct WriterObject {
    /// Offset of the symbol inside the module's TLS block (st_value of an STT_TLS symbol).
    pub symbol_value: u64,
    /// ET_EXEC, or ET_DYN with PT_INTERP (a PIE): may use local exec.
    pub executable_like: bool,
    pub relocations: Vec<TlsReloc>,
    pub load_segments: Vec<LoadSegment>,
    pub tls_segment: Option<TlsSegment>,
}

/// Opens `open_path` (read lazily: large binaries such as node are not read whole)
/// and scans it; `display` names the object in errors. Ok(None) = not a writer.
pub fn scan_file(open_path: &str, display: &str) -> Result<Option<WriterObject>> {
    // Only regular files: opening a mapped device node (GPU, /dev/zero...) is not harmless.
    let meta = std::fs::metadata(open_path).map_err(|e| Error::io(open_path, e))?;
    if !meta.is_file() {
        return Ok(None);
    }
    let mut file = File::open(open_path).map_err(|e| Error::io(open_path, e))?;
    let mut magic = [0u8; 5];
    if file.read_exact(&mut magic).is_err() || &magic[..4] != b"\x7fELF" || magic[4] != elf::ELFCLASS64 {
        return Ok(None);
    }
    let cache = ReadCache::new(file);
    let parsed = ElfFile64::<Endianness, _>::parse(&cache)
        .map_err(|e| Error::Elf { path: display.into(), reason: e.to_string() })?;
    scan_elf(&parsed, display)
}

fn scan_elf<'d, R: object::ReadRef<'d>>(
    file: &ElfFile64<'d, Endianness, R>,
    display: &str,
) -> Result<Option<WriterObject>> {
    let bad = |reason: String| Error::Elf { path: display.into(), reason };
    let Some(sym) = file.dynamic_symbols().find(|s| s.name() == Ok(SYMBOL) && !s.is_undefined()) else {
        return Ok(None);
    };
    if sym.kind() != object::SymbolKind::Tls || sym.size() != 8 {
        return Err(bad(format!(
            "{SYMBOL} is in .dynsym but is {:?} of size {}, expected an 8-byte STT_TLS symbol",
            sym.kind(),
            sym.size()
        )));
    }
    if file.elf_header().e_machine(file.endian()) != elf::EM_X86_64 {
        return Err(bad("only x86-64 objects are supported".into()));
    }
    let symbol_value = sym.address();
    let relocations = tls_relocations(file, sym.index().0, symbol_value);

    let endian = file.endian();
    let mut load_segments = Vec::new();
    let mut tls_segment = None;
    let mut has_interp = false;
    for ph in file.elf_program_headers() {
        match ph.p_type(endian) {
            elf::PT_LOAD => load_segments.push(LoadSegment {
                vaddr: ph.p_vaddr(endian),
                file_offset: ph.p_offset(endian),
                memsz: ph.p_memsz(endian),
            }),
            elf::PT_TLS => {
                tls_segment = Some(TlsSegment { memsz: ph.p_memsz(endian), align: ph.p_align(endian).max(1) })
            }
            elf::PT_INTERP => has_interp = true,
            _ => {}
        }
    }
    let e_type = file.elf_header().e_type(endian);
    Ok(Some(WriterObject {
        symbol_value,
        executable_like: e_type == elf::ET_EXEC || (e_type == elf::ET_DYN && has_interp),
        relocations,
        load_segments,
        tls_segment,
    }))
}

/// Dynamic TLS relocations that reach the symbol: by symbol index (the symbol is
/// preemptible, the usual case), or, for TLSDESC/TPOFF64 against no symbol
/// (linker bound it locally), by an addend equal to the symbol's TLS offset.
fn tls_relocations<'d, R: object::ReadRef<'d>>(
    file: &ElfFile64<'d, Endianness, R>,
    sym_index: usize,
    symbol_value: u64,
) -> Vec<TlsReloc> {
    let Some(relocs) = file.dynamic_relocations() else { return Vec::new() };
    relocs
        .filter_map(|(vaddr, r)| {
            let RelocationFlags::Elf { r_type } = r.flags() else { return None };
            let kind = TlsRelocKind::from_r_type(r_type)?;
            let reaches = match r.target() {
                RelocationTarget::Symbol(i) => i.0 == sym_index,
                RelocationTarget::Absolute => {
                    kind != TlsRelocKind::DtpMod64 && r.addend() as u64 == symbol_value
                }
                _ => false,
            };
            reaches.then_some(TlsReloc { kind, vaddr, addend: r.addend() })
        })
        .collect()
}
