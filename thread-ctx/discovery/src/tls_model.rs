//! Live part of discovery: given a writer object's relocations and where it is
//! mapped, read the dynamic loader's results in the target process and produce
//! the `TlsAccess` every thread of that process shares.

use crate::elf_tls_symbol::{LoadSegment, TlsReloc, TlsRelocKind, TlsSegment, WriterObject};
use crate::error::{Error, Result};
use crate::maps::Mapping;
use crate::remote_memory::TargetMemory;
use crate::tls_access::TlsAccess;
use serde::Serialize;

/// The TLS access model the object was linked with, as standard readers classify it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TlsModel {
    #[serde(rename = "tlsdesc")]
    TlsDesc,
    GeneralDynamic,
    InitialExec,
    LocalExec,
}

impl std::fmt::Display for TlsModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TlsModel::TlsDesc => "TLSDESC",
            TlsModel::GeneralDynamic => "general dynamic (DTPMOD64)",
            TlsModel::InitialExec => "initial exec (TPOFF64)",
            TlsModel::LocalExec => "local exec (no relocation, executable PT_TLS)",
        })
    }
}

/// Picks the model from the relocations found. Any of them reaches the same
/// variable; TLSDESC is preferred (the OTEP's recommended model), then initial
/// exec (a direct offset), then general dynamic.
pub fn classify(obj: &WriterObject) -> Option<(TlsModel, Option<TlsReloc>)> {
    for (kind, model) in [
        (TlsRelocKind::TlsDesc, TlsModel::TlsDesc),
        (TlsRelocKind::TpOff64, TlsModel::InitialExec),
        (TlsRelocKind::DtpMod64, TlsModel::GeneralDynamic),
    ] {
        if let Some(r) = obj.relocations.iter().find(|r| r.kind == kind) {
            return Some((model, Some(*r)));
        }
    }
    (obj.executable_like && obj.tls_segment.is_some()).then_some((TlsModel::LocalExec, None))
}

/// Load bias = runtime address - link-time address, from the first mapping of
/// the file whose offset matches a PT_LOAD segment.
pub fn load_bias(obj: &WriterObject, mappings: &[&Mapping], page_size: u64) -> Option<u64> {
    load_bias_of(&obj.load_segments, mappings, page_size)
}

/// [`load_bias`] for any object's PT_LOAD segments.
pub fn load_bias_of(segments: &[LoadSegment], mappings: &[&Mapping], page_size: u64) -> Option<u64> {
    let floor = |v: u64| v & !(page_size - 1);
    mappings.iter().find_map(|m| segments.iter().find(|s| floor(s.file_offset) == m.offset).map(|s| m.start.wrapping_sub(floor(s.vaddr))))
}

/// Resolves the access for `model` in the live process.
pub fn resolve(
    obj: &WriterObject,
    model: TlsModel,
    reloc: Option<TlsReloc>,
    bias: u64,
    own_mappings: &[&Mapping],
    mem: &impl TargetMemory,
    path: &str,
) -> Result<TlsAccess> {
    let fail = |reason: String| Error::Resolve { path: path.into(), reason };
    // Every address below comes from the target: a pair's second word may not wrap around.
    let second_word = |a: u64| a.checked_add(8).ok_or_else(|| fail(format!("a two-word pair at {a:#x} wraps around the address space")));
    let slot = reloc.map(|r| bias.wrapping_add(r.vaddr));
    match (model, slot) {
        (TlsModel::TlsDesc, Some(desc)) => {
            let resolver = mem.read_u64(desc, "TLSDESC descriptor resolver word")?;
            let arg = mem.read_u64(second_word(desc)?, "TLSDESC descriptor argument word")?;
            if resolver == 0 {
                return Err(fail(format!("TLSDESC descriptor at {desc:#x} is not relocated yet (resolver word 0)")));
            }
            if let Some(tp_offset) = static_tp_offset(arg) {
                return Ok(TlsAccess::Static { tp_offset });
            }
            if own_mappings.iter().any(|m| m.contains(arg)) {
                // Lazy TLSDESC: the argument still points at the module's own relocation entry.
                return Err(fail(format!(
                    "TLSDESC descriptor at {desc:#x} is not bound yet (lazy binding; argument {arg:#x} points into the object itself)"
                )));
            }
            let module_id = mem.read_u64(arg, "TLSDESC dynamic argument: module id")?;
            let offset = mem.read_u64(second_word(arg)?, "TLSDESC dynamic argument: offset")?;
            check_module_id(module_id).map_err(|r| fail(format!("TLSDESC argument {arg:#x}: {r}")))?;
            Ok(TlsAccess::glibc_dtv(module_id, offset))
        }
        (TlsModel::GeneralDynamic, Some(got)) => {
            // GOT pair {module id (DTPMOD64), offset (DTPOFF64)}, the __tls_get_addr argument.
            let module_id = mem.read_u64(got, "general-dynamic GOT module id")?;
            let offset = mem.read_u64(second_word(got)?, "general-dynamic GOT offset")?;
            check_module_id(module_id).map_err(|r| fail(format!("GOT pair at {got:#x}: {r}")))?;
            Ok(TlsAccess::glibc_dtv(module_id, offset))
        }
        (TlsModel::InitialExec, Some(got)) => {
            let value = mem.read_u64(got, "initial-exec GOT TPOFF64 slot")? as i64;
            if value >= 0 || value < i32::MIN as i64 {
                return Err(fail(format!("TPOFF64 slot at {got:#x} holds {value:#x}, expected a negative 32-bit thread-pointer offset")));
            }
            Ok(TlsAccess::Static { tp_offset: value })
        }
        (TlsModel::LocalExec, _) => {
            let tls = obj.tls_segment.ok_or_else(|| fail("executable has no PT_TLS segment".into()))?;
            local_exec_offset(obj.symbol_value, obj.symbol.size(), tls)
                .map(|tp_offset| TlsAccess::Static { tp_offset })
                .map_err(|e| fail(e.to_string()))
        }
        (m, None) => Err(fail(format!("model {m} needs a relocation, none found"))),
    }
}

/// x86-64 TLS variant II: the executable's TLS block ends at the thread
/// pointer, so the slot is at `symbol - round_up(memsz, align)`. The segment
/// comes from the file: its alignment must be a power of two and the slot
/// inside the block, and the offset a static one (negative, 32-bit).
fn local_exec_offset(symbol_value: u64, symbol_size: u64, tls: TlsSegment) -> std::result::Result<i64, Implausible> {
    if !tls.align.is_power_of_two() {
        return Err(Implausible::TlsAlignment(tls.align));
    }
    if symbol_value.checked_add(symbol_size).is_none_or(|end| end > tls.memsz) {
        return Err(Implausible::OutsideTlsBlock { symbol_value, memsz: tls.memsz });
    }
    let block = tls.memsz.checked_next_multiple_of(tls.align);
    let offset = block.and_then(|b| i64::try_from(b).ok()).map(|b| symbol_value as i64 - b);
    match offset {
        Some(o) if o < 0 && o >= i32::MIN as i64 => Ok(o),
        _ => Err(Implausible::TlsBlockTooLarge { memsz: tls.memsz, align: tls.align }),
    }
}

/// A value the object or the loader holds that no linker or loader would write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Implausible {
    #[error("PT_TLS alignment {0:#x} is not a power of two")]
    TlsAlignment(u64),
    #[error("symbol at offset {symbol_value:#x} is outside the {memsz:#x}-byte PT_TLS block")]
    OutsideTlsBlock { symbol_value: u64, memsz: u64 },
    #[error("PT_TLS block of {memsz:#x} bytes aligned to {align:#x} is too large for static TLS")]
    TlsBlockTooLarge { memsz: u64, align: u64 },
    #[error("module id {0:#x} is not a plausible loader module id")]
    ModuleId(u64),
}

/// x86-64 (TLS variant II) static offsets are negative 32-bit values. A small
/// *positive* argument is not an offset but a pointer: a non-PIE executable such
/// as node keeps its brk heap, where glibc allocates the dynamic argument, below
/// 4 GiB, so "fits in 32 bits" alone would misread it.
fn static_tp_offset(arg: u64) -> Option<i64> {
    let v = arg as i64;
    (v < 0 && v >= i32::MIN as i64).then_some(v)
}

fn check_module_id(module_id: u64) -> std::result::Result<(), Implausible> {
    // glibc module ids are small positive integers (dl_tls_max_dtv_idx).
    if module_id == 0 || module_id > 1 << 20 {
        return Err(Implausible::ModuleId(module_id));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf_tls_symbol::TlsSymbol;
    use crate::remote_memory::RemoteMemory;

    fn exe(symbol_value: u64, memsz: u64, align: u64) -> WriterObject {
        WriterObject {
            symbol: TlsSymbol::ThreadCtxV1,
            symbol_value,
            executable_like: true,
            relocations: vec![],
            load_segments: vec![LoadSegment { vaddr: 0x1000, file_offset: 0x1000, memsz: 0x100 }],
            tls_segment: Some(TlsSegment { memsz, align }),
        }
    }

    #[test]
    fn local_exec_offset_is_variant_two() {
        let obj = exe(8, 20, 8);
        assert_eq!(classify(&obj), Some((TlsModel::LocalExec, None)));
        let mem = RemoteMemory::new(0);
        let a = resolve(&obj, TlsModel::LocalExec, None, 0, &[], &mem, "x").unwrap();
        assert_eq!(a, TlsAccess::Static { tp_offset: 8 - 24 });
    }

    #[test]
    fn local_exec_rejects_silly_segments() {
        let seg = |memsz, align| TlsSegment { memsz, align };
        assert_eq!(local_exec_offset(8, 8, seg(20, 8)), Ok(-16));
        assert!(local_exec_offset(0, 8, seg(16, 24)).unwrap_err().to_string().contains("power of two"));
        assert!(local_exec_offset(16, 8, seg(16, 8)).unwrap_err().to_string().contains("outside"));
        assert!(local_exec_offset(0, 32, seg(16, 8)).unwrap_err().to_string().contains("outside"), "a 32-byte struct in a 16-byte block");
        assert!(local_exec_offset(u64::MAX, 8, seg(16, 8)).unwrap_err().to_string().contains("outside"));
        assert!(local_exec_offset(0, 8, seg(u64::MAX, 1 << 63)).unwrap_err().to_string().contains("too large"));
        assert!(local_exec_offset(0, 8, seg(8, 1 << 40)).unwrap_err().to_string().contains("too large"));
    }

    #[test]
    fn tlsdesc_argument_sign_decides_static() {
        assert_eq!(static_tp_offset((-440i64) as u64), Some(-440));
        assert_eq!(static_tp_offset(0x12b4_0a50), None, "low heap pointer of a non-PIE executable");
        assert_eq!(static_tp_offset(0x7f00_0000_0000), None);
        assert_eq!(static_tp_offset((i32::MIN as i64 - 1) as u64), None);
    }

    #[test]
    fn shared_object_without_relocation_is_unclassified() {
        let mut obj = exe(0, 8, 8);
        obj.executable_like = false;
        assert_eq!(classify(&obj), None);
    }

    #[test]
    fn tlsdesc_preferred_over_other_relocations() {
        let mut obj = exe(0, 8, 8);
        obj.relocations =
            vec![TlsReloc { kind: TlsRelocKind::DtpMod64, vaddr: 0x10, addend: 0 }, TlsReloc { kind: TlsRelocKind::TlsDesc, vaddr: 0x20, addend: 0 }];
        assert_eq!(classify(&obj).unwrap().0, TlsModel::TlsDesc);
    }

    #[test]
    fn bias_from_matching_segment() {
        let obj = exe(0, 8, 8);
        let m = Mapping {
            start: 0x7f00_0000_1000,
            end: 0x7f00_0000_2000,
            perms: "r-xp".into(),
            offset: 0x1000,
            dev: "08:01".into(),
            inode: 1,
            name: "/x".into(),
        };
        assert_eq!(load_bias(&obj, &[&m], 4096), Some(0x7f00_0000_0000));
    }
}
