//! Generated code (baseline, Maglev, TurboFan) found from a pc, and what it
//! knows about its positions.
//!
//! A JS frame of generated code holds no pointer to its code (and on V8 13+ a
//! JSFunction holds none either: a dispatch handle instead), so the code is
//! found from the pc itself, as V8 does for its own stack walks: instructions
//! start at a 64-byte boundary, right after the header of the object holding
//! them (an InstructionStream whose second word points back to its Code, or
//! on V8 10 the Code itself). The reader steps back from the pc one boundary at
//! a time, within the pc's mapping and [`MAX_SCAN_BYTES`], until the word
//! before a boundary is that object's map and the Code it leads to says its
//! instructions start there and cover the pc.

use crate::error::Miss;
use crate::heap::Heap;
use crate::layout::Instructions;
use crate::memory::{word, HeapMemory};
use crate::position_table::SourcePosition;
use crate::tagged::{is_heap_object, smi, untag, HEAP_OBJECT_TAG};

/// x64 `kCodeAlignment`.
pub const CODE_ALIGNMENT: u64 = 64;
/// Farthest a pc is looked back from for the start of its code. TurboFan
/// code larger than this (rare; V8 puts such objects in their own pages) is a miss.
pub const MAX_SCAN_BYTES: u64 = 512 << 10;
/// Bytes read per step back.
const SCAN_CHUNK: u64 = 16 << 10;
/// Largest code object accepted (instruction bytes).
pub const MAX_CODE_BYTES: u64 = 64 << 20;
/// Largest position or pc table read.
pub const MAX_TABLE_BYTES: u64 = 4 << 20;
/// Inlined functions read per code object (TurboFan inlines up to ~460 bytecode bytes per caller).
pub const MAX_INLINED: u64 = 1024;

/// Which tier generated the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    Interpreted,
    Baseline,
    Maglev,
    Turbofan,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Interpreted => "interpreted",
            Tier::Baseline => "baseline",
            Tier::Maglev => "maglev",
            Tier::Turbofan => "turbofan",
        }
    }
}

/// What naming needs from a Code object, read once and cached by its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeInfo {
    /// The Code (tagged).
    pub code: u64,
    /// None: the code of no JS function (a builtin's copy, as the interpreter's entry trampoline
    /// each function gets under --interpreted-frames-native-stack; a regexp's), kept so that its
    /// pcs are not looked for again.
    pub tier: Option<Tier>,
    pub start: u64,
    pub size: u64,
    /// The word before `start` (the holder's map) and the Code it leads to: checked again before the cache is trusted.
    pub holder: u64,
    /// The Code's header (map, tables, flags, size): checked again too, since V8 reuses addresses.
    pub header: Vec<u8>,
    /// Optimized code: pc offset → source position; baseline: its pc → bytecode table.
    pub table: Vec<u8>,
    /// Optimized code: the function it was compiled for (tagged SharedFunctionInfo).
    pub function: Option<u64>,
    /// Optimized code: the functions inlined into it (tagged SharedFunctionInfos, by index).
    pub inlined: Vec<u64>,
    /// Optimized code: for inlining id k, the position of the call in the caller and the inlined function's index.
    pub inlining: Vec<(SourcePosition, i32)>,
    /// Baseline code: its BytecodeArray (tagged).
    pub bytecode_array: Option<u64>,
}

impl CodeInfo {
    pub fn contains(&self, pc: u64) -> bool {
        self.start <= pc && pc < self.start + self.size
    }

    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.table.len() + 8 * self.inlined.len() + 16 * self.inlining.len()
    }
}

/// The holder map learned for a process (the InstructionStream's or V8 10's Code's), so that
/// steps back compare a word instead of reading a map for each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LearnedMaps {
    pub holder: Option<u64>,
}

/// Finds the code whose instructions hold `pc`, looking back no further than `floor`
/// (the start of the pc's mapping).
pub fn find<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, pc: u64, floor: u64, learned: &mut LearnedMaps) -> Result<CodeInfo, Miss> {
    let header = match heap.layout.code.instructions {
        Instructions::Inline { header } | Instructions::Stream { header, .. } => header,
    };
    // Boundaries whose holder header lies inside the mapping and the scan window.
    let lowest = floor.max(pc.saturating_sub(MAX_SCAN_BYTES)).saturating_add(header).saturating_add(CODE_ALIGNMENT - 1) & !(CODE_ALIGNMENT - 1);
    let mut high = pc & !(CODE_ALIGNMENT - 1);
    while high >= lowest && lowest > 0 {
        // One read covers the header words of every boundary in the chunk.
        let low = high.saturating_sub(SCAN_CHUNK).max(lowest);
        let base = low - header;
        let bytes = heap.mem.bytes_at(base, (high - base + 8) as usize)?;
        let mut c = high;
        loop {
            let w = word(&bytes, (c - header - base) as usize);
            if is_heap_object(w) && learned.holder.is_none_or(|m| m == w) {
                if let Ok(info) = at_boundary(heap, c, w, pc) {
                    learned.holder = Some(w);
                    return Ok(info);
                }
            }
            if c == low {
                break;
            }
            c -= CODE_ALIGNMENT;
        }
        if low == lowest {
            break;
        }
        high = low - CODE_ALIGNMENT;
    }
    Err(Miss::NoCode)
}

/// The code whose instructions would start at `start`, whose holder's first word is `map`.
fn at_boundary<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, start: u64, map: u64, pc: u64) -> Result<CodeInfo, Miss> {
    let l = heap.layout;
    let code = match l.code.instructions {
        Instructions::Inline { header } => {
            if heap.mem.u16(untag(map)? + l.map_instance_type)? != l.types.code {
                return Err(Miss::WrongType);
            }
            start - header + HEAP_OBJECT_TAG
        }
        Instructions::Stream { start_field, header, code_field } => {
            let stream_type = l.types.instruction_stream.ok_or(Miss::WrongType)?;
            if heap.mem.u16(untag(map)? + l.map_instance_type)? != stream_type {
                return Err(Miss::WrongType);
            }
            let code = heap.mem.u64(start - header + code_field)?;
            heap.expect(code, l.types.code)?;
            if heap.field(code, start_field)? != start {
                return Err(Miss::NoCode);
            }
            code
        }
    };
    let size = heap.mem.u32(untag(code)? + l.code.instruction_size)? as u64;
    if size > MAX_CODE_BYTES || pc >= start + size {
        return Err(Miss::NoCode);
    }
    read(heap, code, start, size, map)
}

/// Reads what naming needs from the Code `code` whose instructions are `[start, start + size)`.
fn read<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, code: u64, start: u64, size: u64, holder: u64) -> Result<CodeInfo, Miss> {
    let l = heap.layout;
    let c = &l.code;
    let flags = heap.mem.u32(untag(code)? + c.flags)?;
    let kind = (flags >> c.kind_shift) & c.kind_mask;
    let tier = if kind == c.kind_baseline {
        Some(Tier::Baseline)
    } else if kind == c.kind_maglev {
        Some(Tier::Maglev)
    } else if kind == c.kind_turbofan {
        Some(Tier::Turbofan)
    } else {
        None // a builtin, a regexp, wasm: not a JS function's code
    };
    let mut info = CodeInfo {
        code,
        tier,
        start,
        size,
        holder,
        header: code_header(heap, code)?,
        table: Vec::new(),
        function: None,
        inlined: Vec::new(),
        inlining: Vec::new(),
        bytecode_array: None,
    };
    if tier.is_none() {
        return Ok(info);
    }
    let table = heap.field(code, c.position_table)?;
    if is_heap_object(table) {
        info.table = heap.byte_array(table, l.types.position_table, MAX_TABLE_BYTES)?;
    }
    let data = heap.field(code, c.deoptimization_data)?;
    if tier == Some(Tier::Baseline) {
        info.bytecode_array = Some(heap.bytecode_array(data)?);
        return Ok(info);
    }
    deoptimization_data(heap, data, &mut info)?;
    Ok(info)
}

fn deoptimization_data<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, data: u64, info: &mut CodeInfo) -> Result<(), Miss> {
    let l = heap.layout;
    let d = &l.deopt;
    let t = l.types.deoptimization_data;
    let needed = d.inlining_positions.max(d.shared_function_info).max(d.literal_array).max(d.inlined_function_count) + 1;
    let words = heap.elements(data, t, needed)?;
    if (words.len() as u64) < needed {
        return Err(Miss::BadLength);
    }
    let mut function = words[d.shared_function_info as usize];
    if let (Some(inner), Some(wrapper_type)) = (d.shared_function_info_wrapped, l.types.shared_function_info_wrapper) {
        heap.expect(function, wrapper_type)?;
        function = heap.field(function, inner)?;
    }
    heap.expect(function, l.types.shared_function_info)?;
    info.function = Some(function);
    let count = smi(words[d.inlined_function_count as usize]).ok_or(Miss::BadTag)?;
    if count < 0 || count as u64 > MAX_INLINED {
        return Err(Miss::BadLength);
    }
    if count == 0 {
        return Ok(());
    }
    info.inlined = heap.elements(words[d.literal_array as usize], l.types.deoptimization_literals, count as u64)?;
    let positions = heap.byte_array(words[d.inlining_positions as usize], l.types.inlining_positions, MAX_INLINED * d.inlining_position_size)?;
    let size = d.inlining_position_size as usize;
    info.inlining = positions.chunks_exact(size).map(|e| (SourcePosition(word(e, 0)), i32::from_le_bytes(e[8..12].try_into().unwrap()))).collect();
    Ok(())
}

/// The first bytes of the Code `code` (tagged), up to the last field naming reads.
fn code_header<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, code: u64) -> Result<Vec<u8>, Miss> {
    let c = &heap.layout.code;
    let end = c.flags.max(c.instruction_size).max(c.position_table).max(c.deoptimization_data) + 8;
    heap.mem.bytes_at(untag(code)?, end as usize)
}

/// The Code holding `pc` still holds it: the holder's map and back pointer (V8 11+), and the
/// Code's header, are what the cached entry saw. Two reads (one on V8 10).
pub fn still_there<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, info: &CodeInfo) -> bool {
    if let Instructions::Stream { header, code_field, .. } = heap.layout.code.instructions {
        let Ok(b) = heap.mem.bytes_at(info.start - header, (code_field + 8) as usize) else { return false };
        if word(&b, 0) != info.holder || word(&b, code_field as usize) != info.code {
            return false;
        }
    }
    code_header(heap, info.code).is_ok_and(|h| h == info.header)
}
