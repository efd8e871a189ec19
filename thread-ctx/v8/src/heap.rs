//! Typed reads of V8 heap objects: a tagged pointer must carry the heap
//! object tag, and its map must say the type the field promises, before any of
//! its fields is trusted. Lengths the heap states are bounded by the caller.

use crate::error::Miss;
use crate::layout::Layout;
use crate::memory::{HeapMemory, Metered};
use crate::tagged::{smi, untag};

/// The readers' view of one target: its memory (metered) and its layout.
pub struct Heap<'a, M: HeapMemory + ?Sized> {
    pub mem: &'a Metered<'a, M>,
    pub layout: &'a Layout,
}

impl<'a, M: HeapMemory + ?Sized> Heap<'a, M> {
    pub fn new(mem: &'a Metered<'a, M>, layout: &'a Layout) -> Self {
        Heap { mem, layout }
    }

    /// The instance type of the object `tagged` points at.
    pub fn instance_type(&self, tagged: u64) -> Result<u16, Miss> {
        let map = self.mem.u64(untag(tagged)?)?;
        self.mem.u16(untag(map)?.wrapping_add(self.layout.map_instance_type))
    }

    /// The object's address when it is of type `t`.
    pub fn expect(&self, tagged: u64, t: u16) -> Result<u64, Miss> {
        if self.instance_type(tagged)? == t {
            untag(tagged)
        } else {
            Err(Miss::WrongType)
        }
    }

    /// The word at `offset` in the object `tagged` points at (its type already checked).
    pub fn field(&self, tagged: u64, offset: u64) -> Result<u64, Miss> {
        self.mem.u64(untag(tagged)?.wrapping_add(offset))
    }

    /// A Smi field's value.
    pub fn smi_field(&self, tagged: u64, offset: u64) -> Result<i32, Miss> {
        smi(self.field(tagged, offset)?).ok_or(Miss::BadTag)
    }

    /// A fixed array's length (its type already checked), at most `max`.
    pub fn array_length(&self, tagged: u64, max: u64) -> Result<u64, Miss> {
        let n = self.smi_field(tagged, self.layout.fixed_array_length)?;
        if n < 0 || n as u64 > max {
            return Err(Miss::BadLength);
        }
        Ok(n as u64)
    }

    /// Element `i` of the fixed array `tagged` of type `t`.
    pub fn element(&self, tagged: u64, t: u16, i: u64) -> Result<u64, Miss> {
        self.expect(tagged, t)?;
        let n = self.array_length(tagged, u32::MAX as u64)?;
        if i >= n {
            return Err(Miss::BadLength);
        }
        self.field(tagged, self.layout.fixed_array_data + 8 * i)
    }

    /// The first `count` elements of the fixed array `tagged` of type `t` (fewer if it is shorter).
    pub fn elements(&self, tagged: u64, t: u16, count: u64) -> Result<Vec<u64>, Miss> {
        self.expect(tagged, t)?;
        let n = self.array_length(tagged, u32::MAX as u64)?.min(count);
        let bytes = self.mem.bytes_at(untag(tagged)? + self.layout.fixed_array_data, 8 * n as usize)?;
        Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect())
    }

    /// The BytecodeArray `data` is, or wraps (an InterpreterData, where the layout has one).
    pub fn bytecode_array(&self, data: u64) -> Result<u64, Miss> {
        let l = self.layout;
        let t = self.instance_type(data)?;
        if t == l.types.bytecode_array {
            return Ok(data);
        }
        match l.interpreter_data {
            Some(d) if t == d.type_id => {
                let array = self.field(data, d.bytecode_array)?;
                self.expect(array, l.types.bytecode_array)?;
                Ok(array)
            }
            _ => Err(Miss::WrongType),
        }
    }

    /// The bytes of the byte array `tagged` of type `t`, at most `max` of them.
    pub fn byte_array(&self, tagged: u64, t: u16, max: u64) -> Result<Vec<u8>, Miss> {
        self.expect(tagged, t)?;
        let n = self.array_length(tagged, max)?;
        self.mem.bytes_at(untag(tagged)? + self.layout.fixed_array_data, n as usize)
    }
}
