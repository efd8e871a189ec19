//! What a named frame was named from, so that a caller may keep the name across batches
//! (windows) and check it cheaply before using it again: the cached function, code objects
//! and bytecode arrays its naming used, each held as the very cache entry it was
//! ([`Namer::dependencies`]). [`Namer::still_valid`] checks each against the target's heap
//! (the same one read per object per batch as naming does, found in the batch's
//! [`crate::snapshot::Snapshot`]): any object moved, freed or replaced (its entry found
//! stale, or read again as a new entry) and the name must be made again.
//!
//! Holding the entries (not their addresses) keeps an identity check sound: an entry that was
//! dropped and read again is a new allocation, never mistaken for the old one.

use crate::code::CodeInfo;
use crate::frame::{FrameInput, PcRegion};
use crate::function::FunctionInfo;
use crate::heap::Heap;
use crate::memory::{Budget, HeapMemory, Metered};
use crate::namer::{BytecodeInfo, Namer};
use std::sync::Arc;

/// The cache entries one frame's name came from.
#[derive(Debug, Clone, Default)]
pub struct Dependencies {
    function: Option<(u64, Arc<FunctionInfo>)>,
    /// (a pc inside it, the mapping floor its lookup used, the entry).
    codes: Vec<(u64, u64, Arc<CodeInfo>)>,
    bytecodes: Vec<(u64, Arc<BytecodeInfo>)>,
}

impl Dependencies {
    /// Nothing recorded: such a name is never kept (a frame not named from the heap).
    pub fn is_empty(&self) -> bool {
        self.function.is_none() && self.codes.is_empty() && self.bytecodes.is_empty()
    }

    /// The pcs whose code objects this name used (for the batch's reads ahead).
    pub fn code_pcs(&self) -> impl Iterator<Item = u64> + '_ {
        self.codes.iter().map(|(pc, _, _)| *pc)
    }
}

impl Namer {
    /// What naming `input` (just done) used of the caches: its function, the code holding its
    /// pc (and its return candidates'), its bytecode arrays. Call right after naming it.
    pub fn dependencies(&self, input: &FrameInput) -> Dependencies {
        let mut d = Dependencies::default();
        let code_at = |pc: u64| self.codes.key_at_or_below(pc).and_then(|s| self.codes.peek(s)).filter(|c| c.contains(pc)).cloned();
        let mut pcs: Vec<(u64, u64)> = Vec::new();
        if let PcRegion::Jit { floor } = input.region {
            pcs.push((input.pc, floor));
        }
        if let Some(regs) = &input.registers {
            pcs.extend(regs.return_candidates.iter().copied());
        }
        for (pc, floor) in pcs {
            if let Some(c) = code_at(pc) {
                if let Some(array) = c.bytecode_array {
                    d.bytecodes.extend(self.bytecodes.peek(array).map(|b| (array, b.clone())));
                }
                d.codes.push((pc, floor, c));
            }
        }
        let shared = match input.shared {
            0 => d.codes.first().and_then(|(_, _, c)| c.function).unwrap_or(0),
            s => s,
        };
        d.function = self.functions.peek(shared).map(|f| (shared, f.clone()));
        for array in [input.bytecode_array, input.registers.as_ref().map_or(0, |r| r.bytecode_array)] {
            if let Some(b) = self.bytecodes.peek(array) {
                if !d.bytecodes.iter().any(|(a, _)| *a == array) {
                    d.bytecodes.push((array, b.clone()));
                }
            }
        }
        d
    }

    /// Whether every entry `deps` holds is still the cache's entry for its object, checked
    /// against the heap (once per batch per object, as naming checks them).
    pub fn still_valid<M: HeapMemory + ?Sized>(&mut self, mem: &M, deps: &Dependencies) -> bool {
        if deps.is_empty() {
            return false;
        }
        let layout = self.layout.clone();
        let metered = Metered::new(mem, Budget::FRAME);
        let heap = Heap::new(&metered, &layout);
        if let Some((sfi, f)) = &deps.function {
            if !self.function(&heap, *sfi).is_ok_and(|now| Arc::ptr_eq(&now, f)) {
                return false;
            }
        }
        for (pc, floor, c) in &deps.codes {
            if !self.code(&heap, *pc, *floor).is_ok_and(|now| Arc::ptr_eq(&now, c)) {
                return false;
            }
        }
        for (array, b) in &deps.bytecodes {
            // Its entry is made again when a baseline frame adds the bytecodes to it: the same
            // object, checked, and the same positions name alike.
            if !self.bytecode_info(&heap, *array).is_ok_and(|now| Arc::ptr_eq(&now, b) || now.positions == b.positions) {
                return false;
            }
        }
        true
    }

    /// The reads [`Namer::still_valid`] starts with for these, to read ahead with a batch.
    pub fn validity_reads(&self, deps: &Dependencies, out: &mut Vec<(u64, usize)>) {
        if let Some((sfi, _)) = &deps.function {
            self.function_reads(*sfi, out);
        }
        for (pc, _, _) in &deps.codes {
            self.code_reads(*pc, out);
        }
        for (array, _) in &deps.bytecodes {
            self.bytecode_reads(*array, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::image::example;
    use crate::Namer;

    #[test]
    fn a_kept_name_holds_while_its_objects_do_and_not_after_one_is_replaced() {
        for s in crate::supported::SUPPORTED {
            let (major, minor) = (s.layout.version.major, s.layout.version.minor);
            let mut e = example(s.layout.clone());
            let mut namer = Namer::new(e.builder.layout.clone(), Some(e.bytecode_sizes.clone()));
            let kept: Vec<_> = e
                .frames
                .iter()
                .map(|(input, _)| {
                    namer.name(&e.builder.image, input).unwrap();
                    (input.clone(), namer.dependencies(input))
                })
                .collect();
            assert!(kept.iter().all(|(_, d)| !d.is_empty()), "V8 {major}.{minor}: every named frame has what it was named from");
            // The next window: nothing moved, every kept name holds.
            namer.next_batch();
            for (input, deps) in &kept {
                assert!(namer.still_valid(&e.builder.image, deps), "V8 {major}.{minor}: {input:?} unchanged");
            }
            // The GC put another function's SharedFunctionInfo where the first frame's was.
            let (input, deps) = &kept[0];
            let other = e.builder.string("other");
            let si = e.builder.scope_info(other, None, 10, 20);
            let l = e.builder.layout.clone();
            e.builder.set(input.shared, l.sfi_name_or_scope_info, si);
            assert!(namer.still_valid(&e.builder.image, deps), "V8 {major}.{minor}: within a batch a checked object is trusted");
            namer.next_batch();
            assert!(!namer.still_valid(&e.builder.image, deps), "V8 {major}.{minor}: the replaced function's name is not kept");
            let again = namer.name(&e.builder.image, input).unwrap();
            assert_eq!(again.frames.last().unwrap().function, "other", "V8 {major}.{minor}: named again, from the new object");
            // A frame in generated code: its code object replaced (another size at the same start).
            let Some((jit, jit_deps)) = kept.iter().find(|(i, _)| matches!(i.region, crate::PcRegion::Jit { .. }) && i.shared != input.shared) else {
                continue;
            };
            let code = jit_deps.codes[0].2.code;
            let size_at = l.code.instruction_size;
            let mut word = [0u8; 4];
            crate::memory::HeapMemory::read(&e.builder.image, code - 1 + size_at, &mut word).unwrap();
            let old = u32::from_le_bytes(word);
            e.builder.set_u32(code, size_at, old + 0x10);
            namer.next_batch();
            assert!(!namer.still_valid(&e.builder.image, jit_deps), "V8 {major}.{minor}: {jit:?}: its code changed");
        }
    }
}
