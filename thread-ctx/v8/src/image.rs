//! A heap in memory, laid out as a V8 of a given [`Layout`] would lay it out:
//! what the unit tests name frames from, and what the fuzz targets feed the
//! readers (a corpus input is a heap image whose words a fuzzer then changes).

use crate::frame::{FrameInput, LeafRegisters, PcRegion};
use crate::layout::{Instructions, Layout};
use crate::memory::{Fault, HeapMemory};
use crate::position_table::{encode, raw_position};
use crate::symbols::BytecodeSizes;
use crate::tagged::{smi_word, HEAP_OBJECT_TAG};

/// Sparse memory: regions of bytes at addresses.
#[derive(Debug, Clone, Default)]
pub struct HeapImage {
    regions: Vec<(u64, Vec<u8>)>,
}

impl HeapImage {
    /// One zeroed region of `len` bytes at `base`.
    pub fn new(base: u64, len: usize) -> Self {
        HeapImage { regions: vec![(base, vec![0; len])] }
    }

    pub fn add_region(&mut self, base: u64, len: usize) {
        self.regions.push((base, vec![0; len]));
    }

    /// The regions, for serializing an image (fuzz corpus).
    pub fn regions(&self) -> &[(u64, Vec<u8>)] {
        &self.regions
    }

    fn slice_mut(&mut self, addr: u64, len: usize) -> &mut [u8] {
        for (base, bytes) in &mut self.regions {
            if addr >= *base && addr + len as u64 <= *base + bytes.len() as u64 {
                let o = (addr - *base) as usize;
                return &mut bytes[o..o + len];
            }
        }
        panic!("write of {len} bytes at {addr:#x} outside the image");
    }

    pub fn put(&mut self, addr: u64, bytes: &[u8]) {
        self.slice_mut(addr, bytes.len()).copy_from_slice(bytes);
    }

    pub fn put_u64(&mut self, addr: u64, v: u64) {
        self.put(addr, &v.to_le_bytes());
    }

    pub fn put_u32(&mut self, addr: u64, v: u32) {
        self.put(addr, &v.to_le_bytes());
    }

    pub fn put_u16(&mut self, addr: u64, v: u16) {
        self.put(addr, &v.to_le_bytes());
    }

    pub fn get_u64(&self, addr: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b).ok()?;
        Some(u64::from_le_bytes(b))
    }
}

impl HeapMemory for HeapImage {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let fault = Fault { addr, len: buf.len() };
        let end = addr.checked_add(buf.len() as u64).ok_or(fault)?;
        for (base, bytes) in &self.regions {
            if addr >= *base && end <= *base + bytes.len() as u64 {
                let o = (addr - *base) as usize;
                buf.copy_from_slice(&bytes[o..o + buf.len()]);
                return Ok(());
            }
        }
        Err(fault)
    }
}

/// Allocates V8 objects of `layout` in a [`HeapImage`], bump-pointer style.
/// Returns tagged pointers, as V8's own fields hold them.
#[derive(Clone)]
pub struct HeapBuilder {
    pub layout: Layout,
    pub image: HeapImage,
    next: u64,
    end: u64,
    maps: Vec<(u16, u64)>,
}

/// Where builders put the heap; the code region follows it.
pub const HEAP_BASE: u64 = 0x1000_0000;
pub const HEAP_SIZE: usize = 256 << 10;
pub const CODE_BASE: u64 = 0x7f00_0000_0000;
pub const CODE_SIZE: usize = 1 << 16;

impl HeapBuilder {
    pub fn new(layout: Layout) -> Self {
        let mut image = HeapImage::new(HEAP_BASE, HEAP_SIZE);
        image.add_region(CODE_BASE, CODE_SIZE);
        HeapBuilder { layout, image, next: HEAP_BASE + 0x100, end: HEAP_BASE + HEAP_SIZE as u64, maps: Vec::new() }
    }

    /// `size` zeroed bytes, 8-aligned; the tagged pointer to them.
    pub fn alloc(&mut self, size: u64) -> u64 {
        let at = self.next;
        self.next = (self.next + size + 7) & !7;
        assert!(self.next <= self.end, "heap image full");
        at + HEAP_OBJECT_TAG
    }

    /// The (one) map of instance type `t`.
    pub fn map(&mut self, t: u16) -> u64 {
        if let Some((_, m)) = self.maps.iter().find(|(k, _)| *k == t) {
            return *m;
        }
        let m = self.alloc(80);
        let it = self.layout.map_instance_type;
        self.image.put_u16(m - 1 + it, t);
        self.maps.push((t, m));
        m
    }

    /// An object of type `t` and `size` bytes (map included).
    pub fn object(&mut self, t: u16, size: u64) -> u64 {
        let map = self.map(t);
        let o = self.alloc(size);
        self.image.put_u64(o - 1, map);
        o
    }

    pub fn set(&mut self, object: u64, offset: u64, word: u64) {
        self.image.put_u64(object - 1 + offset, word);
    }

    pub fn set_u32(&mut self, object: u64, offset: u64, v: u32) {
        self.image.put_u32(object - 1 + offset, v);
    }

    /// A sequential one-byte string (internalized: instance type 0x08).
    pub fn string(&mut self, s: &str) -> u64 {
        let l = self.layout.string;
        let bytes: Vec<u8> = s.chars().map(|c| c as u32 as u8).collect();
        let o = self.object(l.one_byte_tag, l.seq_chars + bytes.len() as u64 + 8);
        self.set_u32(o, l.length, bytes.len() as u32);
        self.image.put(o - 1 + l.seq_chars, &bytes);
        o
    }

    /// A sequential two-byte string.
    pub fn two_byte_string(&mut self, s: &str) -> u64 {
        let l = self.layout.string;
        let units: Vec<u16> = s.encode_utf16().collect();
        let o = self.object(0, l.seq_chars + 2 * units.len() as u64 + 8);
        self.set_u32(o, l.length, units.len() as u32);
        let bytes: Vec<u8> = units.iter().flat_map(|u| u.to_le_bytes()).collect();
        self.image.put(o - 1 + l.seq_chars, &bytes);
        o
    }

    /// A cons string of two strings.
    pub fn cons(&mut self, first: u64, second: u64, len: u32) -> u64 {
        let l = self.layout.string;
        let o = self.object(l.cons_tag | l.one_byte_tag, 32);
        self.set_u32(o, l.length, len);
        self.set(o, l.cons_first, first);
        self.set(o, l.cons_second, second);
        o
    }

    /// A fixed array of type `t` holding `words`.
    pub fn fixed_array(&mut self, t: u16, words: &[u64]) -> u64 {
        let (len_off, data) = (self.layout.fixed_array_length, self.layout.fixed_array_data);
        let o = self.object(t, data + 8 * words.len() as u64);
        self.set(o, len_off, smi_word(words.len() as i32));
        for (i, w) in words.iter().enumerate() {
            self.set(o, data + 8 * i as u64, *w);
        }
        o
    }

    /// A byte array of type `t` holding `bytes`.
    pub fn byte_array(&mut self, t: u16, bytes: &[u8]) -> u64 {
        let (len_off, data) = (self.layout.fixed_array_length, self.layout.fixed_array_data);
        let o = self.object(t, data + bytes.len() as u64 + 8);
        self.set(o, len_off, smi_word(bytes.len() as i32));
        self.image.put(o - 1 + data, bytes);
        o
    }

    /// A Script of `source` named `name` (a tagged string or any word).
    pub fn script(&mut self, name: u64, source: &str) -> u64 {
        let src = self.string(source);
        let l = self.layout.clone();
        let o = self.object(l.types.script, 128);
        self.set(o, l.script_source, src);
        self.set(o, l.script_name, name);
        self.set(o, l.script_line_ends, smi_word(0));
        o
    }

    /// A function-scope ScopeInfo with the function's `name` (tagged string, or Smi 0),
    /// `inferred` name (tagged string or None) and source positions.
    pub fn scope_info(&mut self, name: u64, inferred: Option<u64>, start: i32, end: i32) -> u64 {
        let l = self.layout.scope_info;
        let t = self.layout.types.scope_info;
        // FUNCTION_SCOPE (2 before V8 13, 4 after), function variable UNUSED (3), inferred name slot present.
        let scope_type: u32 = 2 + l.scope_type_base; // FUNCTION_SCOPE
        let flags = scope_type | (3 << l.function_variable_shift) | (1 << l.has_inferred_name_bit);
        let o = self.object(t, 8 + 8 * (l.first_vars_index + 8));
        let slot = |i: u64| 8 + 8 * i;
        self.set(o, slot(0), if l.flags_are_smi { smi_word(flags as i32) } else { flags as u64 });
        self.set(o, slot(1), smi_word(0));
        self.set(o, slot(l.context_local_count_index), smi_word(0));
        let mut i = l.first_vars_index;
        self.set(o, slot(i), name);
        self.set(o, slot(i + 1), smi_word(-1));
        i += 2;
        let undefined = self.object(131, 16);
        self.set(o, slot(i), inferred.unwrap_or(undefined));
        i += 1;
        match l.fixed_positions {
            Some((s, e)) => {
                self.set(o, slot(s), smi_word(start));
                self.set(o, slot(e), smi_word(end));
            }
            None => {
                self.set(o, slot(i), smi_word(start));
                self.set(o, slot(i + 1), smi_word(end));
            }
        }
        o
    }

    /// A SharedFunctionInfo with `name_or_scope_info` and `script`.
    pub fn shared_function_info(&mut self, name_or_scope_info: u64, script: u64) -> u64 {
        let l = self.layout.clone();
        let o = self.object(l.types.shared_function_info, 96);
        self.set(o, l.sfi_name_or_scope_info, name_or_scope_info);
        self.set(o, l.sfi_script, script);
        o
    }

    /// A BytecodeArray of `len` bytecodes with a source position table of `positions`.
    pub fn bytecode_array(&mut self, bytecodes: &[u8], positions: &[u8]) -> u64 {
        let l = self.layout.clone();
        let table = self.byte_array(l.types.position_table, positions);
        let o = self.object(l.types.bytecode_array, l.bytecode_data + bytecodes.len() as u64 + 8);
        self.set(o, l.bytecode_length, smi_word(bytecodes.len() as i32));
        self.set(o, l.bytecode_position_table, table);
        self.image.put(o - 1 + l.bytecode_data, bytecodes);
        o
    }

    /// A Code object of `kind` whose `size` bytes of instructions start at
    /// `instruction_start` (in the code region), with `position_table` and
    /// `deoptimization_data` (a tagged word each). Returns the tagged Code.
    pub fn code(&mut self, kind: u32, instruction_start: u64, size: u32, position_table: u64, deoptimization_data: u64) -> u64 {
        let l = self.layout.clone();
        let c = l.code;
        let code = match c.instructions {
            Instructions::Inline { header } => {
                let map = self.map(l.types.code);
                let o = instruction_start - header + HEAP_OBJECT_TAG;
                self.image.put_u64(o - 1, map);
                o
            }
            Instructions::Stream { start_field, header, code_field } => {
                let o = self.object(l.types.code, 96);
                self.set(o, start_field, instruction_start);
                let stream_map = self.map(l.types.instruction_stream.unwrap());
                let stream = instruction_start - header;
                self.image.put_u64(stream, stream_map);
                self.image.put_u64(stream + code_field, o);
                o
            }
        };
        self.set_u32(code, c.flags, kind << c.kind_shift);
        self.set_u32(code, c.instruction_size, size);
        self.set(code, c.position_table, position_table);
        self.set(code, c.deoptimization_data, deoptimization_data);
        code
    }
}

/// The source of the script every [`example`] heap holds.
pub const EXAMPLE_SOURCE: &str = "function outer(x) {\n  let a = x;\n  return inner(a) + 1;\n}\nfunction inner(y) {\n  return y * 2;\n}\n";

/// A heap holding one script with two functions, `outer` calling `inner`,
/// and one frame of `outer` in each tier (interpreted, interpreted sampled in a
/// bytecode handler, baseline, TurboFan with `inner` inlined; and, as under
/// `--interpreted-frames-native-stack`, baseline code whose bytecode is wrapped in
/// an InterpreterData and an interpreted frame whose pc is in the function's copy
/// of the interpreter's entry trampoline), with the names each must get. What the namer's tests check and the fuzz targets lie about.
#[derive(Clone)]
pub struct Example {
    pub builder: HeapBuilder,
    /// (frame, expected innermost-first (function, line) pairs).
    pub frames: Vec<(FrameInput, Vec<(&'static str, u32)>)>,
    pub bytecode_sizes: BytecodeSizes,
}

fn offset_of(needle: &str) -> u32 {
    EXAMPLE_SOURCE.find(needle).unwrap() as u32
}

pub fn example(layout: Layout) -> Example {
    let mut b = HeapBuilder::new(layout);
    let l = b.layout.clone();
    let shift = l.position_code_shift;
    let file = b.string("/app/example.js");
    let script = b.script(file, EXAMPLE_SOURCE);
    let outer_name = b.string("outer");
    let inner_name = b.string("inner");
    let outer_si = b.scope_info(outer_name, None, offset_of("(x)") as i32, offset_of("}\nfunction inner") as i32);
    let inner_si = b.scope_info(inner_name, None, offset_of("(y)") as i32, EXAMPLE_SOURCE.len() as i32 - 2);
    let outer = b.shared_function_info(outer_si, script);
    let inner = b.shared_function_info(inner_si, script);

    // outer's bytecode: three bytecodes of 1, 2 and 1 bytes (sizes below), on lines 2, 3, 3.
    let bytecode_sizes = {
        let mut t = vec![1u8; 3 * 0x20];
        t[0x10] = 2;
        t[0x20 + 0x10] = 3;
        t[0x40 + 0x10] = 5;
        BytecodeSizes::new(t).unwrap()
    };
    let bytecodes = [0x0b, 0x10, 0x01, 0x0c];
    let positions = encode(&[(0, raw_position(offset_of("let a"), 0), true), (1, raw_position(offset_of("return inner"), 0), true)], shift);
    let array = b.bytecode_array(&bytecodes, &positions);
    let slot = |bytecode_offset: i64| smi_word((bytecode_offset + l.bytecode_data as i64 - 1) as i32);
    let feedback = b.object(l.types.script, 32); // any heap object: baseline frames hold their feedback there

    // Baseline code: an 8-byte prologue, then 4, 10 and 6 bytes of machine code per bytecode.
    let baseline_start = CODE_BASE + 0x100;
    let pc_table = b.byte_array(l.types.position_table, &[8, 4, 10, 6]);
    b.code(l.code.kind_baseline, baseline_start, 0x40, pc_table, array);

    // TurboFan code of outer with inner inlined at its call: inner's body at offsets 0x20..0x40.
    let opt_start = CODE_BASE + 0x400;
    let opt_positions = encode(
        &[
            (0, raw_position(offset_of("let a"), 0), true),
            (0x20, raw_position(offset_of("y * 2"), 1), true),
            (0x40, raw_position(offset_of("+ 1"), 0), false),
        ],
        shift,
    );
    let table = b.byte_array(l.types.position_table, &opt_positions);
    let mut inlining = raw_position(offset_of("inner(a)"), 0).to_le_bytes().to_vec();
    inlining.extend_from_slice(&0i32.to_le_bytes());
    inlining.extend_from_slice(&[0; 4]);
    let inlining_positions = b.byte_array(l.types.inlining_positions, &inlining);
    let literals = b.fixed_array(l.types.deoptimization_literals, &[inner]);
    let function_word = match (l.deopt.shared_function_info_wrapped, l.types.shared_function_info_wrapper) {
        (Some(offset), Some(t)) => {
            let w = b.object(t, offset + 8);
            b.set(w, offset, outer);
            w
        }
        _ => outer,
    };
    let d = l.deopt;
    let mut words = vec![smi_word(0); (d.inlining_positions.max(d.shared_function_info).max(d.literal_array) + 1) as usize];
    words[d.inlined_function_count as usize] = smi_word(1);
    words[d.literal_array as usize] = literals;
    words[d.shared_function_info as usize] = function_word;
    words[d.inlining_positions as usize] = inlining_positions;
    let deopt = b.fixed_array(l.types.deoptimization_data, &words);
    b.code(l.code.kind_turbofan, opt_start, 0x100, table, deopt);

    let frame = |pc: u64, region: PcRegion, leaf: bool, offset_slot: u64, registers: Option<LeafRegisters>| FrameInput {
        pc,
        region,
        leaf,
        shared: outer,
        bytecode_array: array,
        bytecode_offset: offset_slot,
        registers,
    };
    // Under --interpreted-frames-native-stack: the function's own copy of the interpreter's entry
    // trampoline (a builtin's code), and baseline code whose bytecode is wrapped with it.
    let trampoline_start = CODE_BASE + 0x600;
    let no_table = b.byte_array(l.types.position_table, &[]);
    let trampoline = b.code(0, trampoline_start, 0x40, no_table, smi_word(0));
    let wrapped_start = CODE_BASE + 0x700;
    let wrapped = match l.interpreter_data {
        Some(d) => {
            let data = b.object(d.type_id, 24);
            b.set(data, d.bytecode_array, array);
            b.set(data, d.bytecode_array + 8, trampoline);
            data
        }
        None => array,
    };
    b.code(l.code.kind_baseline, wrapped_start, 0x40, pc_table, wrapped);

    let jit = PcRegion::Jit { floor: CODE_BASE };
    let frames = vec![
        // Interpreted, at the call (bytecode 1): line 3.
        (frame(0x40_0000, PcRegion::Builtin, false, slot(1), None), vec![("outer", 3)]),
        // Sampled in a bytecode handler: the offset register (bytecode 0, line 2) wins over the stale slot.
        (
            frame(
                0x40_1000,
                PcRegion::BytecodeHandler,
                true,
                slot(1),
                Some(LeafRegisters { bytecode_array: array, bytecode_offset: slot(0) >> 32, return_candidates: vec![] }),
            ),
            vec![("outer", 2)],
        ),
        // Baseline: pc offset 10 is in bytecode 0's machine code (8, 12]: line 2; 13 in bytecode 1's: line 3.
        (frame(baseline_start + 10, jit, true, feedback, None), vec![("outer", 2)]),
        (frame(baseline_start + 14, jit, false, feedback, None), vec![("outer", 3)]),
        // A frameless builtin called from baseline code: the return address at the stack pointer.
        (
            frame(
                0x40_2000,
                PcRegion::Builtin,
                true,
                feedback,
                Some(LeafRegisters { bytecode_array: 0, bytecode_offset: 0, return_candidates: vec![(baseline_start + 14, CODE_BASE)] }),
            ),
            vec![("outer", 3)],
        ),
        // Baseline code whose bytecode is in an InterpreterData, and an interpreted frame returning
        // into its trampoline copy, at the call (bytecode 1): line 3.
        (frame(wrapped_start + 10, jit, true, feedback, None), vec![("outer", 2)]),
        (frame(trampoline_start + 0x10, jit, false, slot(1), None), vec![("outer", 3)]),
        // TurboFan: in inner's inlined body, then after it.
        (frame(opt_start + 0x28, jit, true, smi_word(5), None), vec![("inner", 6), ("outer", 3)]),
        (frame(opt_start + 0x48, jit, false, smi_word(5), None), vec![("outer", 3)]),
    ];
    Example { builder: b, frames, bytecode_sizes }
}
