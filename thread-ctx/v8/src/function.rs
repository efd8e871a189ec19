//! A function as its SharedFunctionInfo describes it: its name (V8's "debug
//! name": the declared name, else the name V8 inferred from where the function
//! was assigned, as in `exports.handler = function () {}`), where it starts,
//! and its script.
//!
//! A compiled function keeps its names in its ScopeInfo: after the fixed
//! slots and the context locals (names, then infos) come, each only when the
//! flags say so, the saved class variable (1 slot), the function variable
//! (name + slot index; its name is the function's, an empty string or Smi 0
//! when it has none), the inferred name (string or undefined), then (before
//! V8 12.8) the start and end positions.

use crate::error::Miss;
use crate::heap::Heap;
use crate::memory::HeapMemory;
use crate::string::read_name;
use crate::tagged::{is_heap_object, smi};

/// What naming needs from a SharedFunctionInfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionInfo {
    /// The debug name; empty for an anonymous function that V8 could not name.
    pub name: String,
    /// The function's Script (tagged), when it has one (builtins have none).
    pub script: Option<u64>,
    /// The function's start in its script's source (the position V8's perf map and stack traces give).
    pub start: Option<u32>,
    pub scope: ScopeKind,
}

/// The kind of scope of the function's ScopeInfo (what kind of code it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeKind {
    Function,
    /// The top level of a classic script.
    Script,
    /// The top level of `eval`'d code.
    Eval,
    /// The top level of an ES module.
    Module,
    Other,
}

/// Reads the SharedFunctionInfo `sfi` (tagged): its type must be right.
pub fn read<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, sfi: u64) -> Result<FunctionInfo, Miss> {
    let l = heap.layout;
    heap.expect(sfi, l.types.shared_function_info).map_err(|e| if e == Miss::WrongType || e == Miss::BadTag { Miss::NotJsFrame } else { e })?;
    let name_or_scope_info = heap.field(sfi, l.sfi_name_or_scope_info)?;
    let script_word = heap.field(sfi, l.sfi_script)?;
    let script = (is_heap_object(script_word) && heap.instance_type(script_word)? == l.types.script).then_some(script_word);
    let mut info = FunctionInfo { name: String::new(), script, start: None, scope: ScopeKind::Other };
    if !is_heap_object(name_or_scope_info) {
        return Ok(info); // Smi 0: no name
    }
    let t = heap.instance_type(name_or_scope_info)?;
    if t < l.types.first_nonstring {
        info.name = read_name(heap, name_or_scope_info)?;
    } else if t == l.types.scope_info {
        scope_info(heap, name_or_scope_info, &mut info)?;
    } else {
        return Err(Miss::WrongType);
    }
    Ok(info)
}

/// Slots a ScopeInfo may hold before its function name (fixed slots, up to 75 inline local names and their infos).
const MAX_SCOPE_SLOTS: u64 = 4096;

fn scope_info<M: HeapMemory + ?Sized>(heap: &Heap<'_, M>, si: u64, info: &mut FunctionInfo) -> Result<(), Miss> {
    let l = &heap.layout.scope_info;
    let slot = |i: u64| heap.field(si, 8 + 8 * i);
    let flags_word = slot(0)?;
    let flags: u32 = if l.flags_are_smi { smi(flags_word).ok_or(Miss::BadTag)? as u32 } else { flags_word as u32 };
    let locals = smi(slot(l.context_local_count_index)?).ok_or(Miss::BadTag)?;
    if locals < 0 || locals as u64 > MAX_SCOPE_SLOTS {
        return Err(Miss::BadLength);
    }
    let locals = locals as u64;
    let names = if locals < l.max_inlined_local_names { locals } else { 1 };
    let mut i = l.first_vars_index + names + locals;
    let scope_type = flags & l.scope_type_mask;
    info.scope = scope_kind(scope_type.wrapping_sub(l.scope_type_base));
    if flags >> l.has_saved_class_variable_bit & 1 == 1 {
        i += 1;
    }
    let mut name = None;
    if flags >> l.function_variable_shift & 3 != 0 {
        let w = slot(i)?;
        if is_heap_object(w) {
            name = Some(read_name(heap, w)?);
        } else if smi(w) != Some(0) {
            return Err(Miss::BadTag);
        }
        i += 2;
    }
    let mut inferred = None;
    if flags >> l.has_inferred_name_bit & 1 == 1 {
        let w = slot(i)?;
        if is_heap_object(w) && heap.instance_type(w)? < heap.layout.types.first_nonstring {
            inferred = Some(read_name(heap, w)?);
        }
        i += 1;
    }
    let start_slot = match l.fixed_positions {
        Some((start, _)) => Some(start),
        None => l.position_scope_types.contains(&scope_type).then_some(i),
    };
    if let Some(s) = start_slot {
        let start = smi(slot(s)?).ok_or(Miss::BadTag)?;
        info.start = u32::try_from(start).ok();
    }
    info.name = match (name, inferred) {
        (Some(n), _) if !n.is_empty() => n,
        (_, Some(i)) => i,
        _ => String::new(),
    };
    Ok(())
}

/// What a scope type (less the layout's base) says.
fn scope_kind(scope_type: u32) -> ScopeKind {
    match scope_type {
        1 => ScopeKind::Eval,
        2 => ScopeKind::Function,
        3 => ScopeKind::Module,
        4 => ScopeKind::Script,
        _ => ScopeKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::HeapBuilder;
    use crate::layout::Layout;
    use crate::memory::{Budget, Metered};
    use crate::tagged::smi_word;
    use crate::version::V8Version;

    fn check(version: V8Version) {
        let mut b = HeapBuilder::new(Layout::defaults(version).unwrap());
        let file = b.string("/app/server.js");
        let script = b.script(file, "function handler() {}\n");
        let n = b.string("handler");
        let si = b.scope_info(n, None, 16, 21);
        let named = b.shared_function_info(si, script);
        let empty = b.string("");
        let inferred = b.string("exports.handler");
        let si2 = b.scope_info(empty, Some(inferred), 40, 60);
        let anon_inferred = b.shared_function_info(si2, script);
        let si3 = b.scope_info(smi_word(0), None, 70, 80);
        let anon = b.shared_function_info(si3, script);
        let m = Metered::new(&b.image, Budget::FRAME);
        let h = Heap::new(&m, &b.layout);
        let f = read(&h, named).unwrap();
        assert_eq!((f.name.as_str(), f.script, f.start, f.scope), ("handler", Some(script), Some(16), ScopeKind::Function), "{version}");
        assert_eq!(read(&h, anon_inferred).unwrap().name, "exports.handler", "{version}");
        let a = read(&h, anon).unwrap();
        assert_eq!((a.name.as_str(), a.start), ("", Some(70)), "{version}");
        assert_eq!(read(&h, script), Err(Miss::NotJsFrame), "a Script is not a SharedFunctionInfo");
    }

    #[test]
    fn names_and_starts_read_on_every_layout() {
        for s in crate::supported::SUPPORTED {
            check(s.layout.version);
        }
    }
}
