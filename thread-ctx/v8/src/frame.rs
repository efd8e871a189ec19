//! What the sampler captures of a JS frame, and the names it gets.
//!
//! Every JS frame has a frame pointer; below it V8 keeps the frame's context
//! and JSFunction, and in interpreted and baseline frames its BytecodeArray
//! and (interpreted only) the current bytecode offset as a Smi. The sampler
//! reads those slots and, through the JSFunction, its SharedFunctionInfo (at
//! sample time: young JSFunctions move at every scavenge, SharedFunctionInfos
//! live in old space); the pc it already has.

use crate::code::Tier;

/// Where a frame's pc is, as the caller's view of the process's mappings says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcRegion {
    /// Anonymous executable memory: V8's generated code. `floor` is the mapping's start.
    Jit { floor: u64 },
    /// One of the interpreter's bytecode handlers (embedded builtins).
    BytecodeHandler,
    /// Any other embedded builtin (the interpreter's entry trampoline among them).
    Builtin,
    /// Anything else: native code of node or a library.
    Native,
}

/// The registers of the sampled thread that matter for its innermost JS frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeafRegisters {
    /// The interpreter's bytecode array register: in a bytecode handler it
    /// holds the frame's BytecodeArray, and then…
    pub bytecode_array: u64,
    /// …the bytecode offset register holds the current offset; the frame's
    /// slot holds the offset of the last call, stale in a loop without calls.
    pub bytecode_offset: u64,
    /// Words at the stack pointer that point into generated code, with their
    /// mapping's start: when the sample landed in a builtin that built no frame,
    /// one of them is the frame's return address into its own code.
    pub return_candidates: Vec<(u64, u64)>,
}

/// One JS frame as captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameInput {
    /// The sampled instruction (innermost frame) or the return address into the frame.
    pub pc: u64,
    pub region: PcRegion,
    /// The innermost frame of the sample.
    pub leaf: bool,
    /// The frame's SharedFunctionInfo (tagged), read through its JSFunction.
    pub shared: u64,
    /// The frame's bytecode array slot (`fp + off_fp_bytecode_array`).
    pub bytecode_array: u64,
    /// The frame's bytecode offset slot (`fp + off_fp_bytecode_offset`).
    pub bytecode_offset: u64,
    /// Innermost frame only.
    pub registers: Option<LeafRegisters>,
}

/// A function as it shows in a profile.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JsFrame {
    /// The function's name; `(anonymous)` when V8 has none, `eval` for the top
    /// level of eval'd code, `anonymous` for a `new Function` body (V8's own name).
    pub function: String,
    /// The script's name (file path, or `file://` URL for an ES module); for
    /// eval'd code `eval at CALLER (FILE:LINE)` as V8's stack traces write it.
    pub script: Option<String>,
    /// Where the function starts (1-based).
    pub function_line: Option<u32>,
    pub function_column: Option<u32>,
    /// The sampled position (1-based), when the tier's tables gave one.
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// None for a builtin with JS linkage (no script, no tier of its own).
    pub tier: Option<Tier>,
    /// Inlined by the optimizing compiler into the frame that follows it.
    pub inlined: bool,
}

/// A named frame: innermost function first (inlined functions, then the frame's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedFrame {
    pub frames: Vec<JsFrame>,
    /// The pc the frame was named at: `FrameInput::pc`, or the return address
    /// found at the stack pointer when the sample landed in a frameless builtin
    /// (the caller then shows that builtin as a frame of its own, above these).
    pub pc: u64,
}
