//! A heap in memory, laid out as a V8 of a given [`Layout`] would lay it out:
//! what the unit tests name frames from, and what the fuzz targets feed the
//! readers (a corpus input is a heap image whose words a fuzzer then changes).

use crate::layout::{Instructions, Layout};
use crate::memory::{Fault, HeapMemory};
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
pub struct HeapBuilder {
    pub layout: Layout,
    pub image: HeapImage,
    next: u64,
    end: u64,
    maps: Vec<(u16, u64)>,
}

/// Where builders put the heap; the code region follows it.
pub const HEAP_BASE: u64 = 0x1000_0000;
pub const HEAP_SIZE: usize = 1 << 20;
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
        let scope_type: u32 = if l.flags_are_smi { 2 } else { 4 };
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
