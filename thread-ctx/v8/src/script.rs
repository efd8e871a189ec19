//! A Script: its name (a file path for CommonJS, a `file://` URL for an ES
//! module, the resource name node gave it), where it came from when it was
//! `eval`'d (or made by `new Function`), and where its lines end.
//!
//! V8 computes a script's line ends lazily (only when something asks for a
//! line, e.g. an error's stack), so they are usually not in the heap: they are
//! then computed here from the source, once per script, counting line
//! terminators as V8 does (LF, CR not followed by LF, U+2028, U+2029).

use crate::error::Miss;
use crate::heap::Heap;
use crate::memory::HeapMemory;
use crate::string::{self, Chunk};
use crate::tagged::{is_heap_object, smi};

/// Largest source read to find line ends (characters).
pub const MAX_SOURCE_CHARS: u64 = 16 << 20;
/// Most lines kept per script.
pub const MAX_LINES: u64 = 4 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptInfo {
    /// The script's name; None for `eval`'d code and scripts without one.
    pub name: Option<String>,
    /// Set when the code was made by `eval` or `new Function`: the function
    /// that called it (its tagged SharedFunctionInfo) and where.
    pub eval_from: Option<(u64, EvalPosition)>,
    /// The code was made by `new Function` (V8 compiles the source
    /// `(function anonymous(ARGS\n) {\nBODY\n})` for it, as eval'd code).
    pub new_function: bool,
    /// Offsets (UTF-16 units) of each line's terminator; the last line ends at the source's end.
    pub line_ends: Vec<u32>,
}

impl ScriptInfo {
    /// 1-based line and column of source offset `pos`.
    pub fn line_column(&self, pos: u32) -> (u32, u32) {
        let line = self.line_ends.partition_point(|&end| end < pos);
        let line_start = if line == 0 { 0 } else { self.line_ends[line - 1] + 1 };
        (line as u32 + 1, pos.saturating_sub(line_start) + 1)
    }

    /// Heap bytes this entry holds (for the caches' sizes).
    pub fn bytes(&self) -> usize {
        self.name.as_ref().map_or(0, String::len) + 4 * self.line_ends.len() + std::mem::size_of::<Self>()
    }
}

/// Reads the Script `script` (tagged; its type checked here).
pub fn read<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, script: u64) -> Result<ScriptInfo, Miss> {
    let l = heap.layout;
    heap.expect(script, l.types.script)?;
    let name_word = heap.field(script, l.script_name)?;
    let name = if is_heap_object(name_word) && heap.instance_type(name_word)? < l.types.first_nonstring {
        Some(string::read_name(heap, name_word)?).filter(|n| !n.is_empty())
    } else {
        None
    };
    let from = heap.field(script, l.script_eval_from_shared)?;
    let eval_from = if is_heap_object(from) && heap.instance_type(from)? == l.types.shared_function_info {
        let pos = match smi(heap.field(script, l.script_eval_from_position)?) {
            Some(p) if p >= 0 => EvalPosition::Source(p as u32),
            // V8 stores the call's bytecode offset, negated, until something asks for the position.
            Some(p) => EvalPosition::BytecodeOffset(p.unsigned_abs()),
            None => EvalPosition::Unknown,
        };
        Some((from, pos))
    } else {
        None
    };
    let new_function = eval_from.is_some() && starts_with(heap, heap.field(script, l.script_source)?, NEW_FUNCTION_PREFIX);
    let line_ends = line_ends(heap, script)?;
    Ok(ScriptInfo { name, eval_from, new_function, line_ends })
}

/// Where in its caller eval'd code was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalPosition {
    /// An offset in the caller's script.
    Source(u32),
    /// The eval call's bytecode offset in the caller's BytecodeArray.
    BytecodeOffset(u32),
    Unknown,
}

/// What V8 makes of `new Function(ARGS, BODY)`: the outer function starts right after this.
pub const NEW_FUNCTION_PREFIX: &str = "(function anonymous(";

fn starts_with<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, string: u64, prefix: &str) -> bool {
    if !is_heap_object(string) {
        return false;
    }
    let mut head: Vec<u16> = Vec::new();
    let ok = string::visit(heap, string, prefix.len() as u64, &mut |c| match c {
        Chunk::OneByte(b) => head.extend(b.iter().map(|&x| x as u16)),
        Chunk::TwoByte(u) => head.extend_from_slice(u),
    });
    ok.is_ok() && head.iter().copied().eq(prefix.encode_utf16())
}

fn line_ends<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, script: u64) -> Result<Vec<u32>, Miss> {
    let source = heap.field(script, heap.layout.script_source)?;
    if !is_heap_object(source) {
        return Ok(Vec::new()); // undefined: no source
    }
    let mut lines = LineEnds::default();
    string::visit(heap, source, MAX_SOURCE_CHARS, &mut |chunk| match chunk {
        Chunk::OneByte(b) => lines.one_byte(b),
        Chunk::TwoByte(u) => lines.two_byte(u),
    })?;
    if lines.too_many {
        return Err(Miss::BadLength);
    }
    Ok(lines.ends)
}

/// Line terminators found so far, fed a source chunk by chunk (a CR LF may span two chunks).
#[derive(Default)]
struct LineEnds {
    ends: Vec<u32>,
    /// Offset of the next character.
    at: u32,
    last_cr: bool,
    too_many: bool,
}

impl LineEnds {
    fn terminator(&mut self, at: u32, c: u16) {
        if c == 0x0a && self.last_cr && self.ends.last() == Some(&(at.wrapping_sub(1))) {
            // CR LF is one terminator, at the LF (V8's CalculateLineEnds).
            *self.ends.last_mut().unwrap() = at;
        } else if self.ends.len() as u64 >= MAX_LINES {
            self.too_many = true;
        } else {
            self.ends.push(at);
        }
    }

    fn one_byte(&mut self, b: &[u8]) {
        let mut i = 0;
        // A tight search for the two terminators Latin-1 has: 16 MB of source in ~10 ms.
        while let Some(k) = b[i..].iter().position(|&c| c == b'\n' || c == b'\r') {
            let j = i + k;
            if j > i {
                self.last_cr = false;
            }
            self.terminator(self.at + j as u32, b[j] as u16);
            self.last_cr = b[j] == b'\r';
            i = j + 1;
        }
        if i < b.len() {
            self.last_cr = false;
        }
        self.at = self.at.wrapping_add(b.len() as u32);
    }

    fn two_byte(&mut self, u: &[u16]) {
        for (j, &c) in u.iter().enumerate() {
            if matches!(c, 0x0a | 0x0d | 0x2028 | 0x2029) {
                self.terminator(self.at + j as u32, c);
            }
            self.last_cr = c == 0x0d;
        }
        self.at = self.at.wrapping_add(u.len() as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::HeapBuilder;
    use crate::layout::Layout;
    use crate::memory::{Budget, Metered};
    use crate::version::V8Version;

    #[test]
    fn terminators_across_chunks_count_once() {
        let mut l = LineEnds::default();
        l.one_byte(b"ab\r");
        l.one_byte(b"\ncd\r");
        l.two_byte(&[0x65, 0x2028, 0x0d, 0x0a]);
        assert_eq!(l.ends, vec![3, 6, 8, 10]);
    }

    #[test]
    fn lines_and_columns_count_every_terminator() {
        let mut b = HeapBuilder::new(Layout::defaults(V8Version::new(12, 4, 0, 0)).unwrap());
        let name = b.string("file:///app/main.mjs");
        let s = b.script(name, "a\nbb\r\nccc\rd");
        let m = Metered::new(&b.image, Budget::FRAME);
        let info = read(&Heap::new(&m, &b.layout), s).unwrap();
        assert_eq!(info.name.as_deref(), Some("file:///app/main.mjs"));
        assert_eq!(info.line_ends, vec![1, 5, 9]);
        assert_eq!(info.line_column(0), (1, 1));
        assert_eq!(info.line_column(2), (2, 1));
        assert_eq!(info.line_column(3), (2, 2));
        assert_eq!(info.line_column(6), (3, 1));
        assert_eq!(info.line_column(10), (4, 1));
        assert_eq!(info.eval_from, None);
    }
}
