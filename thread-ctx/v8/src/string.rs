//! V8 strings read from outside: sequential (one- or two-byte), cons (two
//! halves), sliced (a window of a parent), thin (forwarding to an internalized
//! copy) and external with a cached data pointer (node's own module sources).
//! A string is visited as chunks of its characters, so a 10 MB script source
//! is never one allocation; depth, pieces and characters are all bounded.

use crate::error::Miss;
use crate::heap::Heap;
use crate::memory::HeapMemory;
use crate::tagged::untag;

/// Nesting of cons, sliced and thin strings followed. V8 flattens a source
/// before compiling it, and names are short: real strings nest a few levels.
pub const MAX_DEPTH: u32 = 32;
/// Leaf pieces visited in one string.
pub const MAX_PIECES: u32 = 4096;
/// Characters read per read of the target.
const CHUNK_CHARS: u64 = 32 * 1024;
/// Longest name kept (function, inferred and script names): longer ones are cut here.
pub const MAX_NAME_CHARS: u64 = 1024;

/// A run of a string's characters.
pub enum Chunk<'c> {
    OneByte(&'c [u8]),
    TwoByte(&'c [u16]),
}

struct Visit<'f> {
    pieces: u32,
    sink: &'f mut dyn FnMut(Chunk<'_>),
}

/// Visits the first `limit` characters of the string `tagged` in order, as chunks.
/// Returns the string's full length.
pub fn visit<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, tagged: u64, limit: u64, sink: &mut dyn FnMut(Chunk<'_>)) -> Result<u64, Miss> {
    let len = length(heap, tagged)?;
    let mut v = Visit { pieces: 0, sink };
    visit_range(heap, tagged, 0, len.min(limit), 0, &mut v)?;
    Ok(len)
}

/// The string's length in characters (its type checked).
pub fn length<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, tagged: u64) -> Result<u64, Miss> {
    let t = heap.instance_type(tagged)?;
    if t >= heap.layout.types.first_nonstring {
        return Err(Miss::WrongType);
    }
    Ok(heap.mem.u32(untag(tagged)? + heap.layout.string.length)? as u64)
}

fn visit_range<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, tagged: u64, start: u64, len: u64, depth: u32, v: &mut Visit<'_>) -> Result<(), Miss> {
    if len == 0 {
        return Ok(());
    }
    if depth > MAX_DEPTH {
        return Err(Miss::StringTooDeep);
    }
    v.pieces += 1;
    if v.pieces > MAX_PIECES {
        return Err(Miss::StringTooDeep);
    }
    let l = &heap.layout.string;
    let t = heap.instance_type(tagged)?;
    if t >= heap.layout.types.first_nonstring {
        return Err(Miss::WrongType);
    }
    let own = heap.mem.u32(untag(tagged)? + l.length)? as u64;
    if start.checked_add(len).is_none_or(|end| end > own) {
        return Err(Miss::BadLength);
    }
    let one_byte = t & l.encoding_mask == l.one_byte_tag;
    let rep = t & l.representation_mask;
    if rep == l.seq_tag {
        read_chars(heap, untag(tagged)? + l.seq_chars, start, len, one_byte, v)
    } else if rep == l.external_tag {
        if t & l.uncached_external_mask != 0 {
            return Err(Miss::WrongType);
        }
        let data = heap.field(tagged, l.external_data)?;
        read_chars(heap, data, start, len, one_byte, v)
    } else if rep == l.cons_tag {
        let first = heap.field(tagged, l.cons_first)?;
        let second = heap.field(tagged, l.cons_second)?;
        let first_len = length(heap, first)?;
        if first_len > own {
            return Err(Miss::BadLength);
        }
        if start < first_len {
            visit_range(heap, first, start, len.min(first_len - start), depth + 1, v)?;
        }
        let end = start + len;
        if end > first_len {
            let from = start.max(first_len) - first_len;
            visit_range(heap, second, from, end - first_len - from, depth + 1, v)?;
        }
        Ok(())
    } else if rep == l.sliced_tag {
        let parent = heap.field(tagged, l.sliced_parent)?;
        let offset = heap.smi_field(tagged, l.sliced_offset)?;
        if offset < 0 {
            return Err(Miss::BadLength);
        }
        visit_range(heap, parent, offset as u64 + start, len, depth + 1, v)
    } else if rep == l.thin_tag {
        let actual = heap.field(tagged, l.thin_actual)?;
        visit_range(heap, actual, start, len, depth + 1, v)
    } else {
        Err(Miss::WrongType)
    }
}

fn read_chars<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, chars: u64, start: u64, len: u64, one_byte: bool, v: &mut Visit<'_>) -> Result<(), Miss> {
    let width = if one_byte { 1 } else { 2 };
    let mut at = start;
    while at < start + len {
        let n = (start + len - at).min(CHUNK_CHARS);
        let bytes = heap.mem.bytes_at(chars.wrapping_add(at * width), (n * width) as usize)?;
        if one_byte {
            (v.sink)(Chunk::OneByte(&bytes));
        } else {
            let units: Vec<u16> = bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
            (v.sink)(Chunk::TwoByte(&units));
        }
        at += n;
    }
    Ok(())
}

/// The string as Rust text, at most [`MAX_NAME_CHARS`] characters (one-byte
/// strings are Latin-1; unpaired surrogates become U+FFFD).
pub fn read_name<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, tagged: u64) -> Result<String, Miss> {
    let mut units: Vec<u16> = Vec::new();
    visit(heap, tagged, MAX_NAME_CHARS, &mut |c| match c {
        Chunk::OneByte(b) => units.extend(b.iter().map(|&x| x as u16)),
        Chunk::TwoByte(u) => units.extend_from_slice(u),
    })?;
    Ok(char::decode_utf16(units).map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::HeapBuilder;
    use crate::layout::Layout;
    use crate::memory::{Budget, Metered};
    use crate::version::V8Version;

    fn builder() -> HeapBuilder {
        HeapBuilder::new(Layout::defaults(V8Version::new(13, 6, 233, 17)).unwrap())
    }

    fn name(b: &HeapBuilder, s: u64) -> Result<String, Miss> {
        let m = Metered::new(&b.image, Budget::FRAME);
        read_name(&Heap::new(&m, &b.layout), s)
    }

    #[test]
    fn every_representation_reads() {
        let mut b = builder();
        let one = b.string("handler");
        let two = b.two_byte_string("λ-route");
        assert_eq!(name(&b, one).unwrap(), "handler");
        assert_eq!(name(&b, two).unwrap(), "λ-route");
        let a = b.string("foo");
        let c = b.string("Bar");
        let cons = b.cons(a, c, 6);
        assert_eq!(name(&b, cons).unwrap(), "fooBar");
        let l = b.layout.string;
        let sliced = b.object(l.sliced_tag | l.one_byte_tag, 32);
        b.set_u32(sliced, l.length, 4);
        b.set(sliced, l.sliced_parent, one);
        b.set(sliced, l.sliced_offset, crate::tagged::smi_word(2));
        assert_eq!(name(&b, sliced).unwrap(), "ndle");
        let thin = b.object(l.thin_tag | l.one_byte_tag, 24);
        b.set_u32(thin, l.length, 7);
        b.set(thin, l.thin_actual, one);
        assert_eq!(name(&b, thin).unwrap(), "handler");
    }

    #[test]
    fn lies_about_strings_are_misses() {
        let mut b = builder();
        let s = b.string("abc");
        let l = b.layout.string;
        // A cons string that contains itself.
        let cyc = b.object(l.cons_tag | l.one_byte_tag, 32);
        b.set_u32(cyc, l.length, 10);
        b.set(cyc, l.cons_first, cyc);
        b.set(cyc, l.cons_second, s);
        assert_eq!(name(&b, cyc), Err(Miss::StringTooDeep));
        // A first half longer than the whole.
        let long = b.string("0123456789abcdef");
        b.set(cyc, l.cons_first, long);
        assert_eq!(name(&b, cyc), Err(Miss::BadLength));
        // A huge length: only the first MAX_NAME_CHARS are read.
        b.set_u32(s, l.length, u32::MAX);
        assert_eq!(name(&b, s).unwrap().chars().count() as u64, MAX_NAME_CHARS);
        // Not a string at all.
        let sfi = b.object(b.layout.types.shared_function_info, 64);
        assert_eq!(name(&b, sfi), Err(Miss::WrongType));
    }
}
