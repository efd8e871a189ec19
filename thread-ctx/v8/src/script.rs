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
    /// that called it (its tagged SharedFunctionInfo) and where, in its script.
    pub eval_from: Option<(u64, Option<u32>)>,
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
        // A negative position is a code offset V8 has not turned into a source position yet.
        let pos = smi(heap.field(script, l.script_eval_from_position)?).and_then(|p| u32::try_from(p).ok());
        Some((from, pos))
    } else {
        None
    };
    let line_ends = line_ends(heap, script)?;
    Ok(ScriptInfo { name, eval_from, line_ends })
}

fn line_ends<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, script: u64) -> Result<Vec<u32>, Miss> {
    let l = heap.layout;
    let source = heap.field(script, l.script_source)?;
    if !is_heap_object(source) {
        return Ok(Vec::new()); // undefined: no source
    }
    let mut ends = Vec::new();
    let mut at: u32 = 0;
    let mut last_cr = false;
    let mut too_many = false;
    let mut push = |ends: &mut Vec<u32>, at: u32| {
        if ends.len() as u64 >= MAX_LINES {
            too_many = true;
        } else {
            ends.push(at);
        }
    };
    string::visit(heap, source, MAX_SOURCE_CHARS, &mut |chunk| {
        let mut unit = |c: u16, ends: &mut Vec<u32>| {
            match c {
                0x0a if last_cr => {
                    // CR LF: one terminator, at the CR (already counted), moved to the LF as V8 does.
                    if let Some(e) = ends.last_mut() {
                        *e = at;
                    }
                }
                0x0a | 0x2028 | 0x2029 => push(ends, at),
                0x0d => push(ends, at),
                _ => {}
            }
            last_cr = c == 0x0d;
            at = at.wrapping_add(1);
        };
        match chunk {
            Chunk::OneByte(b) => b.iter().for_each(|&c| unit(c as u16, &mut ends)),
            Chunk::TwoByte(u) => u.iter().for_each(|&c| unit(c, &mut ends)),
        }
    })?;
    if too_many {
        return Err(Miss::BadLength);
    }
    Ok(ends)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::HeapBuilder;
    use crate::layout::Layout;
    use crate::memory::{Budget, Metered};
    use crate::version::V8Version;

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
