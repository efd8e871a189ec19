//! What a node binary says about its V8, read from the ELF file (not the
//! process): the `v8dbg_*` postmortem symbols (official builds export them in
//! `.dynsym`; a local `.symtab` copy is read too), V8's version numbers
//! (`v8::internal::Version::major_` ...), the bytecode size table the baseline
//! tier's pc → bytecode mapping needs (`Bytecodes::kBytecodeSizes`, `.symtab`
//! only), and where the interpreter's bytecode handlers are (`Builtins_*`
//! symbols of the embedded builtins, `.symtab` only), and where each thread
//! of a process running the file keeps its isolate (V8's thread-local
//! `g_current_isolate_`, with the file's TLS segment).
//!
//! The parsing is the `object` crate's checked API over whatever reader the
//! caller gives (the agent's is budgeted: a file cannot choose how much is read).

use crate::version::V8Version;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::read::ReadRef;
use object::{Endianness, Object, ObjectSection, ObjectSymbol, SectionIndex};
use std::collections::HashMap;

const V8DBG_PREFIX: &str = "v8dbg_";
const VERSION_SYMBOLS: [&str; 4] =
    ["_ZN2v88internal7Version6major_E", "_ZN2v88internal7Version6minor_E", "_ZN2v88internal7Version6build_E", "_ZN2v88internal7Version6patch_E"];
const BYTECODE_SIZES: &str = "_ZN2v88internal11interpreter9Bytecodes14kBytecodeSizesE";
/// The first bytecode handler (bytecode 0, the `Wide` prefix): the handlers
/// follow it to the end of the embedded builtins (V8 lists them last).
const FIRST_BYTECODE_HANDLER: &str = "Builtins_WideHandler";
const BUILTIN_PREFIX: &str = "Builtins_";
/// The thread-local variable holding a thread's `Isolate*` (V8 11+: a C++ `thread_local`; V8 10
/// kept the isolate behind a pthread key, which this reader does not follow).
pub const CURRENT_ISOLATE_SYMBOL: &str = "_ZN2v88internal18g_current_isolate_E";
/// More `v8dbg_*` symbols than any V8 publishes (~530): the rest is not read.
const MAX_V8DBG_SYMBOLS: usize = 4096;
/// Symbols looked at, both tables together: node has ~190,000; a file claiming
/// more is not read past this.
const MAX_SYMBOLS: usize = 1 << 22;
/// `kBytecodeSizes` is `uint8_t[3][kBytecodeCount]` with fewer than 256 bytecodes.
const MAX_BYTECODE_SIZES: u64 = 3 * 256;

/// A range of link-time addresses of the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VaddrRange {
    pub start: u64,
    pub end: u64,
}

impl VaddrRange {
    pub fn contains(&self, vaddr: u64) -> bool {
        self.start <= vaddr && vaddr < self.end
    }
}

/// V8's operand-size table: for each operand scale (1, 2, 4 bytes) the size of each bytecode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BytecodeSizes {
    pub table: Vec<u8>,
}

impl BytecodeSizes {
    /// Checked: three rows of one size per bytecode, each 1..32 bytes (V8's largest is 17).
    pub fn new(table: Vec<u8>) -> Option<Self> {
        (!table.is_empty()
            && table.len().is_multiple_of(3)
            && table.len() as u64 <= MAX_BYTECODE_SIZES
            && table.iter().all(|&s| (1..32).contains(&s)))
        .then_some(BytecodeSizes { table })
    }

    pub fn count(&self) -> usize {
        self.table.len() / 3
    }
}

/// Everything read from one node binary.
#[derive(Debug, Clone, Default)]
pub struct PostmortemSymbols {
    /// The file, for messages.
    pub path: String,
    pub values: HashMap<String, i64>,
    pub version: Option<V8Version>,
    pub bytecode_sizes: Option<BytecodeSizes>,
    /// The interpreter's bytecode handlers.
    pub bytecode_handlers: Option<VaddrRange>,
    /// Every embedded builtin (handlers, trampolines and the rest).
    pub builtins: Option<VaddrRange>,
    /// `v8dbg_*` symbols beyond [`MAX_V8DBG_SYMBOLS`], not read.
    pub dropped: usize,
    /// The loadable segments: (file offset, link-time address, bytes in the file), to turn
    /// where a process maps the file into link-time addresses.
    pub segments: Vec<(u64, u64, u64)>,
    /// Where a thread's `g_current_isolate_` is, from its thread pointer, in a process whose
    /// executable is this file (x86-64 glibc: the executable's TLS block ends at the thread
    /// pointer). None in a shared object (libnode.so: its block is placed at load time) or
    /// without the symbol.
    pub current_isolate_tp_offset: Option<i64>,
}

impl PostmortemSymbols {
    /// The link-time address of `offset` in the file, when a loadable segment holds it.
    pub fn vaddr_of_offset(&self, offset: u64) -> Option<u64> {
        self.segments.iter().find(|(o, _, n)| offset >= *o && offset - o < *n).map(|(o, v, _)| v + (offset - o))
    }
}

impl PostmortemSymbols {
    /// Reads `data` (an ELF file) named `path` in messages. Err: not a 64-bit ELF object.
    pub fn read<'d, R: ReadRef<'d>>(data: R, path: &str) -> Result<Self, String> {
        let file = ElfFile64::<Endianness, R>::parse(data).map_err(|e| e.to_string())?;
        let mut out = PostmortemSymbols { path: path.to_string(), ..Default::default() };
        let mut versions: [Option<u32>; 4] = [None; 4];
        let mut sizes_symbol: Option<(u64, u64, SectionIndex)> = None;
        let mut first_handler: Option<u64> = None;
        let mut builtins: Option<VaddrRange> = None;
        let mut current_isolate: Option<u64> = None;
        let e = file.endian();
        let headers = file.elf_program_headers();
        for segment in headers.iter().filter(|p| p.p_type(e) == object::elf::PT_LOAD).take(64) {
            out.segments.push((segment.p_offset(e), segment.p_vaddr(e), segment.p_filesz(e)));
        }
        let tls = headers.iter().take(64).find(|p| p.p_type(e) == object::elf::PT_TLS).map(|p| (p.p_vaddr(e), p.p_memsz(e), p.p_align(e)));
        let executable =
            file.elf_header().e_type(e) == object::elf::ET_EXEC || headers.iter().take(64).any(|p| p.p_type(e) == object::elf::PT_INTERP);
        for sym in file.dynamic_symbols().chain(file.symbols()).take(MAX_SYMBOLS) {
            let Ok(name) = sym.name() else { continue };
            if name.starts_with(V8DBG_PREFIX) {
                if out.values.contains_key(name) {
                    continue;
                }
                if out.values.len() >= MAX_V8DBG_SYMBOLS {
                    out.dropped += 1;
                    continue;
                }
                if let Some(v) = symbol_int(&file, sym.address(), sym.size(), sym.section_index()) {
                    out.values.insert(name.to_string(), v);
                }
            } else if let Some(i) = VERSION_SYMBOLS.iter().position(|v| *v == name) {
                if versions[i].is_none() {
                    versions[i] = symbol_int(&file, sym.address(), 4, sym.section_index()).and_then(|v| u32::try_from(v).ok());
                }
            } else if name == CURRENT_ISOLATE_SYMBOL && sym.kind() == object::SymbolKind::Tls && sym.size() == 8 {
                current_isolate.get_or_insert(sym.address());
            } else if name == BYTECODE_SIZES {
                if let Some(section) = sym.section_index() {
                    sizes_symbol = Some((sym.address(), sym.size(), section));
                }
            } else if name.starts_with(BUILTIN_PREFIX) && sym.size() > 0 {
                let end = sym.address().saturating_add(sym.size());
                builtins = Some(match builtins {
                    None => VaddrRange { start: sym.address(), end },
                    Some(r) => VaddrRange { start: r.start.min(sym.address()), end: r.end.max(end) },
                });
                if name == FIRST_BYTECODE_HANDLER {
                    first_handler = Some(sym.address());
                }
            }
        }
        if let [Some(major), Some(minor), Some(build), Some(patch)] = versions {
            out.version = Some(V8Version::new(major, minor, build, patch)).filter(V8Version::is_plausible);
        }
        if let Some((addr, size, section)) = sizes_symbol.filter(|(_, size, _)| *size <= MAX_BYTECODE_SIZES) {
            out.bytecode_sizes = section_bytes(&file, addr, size, section).and_then(BytecodeSizes::new);
        }
        out.builtins = builtins;
        if let (Some(value), Some((vaddr, memsz, align)), true) = (current_isolate, tls, executable) {
            out.current_isolate_tp_offset = executable_tp_offset(value, vaddr, memsz, align);
        }
        out.bytecode_handlers = match (first_handler, builtins) {
            (Some(start), Some(all)) if start < all.end => Some(VaddrRange { start, end: all.end }),
            _ => None,
        };
        Ok(out)
    }
}

/// The thread-pointer offset of the executable's TLS symbol at `value` in its block (x86-64,
/// glibc's TLS_TCB_AT_TP: the executable's block comes first, right below the thread pointer,
/// aligned to `align` with its first byte's alignment in the segment kept). None when the
/// segment's numbers are implausible.
fn executable_tp_offset(value: u64, vaddr: u64, memsz: u64, align: u64) -> Option<i64> {
    let align = align.max(1);
    if !align.is_power_of_two() || align > 4096 || memsz > 1 << 20 || value.checked_add(8)? > memsz {
        return None;
    }
    let firstbyte = vaddr.wrapping_neg() & (align - 1);
    let block = (memsz - firstbyte.min(memsz)).div_ceil(align) * align + firstbyte;
    Some(value as i64 - block as i64)
}

/// A symbol's bytes, at most [`MAX_BYTECODE_SIZES`] of them (every symbol read here is smaller).
fn section_bytes<'d, R: ReadRef<'d>>(file: &ElfFile64<'d, Endianness, R>, addr: u64, size: u64, section: SectionIndex) -> Option<Vec<u8>> {
    if size > MAX_BYTECODE_SIZES {
        return None;
    }
    let s = file.section_by_index(section).ok()?;
    // A symbol in .bss has no file bytes: its value is zero.
    if s.file_range().is_none() {
        return Some(vec![0; size as usize]);
    }
    s.data_range(addr, size).ok().flatten().map(<[u8]>::to_vec)
}

/// A 1-, 2-, 4- or 8-byte integer symbol's value, sign-extended (V8 publishes offsets like -16 as int).
fn symbol_int<'d, R: ReadRef<'d>>(file: &ElfFile64<'d, Endianness, R>, addr: u64, size: u64, section: Option<SectionIndex>) -> Option<i64> {
    if !matches!(size, 1 | 2 | 4 | 8) {
        return None;
    }
    let bytes = section_bytes(file, addr, size, section?)?;
    Some(match bytes.len() {
        1 => bytes[0] as i8 as i64,
        2 => i16::from_le_bytes(bytes[..2].try_into().ok()?) as i64,
        4 => i32::from_le_bytes(bytes[..4].try_into().ok()?) as i64,
        8 => i64::from_le_bytes(bytes[..8].try_into().ok()?),
        _ => return None,
    })
}
