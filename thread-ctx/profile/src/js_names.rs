//! JS frames named from the target's own V8 heap (thread-ctx-v8), for a node
//! process whose V8 the sampler walks: the function, its script (file path,
//! or `file://` URL), and the sampled line and column, in every tier, with the
//! functions the optimizing compilers inlined as frames of their own.
//!
//! A frame the heap does not name (a miss: the code moved, a frame that only
//! looked like a JS frame, a builtin with JS linkage such as
//! `Array.prototype.map`) is named by its pc as before: V8's jitdump or perf
//! map when the process writes them, the ELF symbol for a builtin.

use super::frame::{Frame, JsTier, SourcePos};
use super::js_key::{JsKey, JS_FRAME_BY_CODE};
use std::cell::Cell;
use thread_ctx_discovery::maps::Mapping;
use thread_ctx_discovery::remote_memory::{RemoteMemory, MAX_IOVECS};
use thread_ctx_sampler::event::{JS_FRAME_LEAF_STACK, JS_FRAME_OFFSET_REGISTER};
use thread_ctx_sampler::V8Process;
use thread_ctx_v8::cache::CacheSize;
use thread_ctx_v8::code::Tier;
use thread_ctx_v8::dependencies::Dependencies;
use thread_ctx_v8::memory::{Fault, HeapMemory};
use thread_ctx_v8::namer::{CacheSizes, Stats};
use thread_ctx_v8::snapshot::Snapshot;
use thread_ctx_v8::tagged::smi_word;
use thread_ctx_v8::{FrameInput, LeafRegisters, Miss, Namer, PcRegion};

/// The target's memory as the namer reads it, with what the reads cost.
struct TargetHeap {
    memory: RemoteMemory,
    reads: Cell<HeapReads>,
}

/// Reads of a target's heap so far: system calls (`process_vm_readv`) and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapReads {
    pub calls: u64,
    pub bytes: u64,
}

impl std::ops::AddAssign for HeapReads {
    fn add_assign(&mut self, o: HeapReads) {
        self.calls += o.calls;
        self.bytes += o.bytes;
    }
}

impl TargetHeap {
    fn count(&self, calls: u64, bytes: u64) {
        let mut r = self.reads.get();
        r += HeapReads { calls, bytes };
        self.reads.set(r);
    }
}

impl HeapMemory for TargetHeap {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.count(1, buf.len() as u64);
        self.memory.read(addr, buf, "V8 heap").map_err(|_| Fault { addr, len: buf.len() })
    }

    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Result<(), Fault>> {
        let ok = self.memory.read_many(reads);
        // A call per MAX_IOVECS reads, and one more after each failed read.
        let failed = ok.iter().filter(|&&o| !o).count();
        self.count(reads.len().div_ceil(MAX_IOVECS) as u64 + failed as u64, reads.iter().map(|(_, b)| b.len() as u64).sum());
        reads.iter().zip(ok).map(|((addr, buf), ok)| if ok { Ok(()) } else { Err(Fault { addr: *addr, len: buf.len() }) }).collect()
    }
}

/// What a JS frame became.
pub struct JsNamed {
    /// Innermost first: the functions inlined at the pc, then the frame's own.
    pub frames: Vec<Frame>,
    /// The sample landed in a builtin that built no frame, called from this JS frame: that
    /// builtin's pc, to show as a frame of its own above these.
    pub builtin_pc: Option<u64>,
}

/// A frame the heap named, as profiles show it.
fn frame_of(f: thread_ctx_v8::JsFrame) -> Frame {
    Frame {
        pos: f.line.map(|line| SourcePos { line, column: f.column }),
        tier: f.tier.map(tier_of),
        ..Frame::js(&f.function, f.script.as_deref(), f.function_line, f.function_column)
    }
}

fn tier_of(t: Tier) -> JsTier {
    match t {
        Tier::Interpreted => JsTier::Interpreted,
        Tier::Baseline => JsTier::Baseline,
        Tier::Maglev => JsTier::Maglev,
        Tier::Turbofan => JsTier::Turbofan,
    }
}

/// A key's frames (or why the heap did not name it) and what they were named from.
pub type Named = (Result<JsNamed, &'static str>, Dependencies);

/// One process's JS frame namer.
pub struct JsNames {
    process: V8Process,
    namer: Namer,
    /// The target's heap, with each batch's checks read at once in front of it.
    heap: Snapshot<TargetHeap>,
}

/// What naming a key asks of the namer.
enum Ask {
    /// The innermost frame of generated code whose frame holds no function: its code object.
    ByCode {
        pc: u64,
        floor: u64,
    },
    Frame(FrameInput),
}

impl Ask {
    /// The frame as the namer takes it.
    fn input(&self) -> FrameInput {
        match self {
            Ask::Frame(input) => input.clone(),
            &Ask::ByCode { pc, floor } => {
                FrameInput { pc, region: PcRegion::Jit { floor }, leaf: true, shared: 0, bytecode_array: 0, bytecode_offset: 0, registers: None }
            }
        }
    }
}

impl JsNames {
    pub fn new(pid: i32, process: V8Process) -> Self {
        let namer = Namer::new(process.object.layout.clone(), process.object.bytecode_sizes.clone());
        let heap = TargetHeap { memory: RemoteMemory::new(pid), reads: Cell::new(HeapReads::default()) };
        JsNames { process, namer, heap: Snapshot::new(heap) }
    }

    /// The frames of `key`; Err (why, a short label) when the heap does not name it (its pc is
    /// then named as before).
    pub fn name(&mut self, key: &JsKey, maps: &[Mapping]) -> Result<JsNamed, &'static str> {
        let ask = self.ask(key, maps).ok_or(Miss::NotJsFrame.as_str())?;
        let named = self.name_asked(key, ask);
        // What it read of the target is not kept past its naming.
        self.heap.clear();
        named
    }

    /// The frames of each key, named as one batch: what checks the namer's cached objects is
    /// read from the target at once first (one system call, not one per object).
    pub fn name_batch(&mut self, keys: &[JsKey], maps: &[Mapping]) -> Vec<Result<JsNamed, &'static str>> {
        self.name_and_check(keys, &[], maps).1.into_iter().map(|(named, _)| named).collect()
    }

    /// One batch: first whether each name kept from an earlier batch still holds (`kept`: what
    /// each was named from), then the frames of each key with what they were named from (empty
    /// for a miss), the checks and the names read from the target at once.
    pub fn name_and_check(&mut self, keys: &[JsKey], kept: &[&Dependencies], maps: &[Mapping]) -> (Vec<bool>, Vec<Named>) {
        self.namer.next_batch();
        let asks: Vec<Option<Ask>> = keys.iter().map(|k| self.ask(k, maps)).collect();
        let inputs: Vec<FrameInput> = asks.iter().flatten().map(Ask::input).collect();
        let mut reads = self.namer.batch_reads(&inputs);
        for deps in kept {
            self.namer.validity_reads(deps, &mut reads);
        }
        self.heap.take(&reads);
        let checks = kept.iter().map(|d| self.namer.still_valid(&self.heap, d)).collect();
        let named = keys
            .iter()
            .zip(asks)
            .map(|(key, ask)| {
                let Some(ask) = ask else { return (Err(Miss::NotJsFrame.as_str()), Dependencies::default()) };
                let input = ask.input();
                match self.name_asked(key, ask) {
                    Ok(named) => (Ok(named), self.namer.dependencies(&input)),
                    Err(why) => (Err(why), Dependencies::default()),
                }
            })
            .collect();
        self.heap.clear();
        (checks, named)
    }

    /// What naming `key` asks of the namer; None for a frame the heap cannot name.
    fn ask(&self, key: &JsKey, maps: &[Mapping]) -> Option<Ask> {
        let region = self.process.region(maps, key.pc);
        if key.flags & JS_FRAME_BY_CODE != 0 {
            let PcRegion::Jit { floor } = region else { return None };
            return Some(Ask::ByCode { pc: key.pc, floor });
        }
        let mut input = FrameInput {
            pc: key.pc,
            region,
            leaf: key.depth == 0,
            shared: key.shared,
            bytecode_array: key.bytecode_array,
            bytecode_offset: key.bytecode_offset,
            registers: None,
        };
        if key.flags & JS_FRAME_OFFSET_REGISTER != 0 {
            // The sampler put the interpreter's offset register (an untagged offset) in the slot's place.
            let register = key.bytecode_offset;
            input.bytecode_offset = smi_word(register as i32);
            input.registers = Some(LeafRegisters { bytecode_array: key.bytecode_array, bytecode_offset: register, return_candidates: Vec::new() });
        } else if key.flags & JS_FRAME_LEAF_STACK != 0 {
            let return_candidates = key
                .leaf_words
                .iter()
                .filter_map(|&w| match self.process.region(maps, w) {
                    PcRegion::Jit { floor } => Some((w, floor)),
                    _ => None,
                })
                .collect();
            input.registers = Some(LeafRegisters { bytecode_array: 0, bytecode_offset: 0, return_candidates });
        }
        Some(Ask::Frame(input))
    }

    fn name_asked(&mut self, key: &JsKey, ask: Ask) -> Result<JsNamed, &'static str> {
        let input = match ask {
            Ask::ByCode { pc, floor } => {
                let named = self.namer.name_by_code(&self.heap, pc, floor).map_err(Miss::as_str)?;
                return Ok(JsNamed { frames: named.frames.into_iter().map(frame_of).collect(), builtin_pc: None });
            }
            Ask::Frame(input) => input,
        };
        let named = self.namer.name(&self.heap, &input).map_err(Miss::as_str)?;
        // A builtin with JS linkage has no script of its own: its ELF symbol names it better.
        if named.frames.iter().all(|f| f.script.is_none() && f.tier.is_none()) {
            return Err("builtin");
        }
        let frames = named.frames.into_iter().map(frame_of).collect();
        Ok(JsNamed { frames, builtin_pc: (named.pc != key.pc).then_some(key.pc) })
    }

    /// Starts a batch of frames named together (see [`Namer::next_batch`]).
    pub fn next_batch(&mut self) {
        self.namer.next_batch();
    }

    pub fn stats(&self) -> &Stats {
        &self.namer.stats
    }

    /// What reading the target's heap has cost so far.
    pub fn reads(&self) -> HeapReads {
        self.heap.inner().reads.get()
    }

    pub fn cache_sizes(&self) -> CacheSizes {
        self.namer.cache_sizes()
    }

    /// Entries and bytes of every cache together.
    pub fn cached(&self) -> CacheSize {
        let s = self.cache_sizes();
        CacheSize { entries: s.entries(), bytes: s.bytes() }
    }

    /// The object holding the process's V8, for messages.
    pub fn object_path(&self) -> &str {
        &self.process.path
    }
}
