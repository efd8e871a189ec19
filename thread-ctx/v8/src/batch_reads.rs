//! The reads a batch of frames will start with, known before naming it: for every object
//! the namer has cached (a frame's function and script, the code holding its pc, its
//! bytecode array), the one read that checks it is still there. Read together
//! ([`crate::snapshot::Snapshot::take`]), they cost the agent one system call per batch
//! instead of one per object: on 20 services at 99 Hz these checks were ~2,000 of the
//! ~5,000 reads of a 10 s window. Objects not cached yet are read as they are met.

use crate::code::CodeInfo;
use crate::frame::{FrameInput, PcRegion};
use crate::layout::{Instructions, Layout};
use crate::namer::Namer;
use crate::tagged::untag;

/// Inlined functions checked ahead per code object (a frame names the few inlined at its pc).
const INLINED_AHEAD: usize = 8;

impl Namer {
    /// (address, length) of every check naming `inputs` will read first.
    pub fn batch_reads(&self, inputs: &[FrameInput]) -> Vec<(u64, usize)> {
        let mut out = Vec::new();
        for input in inputs {
            self.function_reads(input.shared, &mut out);
            match input.region {
                PcRegion::Jit { .. } => self.code_reads(input.pc, &mut out),
                _ => {
                    if let Some(regs) = &input.registers {
                        for &(ret, _) in &regs.return_candidates {
                            self.code_reads(ret, &mut out);
                        }
                    }
                    self.bytecode_reads(input.bytecode_array, &mut out);
                }
            }
        }
        out
    }

    /// The function's check and, when it is cached, its script's.
    pub(crate) fn function_reads(&self, sfi: u64, out: &mut Vec<(u64, usize)>) {
        let l = &self.layout;
        push(out, sfi, l.sfi_name_or_scope_info.max(l.sfi_script) + 8);
        if let Some(script) = self.functions.peek(sfi).and_then(|f| f.script) {
            push(out, script, l.script_source.max(l.script_name).max(l.script_eval_from_shared) + 8);
        }
    }

    /// The check of a bytecode array.
    pub(crate) fn bytecode_reads(&self, array: u64, out: &mut Vec<(u64, usize)>) {
        push(out, array, bytecode_span(&self.layout));
    }

    /// The checks of the cached code holding `pc`, and of the functions it names.
    pub(crate) fn code_reads(&self, pc: u64, out: &mut Vec<(u64, usize)>) {
        let Some(code) = self.codes.key_at_or_below(pc).and_then(|start| self.codes.peek(start)).filter(|c| c.contains(pc)) else { return };
        code_checks(&self.layout, code, out);
        for &f in code.function.iter().chain(code.inlined.iter().take(INLINED_AHEAD)) {
            self.function_reads(f, out);
        }
        if let Some(array) = code.bytecode_array {
            push(out, array, bytecode_span(&self.layout));
        }
    }
}

/// What [`crate::code::still_there`] reads of a cached code object.
fn code_checks(l: &Layout, code: &CodeInfo, out: &mut Vec<(u64, usize)>) {
    if let Instructions::Stream { header, code_field, .. } = l.code.instructions {
        out.push((code.start.wrapping_sub(header), (code_field + 8) as usize));
    }
    let c = &l.code;
    push(out, code.code, c.flags.max(c.instruction_size).max(c.position_table).max(c.deoptimization_data) + 8);
}

/// What [`Namer`]'s check of a cached bytecode array reads.
fn bytecode_span(l: &Layout) -> u64 {
    l.bytecode_length.max(l.bytecode_position_table) + 8
}

/// The object `tagged` points at, `len` bytes of it; nothing for a word that is no heap pointer.
fn push(out: &mut Vec<(u64, usize)>, tagged: u64, len: u64) {
    if let Ok(addr) = untag(tagged) {
        out.push((addr, len as usize));
    }
}

#[cfg(test)]
mod tests {
    use crate::image::{example, HeapImage};
    use crate::memory::{Fault, HeapMemory};
    use crate::snapshot::Snapshot;
    use crate::Namer;
    use std::cell::Cell;

    /// The example heap, counting the reads that reach it (a batch read counts once).
    struct Counted<'a> {
        image: &'a HeapImage,
        calls: Cell<u32>,
    }

    impl HeapMemory for Counted<'_> {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
            self.calls.set(self.calls.get() + 1);
            self.image.read(addr, buf)
        }

        fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Result<(), Fault>> {
            self.calls.set(self.calls.get() + 1);
            reads.iter_mut().map(|(a, b)| self.image.read(*a, b)).collect()
        }
    }

    #[test]
    fn a_cached_batch_costs_one_read_and_names_alike() {
        for s in crate::supported::SUPPORTED {
            let (major, minor) = (s.layout.version.major, s.layout.version.minor);
            let e = example(s.layout.clone());
            let mut namer = Namer::new(e.builder.layout.clone(), Some(e.bytecode_sizes.clone()));
            let inputs: Vec<_> = e.frames.iter().map(|(input, _)| input.clone()).collect();
            let first: Vec<_> = inputs.iter().map(|i| namer.name(&e.builder.image, i).unwrap()).collect();
            namer.next_batch();
            let mut memory = Snapshot::new(Counted { image: &e.builder.image, calls: Cell::new(0) });
            memory.take(&namer.batch_reads(&inputs));
            let again: Vec<_> = inputs.iter().map(|i| namer.name(&memory, i).unwrap()).collect();
            assert_eq!(first, again, "V8 {major}.{minor}: the same names from the batch's copy");
            assert_eq!(memory.inner().calls.get(), 1, "V8 {major}.{minor}: every check came from the one batch read");
            assert_eq!(namer.stale(), 0);
        }
    }
}
