//! Names JS frames of one process from its heap ([`Namer::name`]), with
//! caches that stay right while the garbage collector moves objects: every
//! cached function, script, bytecode table and code object is checked against
//! the words it was read from before it is used (one read), and dropped when
//! they changed.
//!
//! How a frame is named, by where its pc is:
//! - in generated code: the code object holding the pc ([`crate::code::find`]),
//!   which must belong to the frame (baseline code: the frame's own
//!   BytecodeArray; optimized code: the frame's SharedFunctionInfo). Baseline:
//!   pc → bytecode offset → position; Maglev/TurboFan: pc → position, and
//!   inlined functions through the inlining positions, innermost first.
//! - in a builtin, with a Smi in the bytecode offset slot and a BytecodeArray in
//!   its slot: an interpreted frame; its bytecode offset → position (for the
//!   innermost frame sampled in a bytecode handler, the offset register's value).
//! - in a builtin that built no frame of its own (innermost only): the frame's
//!   return address into its own code is found at the stack pointer.
//! - otherwise (a builtin with JS linkage, like `Array.prototype.map`): the
//!   function's name alone.

use crate::bytecode::baseline_bytecode_offset;
use crate::cache::{BoundedCache, CacheSize};
use crate::code::{self, CodeInfo, LearnedMaps, Tier, MAX_TABLE_BYTES};
use crate::error::Miss;
use crate::frame::{FrameInput, JsFrame, NamedFrame, PcRegion};
use crate::function::{self, FunctionInfo, ScopeKind};
use crate::heap::Heap;
use crate::layout::Layout;
use crate::memory::{word, Budget, HeapMemory, Metered};
use crate::position_table::{position_at, SourcePosition};
use crate::script::{self, EvalPosition, ScriptInfo, NEW_FUNCTION_PREFIX};
use crate::symbols::BytecodeSizes;
use crate::tagged::{is_heap_object, smi, untag};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bounds of one process's caches. A busy service runs a few hundred to a few
/// thousand functions; past these the least recently used quarter goes.
pub const MAX_FUNCTIONS: usize = 16 << 10;
pub const MAX_SCRIPTS: usize = 2 << 10;
pub const MAX_CODES: usize = 8 << 10;
pub const MAX_BYTECODES: usize = 16 << 10;
pub const MAX_FUNCTION_BYTES: usize = 4 << 20;
/// Line ends: a 100k-line bundle is 400 KB.
pub const MAX_SCRIPT_BYTES: usize = 8 << 20;
pub const MAX_CODE_BYTES: usize = 8 << 20;
pub const MAX_BYTECODE_BYTES: usize = 8 << 20;
/// What every process's caches hold together, at the most: each process's bounds are those above
/// scaled to its share of this budget (all of them while they fit, never less than 1/[`MIN_SHARE`]
/// of them), so an agent tracking many services that keep compiling new code stays within its
/// memory budget (the JIT-churn soak: ≤ 64 MiB for the whole agent). Applied at each batch.
pub const SHARED_BYTES: usize = 16 << 20;
/// The least share of its bounds a process keeps (its hot functions stay cached), as 1/N.
pub const MIN_SHARE: usize = 32;
/// Namers alive in this process: one per named target.
static LIVE_NAMERS: AtomicUsize = AtomicUsize::new(0);

/// One process's share of its bounds, as (numerator, denominator), when `namers` share the budget.
pub fn share(namers: usize) -> (usize, usize) {
    const ONE: usize = MAX_FUNCTION_BYTES + MAX_SCRIPT_BYTES + MAX_CODE_BYTES + MAX_BYTECODE_BYTES;
    let whole = ONE * namers.max(1);
    if whole <= SHARED_BYTES {
        (1, 1)
    } else if SHARED_BYTES * MIN_SHARE < whole {
        (1, MIN_SHARE)
    } else {
        (SHARED_BYTES, whole)
    }
}

/// Largest bytecode read for a baseline frame's pc → bytecode mapping.
const MAX_BYTECODE_LENGTH: u64 = 1 << 20;

/// What naming counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames named (with or without a line).
    pub named: u64,
    /// Frames named by function only: no position table, or none for that offset.
    pub without_line: u64,
    /// Inlined functions named inside optimized frames.
    pub inlined: u64,
    /// Frames not named, by reason ([`Miss::index`]).
    pub misses: [u64; Miss::ALL.len()],
}

impl Stats {
    pub fn missed(&self) -> u64 {
        self.misses.iter().sum()
    }
}

/// The caches' sizes, for the agent's status line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheSizes {
    pub functions: CacheSize,
    pub scripts: CacheSize,
    pub codes: CacheSize,
    pub bytecodes: CacheSize,
}

impl CacheSizes {
    pub fn entries(&self) -> usize {
        self.functions.entries + self.scripts.entries + self.codes.entries + self.bytecodes.entries
    }

    pub fn bytes(&self) -> usize {
        self.functions.bytes + self.scripts.bytes + self.codes.bytes + self.bytecodes.bytes
    }
}

/// A bytecode array's position table (and bytecodes, for baseline frames), as cached.
#[derive(Debug)]
pub struct BytecodeInfo {
    pub(crate) positions: Vec<u8>,
    /// Read when a baseline frame needs them.
    bytecodes: Option<Vec<u8>>,
}

/// Names the JS frames of one process.
pub struct Namer {
    pub(crate) layout: Layout,
    bytecode_sizes: Option<BytecodeSizes>,
    pub(crate) functions: BoundedCache<Arc<FunctionInfo>>,
    pub(crate) scripts: BoundedCache<Arc<ScriptInfo>>,
    pub(crate) codes: BoundedCache<Arc<CodeInfo>>,
    pub(crate) bytecodes: BoundedCache<Arc<BytecodeInfo>>,
    learned: LearnedMaps,
    pub stats: Stats,
}

impl Namer {
    pub fn new(layout: Layout, bytecode_sizes: Option<BytecodeSizes>) -> Self {
        LIVE_NAMERS.fetch_add(1, Ordering::Relaxed);
        Namer {
            layout,
            bytecode_sizes,
            functions: BoundedCache::new(MAX_FUNCTIONS, MAX_FUNCTION_BYTES),
            scripts: BoundedCache::new(MAX_SCRIPTS, MAX_SCRIPT_BYTES),
            codes: BoundedCache::new(MAX_CODES, MAX_CODE_BYTES),
            bytecodes: BoundedCache::new(MAX_BYTECODES, MAX_BYTECODE_BYTES),
            learned: LearnedMaps::default(),
            stats: Stats::default(),
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn cache_sizes(&self) -> CacheSizes {
        CacheSizes { functions: self.functions.size(), scripts: self.scripts.size(), codes: self.codes.size(), bytecodes: self.bytecodes.size() }
    }

    /// Cache entries found stale (their object moved or was freed) and dropped, over all caches.
    pub fn stale(&self) -> u64 {
        self.functions.stale + self.scripts.stale + self.codes.stale + self.bytecodes.stale
    }

    /// Cache entries dropped to keep the caches bounded.
    pub fn evicted(&self) -> u64 {
        self.functions.evicted + self.scripts.evicted + self.codes.evicted + self.bytecodes.evicted
    }

    /// Starts a batch of frames named together: a cached object checked once in it is trusted for
    /// the rest of it (GC moves objects between batches, not within the instant they are named).
    pub fn next_batch(&mut self) {
        let (num, den) = share(LIVE_NAMERS.load(Ordering::Relaxed));
        // Bounds are at most 16 Ki entries or 8 MiB, the numerator 16 MiB: no overflow in 64 bits.
        let of = |bound: usize| bound * num / den;
        self.functions.set_bounds(of(MAX_FUNCTIONS), of(MAX_FUNCTION_BYTES));
        self.scripts.set_bounds(of(MAX_SCRIPTS), of(MAX_SCRIPT_BYTES));
        self.codes.set_bounds(of(MAX_CODES), of(MAX_CODE_BYTES));
        self.bytecodes.set_bounds(of(MAX_BYTECODES), of(MAX_BYTECODE_BYTES));
        self.functions.next_batch();
        self.scripts.next_batch();
        self.codes.next_batch();
        self.bytecodes.next_batch();
    }

    /// Names one frame, within [`Budget::FRAME`]. A miss is counted and returned.
    pub fn name<M: HeapMemory + ?Sized>(&mut self, mem: &M, input: &FrameInput) -> Result<NamedFrame, Miss> {
        let layout = self.layout.clone();
        let metered = Metered::new(mem, Budget::FRAME);
        let heap = Heap::new(&metered, &layout);
        let r = self.name_in(&heap, input);
        match &r {
            Ok(named) => {
                self.stats.named += 1;
                self.stats.inlined += named.frames.iter().filter(|f| f.inlined).count() as u64;
                self.stats.without_line += named.frames.last().is_some_and(|f| f.line.is_none() && f.tier.is_some()) as u64;
            }
            Err(m) => self.stats.misses[m.index()] += 1,
        }
        r
    }

    /// Names the innermost frame of a sample whose pc is in generated code but whose frame
    /// holds no JS function yet (the sample landed in the prologue or epilogue, before the
    /// frame was built or after it was torn down: a small function called from a builtin, such
    /// as a sort comparator, spends much of its time there), from the code object alone. Only
    /// optimized code names its function; baseline code does not, and is a miss.
    pub fn name_by_code<M: HeapMemory + ?Sized>(&mut self, mem: &M, pc: u64, floor: u64) -> Result<NamedFrame, Miss> {
        let layout = self.layout.clone();
        let metered = Metered::new(mem, Budget::FRAME);
        let heap = Heap::new(&metered, &layout);
        let r = self.code(&heap, pc, floor).and_then(|code| {
            let shared = code.function.ok_or(Miss::NotJsFrame)?;
            let function = self.function(&heap, shared)?;
            let input =
                FrameInput { pc, region: PcRegion::Jit { floor }, leaf: true, shared, bytecode_array: 0, bytecode_offset: 0, registers: None };
            self.name_in_code(&heap, &input, &function, &code, pc, true)
        });
        match &r {
            Ok(named) => {
                self.stats.named += 1;
                self.stats.inlined += named.frames.iter().filter(|f| f.inlined).count() as u64;
            }
            Err(m) => self.stats.misses[m.index()] += 1,
        }
        r
    }

    fn name_in<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, input: &FrameInput) -> Result<NamedFrame, Miss> {
        let function = self.function(heap, input.shared)?;
        let bytecode_offset = smi(input.bytecode_offset);
        if let PcRegion::Jit { floor } = input.region {
            match self.frame_code(heap, input, floor) {
                Ok(code) => return self.name_in_code(heap, input, &function, &code, input.pc, input.leaf),
                // An interpreted frame whose pc is in its function's own copy of the interpreter's
                // entry trampoline (--interpreted-frames-native-stack: a builtin's code, no
                // function's): named by its bytecode offset, as any.
                Err(_) if bytecode_offset.is_some() && self.is_bytecode_array(heap, input.bytecode_array) => {}
                Err(m) => return Err(m),
            }
        }
        if input.leaf {
            if let Some(regs) = &input.registers {
                // A frameless builtin called from generated code: its return address is at the stack pointer.
                for &(ret, floor) in &regs.return_candidates {
                    if let Ok(code) = self.code(heap, ret, floor) {
                        if self.belongs(&code, input) {
                            return self.name_in_code(heap, input, &function, &code, ret, false);
                        }
                    }
                }
            }
        }
        let interpreted = bytecode_offset.is_some() && self.is_bytecode_array(heap, input.bytecode_array);
        if !interpreted {
            // A builtin with JS linkage (or a frame V8 has not finished setting up).
            return Ok(NamedFrame { frames: vec![self.js_frame(heap, &function, None, None)], pc: input.pc });
        }
        let mut raw = bytecode_offset.unwrap_or(0) as i64;
        if let (true, PcRegion::BytecodeHandler, Some(regs)) = (input.leaf, input.region, &input.registers) {
            if regs.bytecode_array == input.bytecode_array && regs.bytecode_offset < u32::MAX as u64 {
                raw = regs.bytecode_offset as i64;
            }
        }
        let offset = raw - (self.layout.bytecode_data as i64 - 1);
        let position = self.bytecode_position(heap, input.bytecode_array, offset)?;
        Ok(NamedFrame { frames: vec![self.js_frame(heap, &function, position, Some(Tier::Interpreted))], pc: input.pc })
    }

    /// The generated code at the pc of the frame `input`, which must be that frame's.
    fn frame_code<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, input: &FrameInput, floor: u64) -> Result<Arc<CodeInfo>, Miss> {
        let code = self.code(heap, input.pc, floor)?;
        if self.belongs(&code, input) {
            return Ok(code);
        }
        if code.tier.is_none() {
            return Err(Miss::NoCode); // no function's code: kept, not looked for again
        }
        // V8 reused the code's addresses for another function's: look again, once.
        self.codes.remove(code.start);
        let code = self.code(heap, input.pc, floor)?;
        if self.belongs(&code, input) {
            Ok(code)
        } else {
            Err(Miss::CodeMismatch)
        }
    }

    /// Whether generated code `code` is the code of the frame `input`.
    fn belongs(&self, code: &CodeInfo, input: &FrameInput) -> bool {
        match code.tier {
            Some(Tier::Baseline) => code.bytecode_array == Some(input.bytecode_array),
            Some(_) => code.function == Some(input.shared),
            None => false,
        }
    }

    fn name_in_code<M: HeapMemory + ?Sized>(
        &mut self,
        heap: &Heap<'_, M>,
        input: &FrameInput,
        function: &FunctionInfo,
        code: &CodeInfo,
        pc: u64,
        sampled: bool,
    ) -> Result<NamedFrame, Miss> {
        // A return address is one past its call: the call's position is one byte back.
        let offset = pc - code.start - if sampled || pc == code.start { 0 } else { 1 };
        let Some(tier) = code.tier else { return Err(Miss::NoCode) };
        if tier == Tier::Baseline {
            let bytecode_array = code.bytecode_array.unwrap_or(input.bytecode_array);
            let bytecodes = self.bytecodes_of(heap, bytecode_array);
            let position = match (&self.bytecode_sizes, bytecodes) {
                (Some(sizes), Ok(Some(bytecodes))) => match baseline_bytecode_offset(sizes, &code.table, &bytecodes, pc - code.start)? {
                    Some(o) => self.bytecode_position(heap, bytecode_array, o as i64)?,
                    None => None,
                },
                _ => None,
            };
            return Ok(NamedFrame { frames: vec![self.js_frame(heap, function, position, Some(Tier::Baseline))], pc });
        }
        let mut frames = Vec::new();
        let mut position = if code.table.is_empty() { None } else { position_at(&code.table, offset as i64, self.layout.position_code_shift)? };
        // Inlined functions, innermost first: each inlining id leads to its caller's position.
        let mut seen = 0;
        while let Some(p) = position.filter(|p| p.inlining_id() != 0) {
            let id = p.inlining_id() as usize;
            let Some(&(caller, index)) = code.inlining.get(id - 1) else { return Err(Miss::BadTable) };
            seen += 1;
            if seen > code.inlining.len() || caller.inlining_id() as usize >= id {
                return Err(Miss::BadTable); // ids must fall towards the outermost function
            }
            let inlined = if index >= 0 { *code.inlined.get(index as usize).ok_or(Miss::BadLength)? } else { input.shared };
            let info = self.function(heap, inlined)?;
            let mut frame = self.js_frame(heap, &info, Some(p), Some(tier));
            frame.inlined = true;
            frames.push(frame);
            position = Some(caller);
        }
        frames.push(self.js_frame(heap, function, position, Some(tier)));
        Ok(NamedFrame { frames, pc })
    }

    /// The JsFrame of `function` at `position` (in its own script).
    fn js_frame<M: HeapMemory + ?Sized>(
        &mut self,
        heap: &Heap<'_, M>,
        function: &FunctionInfo,
        position: Option<SourcePosition>,
        tier: Option<Tier>,
    ) -> JsFrame {
        let script = function.script.and_then(|s| self.script(heap, s).ok());
        let at = |pos: Option<u32>| match (&script, pos) {
            (Some(s), Some(p)) => {
                let (l, c) = s.line_column(p);
                (Some(l), Some(c))
            }
            _ => (None, None),
        };
        let (function_line, function_column) = at(function.start);
        let (line, column) = at(position.and_then(SourcePosition::script_offset));
        let new_function = script.as_ref().is_some_and(|s| s.new_function) && function.start == Some(NEW_FUNCTION_PREFIX.len() as u32 - 1);
        let name = match (function.name.as_str(), function.scope) {
            ("", ScopeKind::Eval) => "eval".to_string(),
            ("", _) if new_function => "anonymous".to_string(),
            ("", _) => "(anonymous)".to_string(),
            (n, _) => n.to_string(),
        };
        let script_name = match &script {
            Some(s) => match (&s.name, s.eval_from) {
                (Some(n), _) => Some(n.clone()),
                (None, Some((caller, pos))) => Some(self.eval_origin(heap, caller, pos, s.new_function)),
                (None, None) => None,
            },
            None => None,
        };
        JsFrame { function: name, script: script_name, function_line, function_column, line, column, tier, inlined: false }
    }

    /// `eval at CALLER (FILE:LINE)`, as V8's stack traces name eval'd code
    /// (`new Function at ...` for a `new Function` body).
    fn eval_origin<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, caller: u64, pos: EvalPosition, new_function: bool) -> String {
        let what = if new_function { "new Function" } else { "eval" };
        let Ok(f) = self.function(heap, caller) else { return what.to_string() };
        let name = if f.name.is_empty() { "<anonymous>" } else { f.name.as_str() };
        let script = f.script.and_then(|s| self.script(heap, s).ok());
        let offset = match pos {
            EvalPosition::Source(p) => Some(p),
            EvalPosition::BytecodeOffset(o) => self
                .caller_bytecode(heap, caller)
                .and_then(|b| self.bytecode_position(heap, b, o as i64).ok().flatten())
                .and_then(SourcePosition::script_offset),
            EvalPosition::Unknown => None,
        };
        match script.as_deref().and_then(|s| s.name.as_deref().map(|n| (n, s))) {
            Some((file, s)) => match offset {
                Some(p) => format!("{what} at {name} ({file}:{})", s.line_column(p).0),
                None => format!("{what} at {name} ({file})"),
            },
            None => format!("{what} at {name}"),
        }
    }

    /// The BytecodeArray of the function `sfi` (tagged): its data, or its baseline code's.
    fn caller_bytecode<M: HeapMemory + ?Sized>(&self, heap: &Heap<'_, M>, sfi: u64) -> Option<u64> {
        let l = &self.layout;
        let data = heap.field(sfi, l.sfi_function_data).ok()?;
        if heap.instance_type(data).ok()? == l.types.code {
            return heap.bytecode_array(heap.field(data, l.code.deoptimization_data).ok()?).ok();
        }
        heap.bytecode_array(data).ok()
    }

    /// The function behind the SharedFunctionInfo `sfi` (tagged), cached and checked.
    pub(crate) fn function<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, sfi: u64) -> Result<Arc<FunctionInfo>, Miss> {
        if let Some(f) = self.functions.fresh(sfi) {
            return Ok(f.clone());
        }
        let l = &self.layout;
        untag(sfi).map_err(|_| Miss::NotJsFrame)?;
        let span = l.sfi_name_or_scope_info.max(l.sfi_script) + 8;
        let header = heap.mem.bytes_at(untag(sfi)?, span as usize).map_err(|e| if e == Miss::Fault { Miss::NotJsFrame } else { e })?;
        let fingerprint = vec![word(&header, 0), word(&header, l.sfi_name_or_scope_info as usize), word(&header, l.sfi_script as usize)];
        if let Some(f) = self.functions.get_valid(sfi, |_, old| old == fingerprint.as_slice()) {
            return Ok(f.clone());
        }
        let info = Arc::new(function::read(heap, sfi)?);
        let bytes = std::mem::size_of::<FunctionInfo>() + info.name.len();
        self.functions.insert(sfi, info.clone(), fingerprint, bytes);
        Ok(info)
    }

    fn script<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, script: u64) -> Result<Arc<ScriptInfo>, Miss> {
        if let Some(s) = self.scripts.fresh(script) {
            return Ok(s.clone());
        }
        let l = &self.layout;
        let span = l.script_source.max(l.script_name).max(l.script_eval_from_shared) + 8;
        let header = heap.mem.bytes_at(untag(script)?, span as usize)?;
        let fingerprint = vec![
            word(&header, 0),
            word(&header, l.script_source as usize),
            word(&header, l.script_name as usize),
            word(&header, l.script_eval_from_shared as usize),
        ];
        if let Some(s) = self.scripts.get_valid(script, |_, old| old == fingerprint.as_slice()) {
            return Ok(s.clone());
        }
        let info = Arc::new(script::read(heap, script)?);
        self.scripts.insert(script, info.clone(), fingerprint, info.bytes());
        Ok(info)
    }

    pub(crate) fn code<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, pc: u64, floor: u64) -> Result<Arc<CodeInfo>, Miss> {
        let cached = self.codes.key_at_or_below(pc).filter(|&start| self.codes.peek(start).is_some_and(|c| c.contains(pc)));
        if let Some(start) = cached {
            if let Some(c) = self.codes.get_valid(start, |c, _| code::still_there(heap, c)) {
                return Ok(c.clone());
            }
        }
        let info = Arc::new(code::find(heap, pc, floor, &mut self.learned)?);
        self.codes.insert(info.start, info.clone(), vec![], info.bytes());
        Ok(info)
    }

    /// The position of bytecode offset `offset` of the BytecodeArray `array` (tagged).
    fn bytecode_position<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, array: u64, offset: i64) -> Result<Option<SourcePosition>, Miss> {
        let info = self.bytecode_info(heap, array)?;
        if info.positions.is_empty() {
            return Ok(None); // V8 has not made this function's source positions (lazy)
        }
        position_at(&info.positions, offset, self.layout.position_code_shift)
    }

    fn bytecode_fingerprint<M: HeapMemory + ?Sized>(&self, heap: &Heap<'_, M>, array: u64) -> Result<Vec<u64>, Miss> {
        let l = &self.layout;
        let span = l.bytecode_length.max(l.bytecode_position_table) + 8;
        let header = heap.mem.bytes_at(untag(array)?, span as usize)?;
        Ok(vec![word(&header, 0), word(&header, l.bytecode_length as usize), word(&header, l.bytecode_position_table as usize)])
    }

    /// `array` is a bytecode array this namer has cached, still what it was.
    /// Whether `tagged` is a BytecodeArray. One cached and checked (its map word among what is
    /// checked) is one: its type needs no read of its map then.
    fn is_bytecode_array<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, tagged: u64) -> bool {
        self.cached_bytecode_array(heap, tagged) || heap.instance_type(tagged).ok() == Some(self.layout.types.bytecode_array)
    }

    fn cached_bytecode_array<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, array: u64) -> bool {
        if self.bytecodes.fresh(array).is_some() {
            return true;
        }
        if self.bytecodes.peek(array).is_none() {
            return false;
        }
        let Ok(fingerprint) = self.bytecode_fingerprint(heap, array) else { return false };
        self.bytecodes.get_valid(array, |_, old| old == fingerprint.as_slice()).is_some()
    }

    pub(crate) fn bytecode_info<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, array: u64) -> Result<Arc<BytecodeInfo>, Miss> {
        if let Some(b) = self.bytecodes.fresh(array) {
            return Ok(b.clone());
        }
        let fingerprint = self.bytecode_fingerprint(heap, array)?;
        if let Some(b) = self.bytecodes.get_valid(array, |_, old| old == fingerprint.as_slice()) {
            return Ok(b.clone());
        }
        let l = &self.layout;
        heap.expect(array, l.types.bytecode_array)?;
        let table = fingerprint[2];
        let positions = if is_heap_object(table) && heap.instance_type(table)? == l.types.position_table {
            heap.byte_array(table, l.types.position_table, MAX_TABLE_BYTES)?
        } else {
            Vec::new()
        };
        let info = Arc::new(BytecodeInfo { positions, bytecodes: None });
        self.bytecodes.insert(array, info.clone(), fingerprint, info.positions.len() + 64);
        Ok(info)
    }

    /// The bytecodes of `array` (for baseline frames), read once and cached with its positions.
    fn bytecodes_of<M: HeapMemory + ?Sized>(&mut self, heap: &Heap<'_, M>, array: u64) -> Result<Option<Vec<u8>>, Miss> {
        let info = self.bytecode_info(heap, array)?;
        if let Some(b) = &info.bytecodes {
            return Ok(Some(b.clone()));
        }
        let l = &self.layout;
        let length = heap.smi_field(array, l.bytecode_length)?;
        if length < 0 || length as u64 > MAX_BYTECODE_LENGTH {
            return Err(Miss::BadLength);
        }
        let bytecodes = heap.mem.bytes_at(untag(array)? + l.bytecode_data, length as usize)?;
        let fingerprint = self.bytecode_fingerprint(heap, array)?;
        let bytes = info.positions.len() + bytecodes.len() + 64;
        let with = Arc::new(BytecodeInfo { positions: info.positions.clone(), bytecodes: Some(bytecodes.clone()) });
        self.bytecodes.insert(array, with, fingerprint, bytes);
        Ok(Some(bytecodes))
    }
}

impl Drop for Namer {
    fn drop(&mut self) {
        LIVE_NAMERS.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_share_one_budget_and_keep_a_floor() {
        const ONE: usize = MAX_FUNCTION_BYTES + MAX_SCRIPT_BYTES + MAX_CODE_BYTES + MAX_BYTECODE_BYTES;
        let held = |n: usize| {
            let (num, den) = share(n);
            n * (ONE * num / den)
        };
        for n in 1..=(SHARED_BYTES * MIN_SHARE / ONE) {
            assert!(held(n) <= SHARED_BYTES, "{n} processes hold {} bytes", held(n));
        }
        assert_eq!(share(1000), (1, MIN_SHARE), "past the floor each keeps 1/{MIN_SHARE} of its bounds");
        assert_eq!(share(0), share(1));
    }
    use crate::image::example;
    use crate::version::V8Version;

    #[test]
    fn every_tier_of_the_example_is_named_on_every_layout() {
        for s in crate::supported::SUPPORTED {
            let (major, minor) = (s.layout.version.major, s.layout.version.minor);
            let e = example(s.layout.clone());
            let mut namer = Namer::new(e.builder.layout.clone(), Some(e.bytecode_sizes.clone()));
            for round in 0..2 {
                for (input, expected) in &e.frames {
                    let named = namer.name(&e.builder.image, input).unwrap_or_else(|m| panic!("V8 {major}.{minor} {input:?}: {m}"));
                    let got: Vec<(&str, u32)> = named.frames.iter().map(|f| (f.function.as_str(), f.line.unwrap_or(0))).collect();
                    assert_eq!(&got, expected, "V8 {major}.{minor} round {round}: {input:?}");
                    assert!(named.frames.iter().all(|f| f.script.as_deref() == Some("/app/example.js")));
                }
            }
            assert!(namer.functions.hits > 0 && namer.codes.hits > 0, "the second round comes from the caches");
            assert_eq!(namer.stale(), 0);
        }
    }

    #[test]
    fn a_moved_object_is_read_again_not_trusted() {
        let mut e = example(Layout::defaults(V8Version::new(13, 6, 0, 0)).unwrap());
        let mut namer = Namer::new(e.builder.layout.clone(), Some(e.bytecode_sizes.clone()));
        let (input, _) = e.frames[0].clone();
        assert_eq!(namer.name(&e.builder.image, &input).unwrap().frames[0].function, "outer");
        // The GC moved outer's SharedFunctionInfo away and put inner's name in its place.
        let renamed = e.builder.string("renamed");
        let si = e.builder.scope_info(renamed, None, 10, 20);
        let l = e.builder.layout.clone();
        e.builder.set(input.shared, l.sfi_name_or_scope_info, si);
        // Between two batches: within one, an object checked is trusted.
        namer.next_batch();
        assert_eq!(namer.name(&e.builder.image, &input).unwrap().frames[0].function, "renamed");
        assert_eq!(namer.stale(), 1);
    }
}
