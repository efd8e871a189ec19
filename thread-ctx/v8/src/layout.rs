//! The V8 layout of one node binary: where the frame keeps its function and
//! bytecode position, the type ids of the objects the readers follow, and the
//! offsets of their fields.
//!
//! Each supported V8 has its layout written out in the `supported` module, because
//! the binary's `v8dbg_*` postmortem symbols do not publish every field the
//! readers need (Node 24 publishes no JSFunction code field, Node 20 no Code
//! flags, none the ScopeInfo flag bits). A binary's layout is its version's,
//! *checked* against every symbol it does publish (`Layout::checked`): one
//! disagreement and the binary is refused, never guessed at, and its processes'
//! JS frames fall back to the perf map and jitdump. The symbols a layout is
//! checked against, with their values in the official binaries, are in
//! `tests/official_binaries.rs`.

use crate::version::V8Version;

/// Type ids (`Map::instance_type`) of the objects the readers follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Types {
    /// Instance types below this are strings.
    pub first_nonstring: u16,
    pub shared_function_info: u16,
    pub script: u16,
    pub scope_info: u16,
    pub bytecode_array: u16,
    pub code: u16,
    /// The object holding a Code's instructions (V8 11+); None: instructions inside the Code itself.
    pub instruction_stream: Option<u16>,
    /// Source position tables (bytecode and code).
    pub position_table: u16,
    pub deoptimization_data: u16,
    pub deoptimization_literals: u16,
    pub inlining_positions: u16,
    /// The wrapper a Code's deoptimization data holds its function through (V8 13+).
    pub shared_function_info_wrapper: Option<u16>,
}

/// String instance-type bits and fields (`v8-internal.h`, `string.tq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StringLayout {
    pub representation_mask: u16,
    pub seq_tag: u16,
    pub cons_tag: u16,
    pub external_tag: u16,
    pub sliced_tag: u16,
    pub thin_tag: u16,
    pub encoding_mask: u16,
    pub one_byte_tag: u16,
    /// Set in an external string whose data pointer is not cached in the object.
    pub uncached_external_mask: u16,
    pub length: u64,
    pub seq_chars: u64,
    pub cons_first: u64,
    pub cons_second: u64,
    pub sliced_parent: u64,
    pub sliced_offset: u64,
    pub thin_actual: u64,
    /// An external string's cached pointer to its characters.
    pub external_data: u64,
}

/// `ScopeInfo`, where a compiled function keeps its name, inferred name and position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScopeInfoLayout {
    /// Flags are a Smi (V8 ≤ 12) or a raw 32-bit field (V8 13+).
    pub flags_are_smi: bool,
    /// Slot indexes after the map (`v8dbg_scopeinfo_idx_*`).
    pub context_local_count_index: u64,
    pub first_vars_index: u64,
    /// (start, end) slot indexes when positions are fixed slots (V8 12.8+).
    pub fixed_positions: Option<(u64, u64)>,
    /// Context locals from this many on are named in a hash table (one slot), not inline.
    pub max_inlined_local_names: u64,
    pub scope_type_mask: u32,
    pub has_saved_class_variable_bit: u32,
    /// Two bits: NONE (0) means no function-name slot pair.
    pub function_variable_shift: u32,
    pub has_inferred_name_bit: u32,
    /// Scope types whose ScopeInfo carries (start, end) after the inferred name (when not fixed).
    pub position_scope_types: &'static [u32],
    /// The number of the first of EVAL, FUNCTION, MODULE and SCRIPT scopes, less one (V8 13 put
    /// two more scope types first: REPL mode and shadow realm).
    pub scope_type_base: u32,
}

/// `InterpreterData`: a function's BytecodeArray beside its copy of the interpreter's entry
/// trampoline, where the function's data or its baseline code would hold the BytecodeArray.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterpreterDataLayout {
    pub type_id: u16,
    pub bytecode_array: u64,
}

/// `Code`: the generated code of a function (baseline, Maglev, TurboFan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeLayout {
    pub flags: u64,
    pub kind_mask: u32,
    pub kind_shift: u32,
    pub kind_baseline: u32,
    pub kind_maglev: u32,
    pub kind_turbofan: u32,
    pub instruction_size: u64,
    pub instructions: Instructions,
    /// Source positions (optimized code) or the pc → bytecode table (baseline code).
    pub position_table: u64,
    /// Deoptimization data (optimized code) or the BytecodeArray (baseline code).
    pub deoptimization_data: u64,
}

/// Where a Code's instructions are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instructions {
    /// Right after the Code's own header of this many bytes (V8 10).
    Inline { header: u64 },
    /// In an InstructionStream whose header is `header` bytes (its map, then a
    /// pointer back to the Code at `code_field`); the Code holds their address at `start_field`.
    Stream { start_field: u64, header: u64, code_field: u64 },
}

/// Indexes of a Code's deoptimization data (a fixed array).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeoptLayout {
    pub inlined_function_count: u64,
    pub literal_array: u64,
    pub shared_function_info: u64,
    /// The SharedFunctionInfo is behind a wrapper, at this offset in it (V8 13+).
    pub shared_function_info_wrapped: Option<u64>,
    pub inlining_positions: u64,
    /// `InliningPosition`: a 64-bit SourcePosition, an int32 function index, padding.
    pub inlining_position_size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub version: V8Version,
    /// Byte offsets from the frame pointer of a JS frame's slots.
    pub fp_context: i64,
    pub fp_function: i64,
    pub fp_bytecode_array: i64,
    pub fp_bytecode_offset: i64,
    /// Register codes (x86-64 numbering) the interpreter keeps the bytecode array and offset in.
    pub reg_bytecode_array: u8,
    pub reg_bytecode_offset: u8,
    pub map_instance_type: u64,
    pub types: Types,
    pub string: StringLayout,
    pub fixed_array_length: u64,
    pub fixed_array_data: u64,
    pub js_function_shared: u64,
    /// The function's data: its BytecodeArray, or its baseline Code (which holds the BytecodeArray).
    pub sfi_function_data: u64,
    /// Where a function's BytecodeArray is wrapped instead, under
    /// `--interpreted-frames-native-stack` (with a code event listener, such as the perf map's,
    /// on V8 12+): with the function's own copy of the interpreter's entry trampoline.
    pub interpreter_data: Option<InterpreterDataLayout>,
    pub sfi_name_or_scope_info: u64,
    pub sfi_script: u64,
    pub scope_info: ScopeInfoLayout,
    pub script_source: u64,
    pub script_name: u64,
    pub script_line_ends: u64,
    pub script_eval_from_shared: u64,
    pub script_eval_from_position: u64,
    pub bytecode_length: u64,
    pub bytecode_position_table: u64,
    pub bytecode_data: u64,
    /// Source position tables of V8 14 carry one more bit below each code offset delta.
    pub position_code_shift: u32,
    pub code: CodeLayout,
    pub deopt: DeoptLayout,
    /// The `v8dbg_type_*` symbol naming each array type id above (their names change between
    /// versions: a ByteArray became a TrustedByteArray).
    pub array_types: &'static [(u16, &'static str)],
    pub frame_types: FrameTypes,
    /// Where a thread's isolate keeps its last exit from JS; None: not read on this V8.
    pub isolate: Option<IsolateLayout>,
    /// What the `nodejs_v1_dev` walk needs; None: this V8's Node has no AsyncContextFrame.
    pub nodejs: Option<NodejsFacts>,
}

/// Stack frame types (`StackFrame::Type`, published as `v8dbg_frametype_*`). A typed frame
/// holds its type as a marker (the type shifted left by one: a Smi-like word) below its frame
/// pointer, where a JS frame holds its context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTypes {
    pub entry: u32,
    /// The frame of a call from JS into C++: a runtime function, a C++ builtin
    /// (`BuiltinExitFrame`), an API callback (`ApiCallbackExitFrame`, V8 12+) or accessor.
    pub exit: u32,
    pub builtin_exit: u32,
    pub api_callback_exit: Option<u32>,
    pub api_accessor_exit: Option<u32>,
}

impl FrameTypes {
    /// Every exit frame type, as a bit set (bit n: type n).
    pub fn exit_mask(&self) -> u64 {
        [Some(self.exit), Some(self.builtin_exit), self.api_callback_exit, self.api_accessor_exit]
            .into_iter()
            .flatten()
            .filter(|&t| t < 64)
            .fold(0, |m, t| m | 1 << t)
    }
}

/// The isolate of a thread, and its last exit from JS. A thread that runs JS keeps its
/// `Isolate*` in V8's thread-local `g_current_isolate_`; the isolate's thread-local top keeps
/// `c_entry_fp_`, the frame pointer of the innermost exit frame while the thread runs C++
/// called from JS, and 0 while it runs JS (the entry into JS clears it). V8's own sampler
/// starts its walk of a thread outside JS there. No `v8dbg_*` symbol publishes the offset:
/// measured per version (the exit frame's marker below it, for Atomics.wait, an fs binding, a
/// child process and an addon), and checked at every use by that marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsolateLayout {
    /// Byte offset of `ThreadLocalTop::c_entry_fp_` from the `Isolate*`.
    pub c_entry_fp: u64,
}

/// The V8 objects the `nodejs_v1_dev` reader walks (discovery's `nodejs` module) and the
/// writer (`v8-addon/layout.h`) publishes: byte offsets in a 64-bit V8 without pointer
/// compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodejsFacts {
    /// Where an API object's embedder field 0 is: after the JSObject header (map, properties,
    /// elements), and from V8 13 one more slot (the C++-heap wrappable pointer).
    pub wrapped_object_offset: u64,
    /// `JSCollection::kTableOffset`: right after the JSObject header.
    pub js_map_table_offset: u64,
    /// An OrderedHashMap's FixedArray header (map, length) before its three Smi counts.
    pub ordered_hash_map_header_size: u64,
}

impl Layout {
    /// Every symbol a binary of this V8 may publish about a field the readers
    /// use, with the value this layout holds. `required`: every official build
    /// of this V8 carries it (its absence means another kind of build).
    pub fn checks(&self) -> Vec<Check> {
        let t = &self.types;
        let s = &self.string;
        let c = &self.code;
        let d = &self.deopt;
        let req = |aliases: &'static [&'static str], expected: i64| Check { aliases, expected, required: true };
        let opt = |aliases: &'static [&'static str], expected: i64| Check { aliases, expected, required: false };
        let mut v = vec![
            req(&["v8dbg_HeapObjectTag"], 1),
            req(&["v8dbg_HeapObjectTagMask"], 3),
            req(&["v8dbg_SmiTag"], 0),
            req(&["v8dbg_SmiTagMask"], 1),
            req(&["v8dbg_SmiShiftSize"], 31),
            req(&["v8dbg_TaggedSize"], 8),
            req(&["v8dbg_SystemPointerSize"], 8),
            req(&["v8dbg_off_fp_context"], self.fp_context),
            req(&["v8dbg_off_fp_function"], self.fp_function),
            req(&["v8dbg_off_fp_bytecode_array"], self.fp_bytecode_array),
            req(&["v8dbg_off_fp_bytecode_offset"], self.fp_bytecode_offset),
            req(&["v8dbg_InterpreterBytecodeArrayRegister"], self.reg_bytecode_array as i64),
            req(&["v8dbg_InterpreterBytecodeOffsetRegister"], self.reg_bytecode_offset as i64),
            req(&["v8dbg_class_HeapObject__map__Map"], 0),
            req(&["v8dbg_class_Map__instance_type__uint16_t"], self.map_instance_type as i64),
            req(&["v8dbg_FirstNonstringType"], t.first_nonstring as i64),
            req(&["v8dbg_StringRepresentationMask"], s.representation_mask as i64),
            req(&["v8dbg_SeqStringTag"], s.seq_tag as i64),
            req(&["v8dbg_ConsStringTag"], s.cons_tag as i64),
            req(&["v8dbg_ExternalStringTag"], s.external_tag as i64),
            req(&["v8dbg_SlicedStringTag"], s.sliced_tag as i64),
            req(&["v8dbg_ThinStringTag"], s.thin_tag as i64),
            req(&["v8dbg_StringEncodingMask"], s.encoding_mask as i64),
            req(&["v8dbg_OneByteStringTag"], s.one_byte_tag as i64),
            req(&["v8dbg_TwoByteStringTag"], 0),
            req(&["v8dbg_class_String__length__int32_t"], s.length as i64),
            req(&["v8dbg_class_SeqOneByteString__chars__char"], s.seq_chars as i64),
            req(&["v8dbg_class_SeqTwoByteString__chars__char"], s.seq_chars as i64),
            req(&["v8dbg_class_ConsString__first__String"], s.cons_first as i64),
            req(&["v8dbg_class_ConsString__second__String"], s.cons_second as i64),
            req(&["v8dbg_class_SlicedString__parent__String"], s.sliced_parent as i64),
            req(&["v8dbg_class_SlicedString__offset__SMI"], s.sliced_offset as i64),
            req(&["v8dbg_class_ThinString__actual__String"], s.thin_actual as i64),
            req(&["v8dbg_class_ExternalString__resource__Object"], 16),
            req(&["v8dbg_class_FixedArrayBase__length__SMI"], self.fixed_array_length as i64),
            req(&["v8dbg_class_FixedArray__data__uintptr_t"], self.fixed_array_data as i64),
            req(&["v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE"], t.shared_function_info as i64),
            req(&["v8dbg_type_Script__SCRIPT_TYPE"], t.script as i64),
            req(&["v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE"], t.scope_info as i64),
            req(&["v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE"], t.bytecode_array as i64),
            req(&["v8dbg_type_Code__CODE_TYPE"], t.code as i64),
            req(&["v8dbg_class_JSFunction__shared__SharedFunctionInfo"], self.js_function_shared as i64),
            req(
                &[
                    "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object",
                    "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Tagged_Object_",
                    "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_",
                ],
                self.sfi_name_or_scope_info as i64,
            ),
            req(
                &["v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject", "v8dbg_class_SharedFunctionInfo__script__Tagged_HeapObject_"],
                self.sfi_script as i64,
            ),
            opt(&["v8dbg_class_SharedFunctionInfo__raw_script__Tagged_Object_"], self.sfi_script as i64),
            opt(&["v8dbg_class_SharedFunctionInfo__function_data__Object"], self.sfi_function_data as i64),
            req(&["v8dbg_scopeinfo_idx_ncontextlocals"], self.scope_info.context_local_count_index as i64),
            req(&["v8dbg_scopeinfo_idx_first_vars"], self.scope_info.first_vars_index as i64),
            req(&["v8dbg_class_Script__source__Object"], self.script_source as i64),
            req(&["v8dbg_class_Script__name__Object"], self.script_name as i64),
            req(&["v8dbg_class_Script__line_ends__Object"], self.script_line_ends as i64),
            req(
                &[
                    "v8dbg_class_Script__eval_from_shared_or_wrapped_arguments__Object",
                    "v8dbg_class_Script__eval_from_shared_or_wrapped_arguments__Tagged_Object_",
                    "v8dbg_class_Script__eval_from_shared_or_wrapped_arguments_or_sfi_table__Object",
                ],
                self.script_eval_from_shared as i64,
            ),
            req(&["v8dbg_class_Script__eval_from_position__SMI"], self.script_eval_from_position as i64),
            req(&["v8dbg_class_BytecodeArray__data__uintptr_t"], self.bytecode_data as i64),
            opt(&["v8dbg_class_BytecodeArray__length__SMI"], self.bytecode_length as i64),
            req(&["v8dbg_CodeKindFieldMask"], c.kind_mask as i64),
            req(&["v8dbg_CodeKindFieldShift"], c.kind_shift as i64),
            req(&["v8dbg_CodeKindBaseline"], c.kind_baseline as i64),
            req(&["v8dbg_CodeKindInterpretedFunction"], c.kind_baseline as i64 - 1),
            opt(&["v8dbg_class_Code__flags__uint32_t"], c.flags as i64),
            opt(&["v8dbg_class_Code__instruction_size__int"], c.instruction_size as i64),
            opt(&["v8dbg_class_Code__deoptimization_data__FixedArray"], c.deoptimization_data as i64),
            opt(&["v8dbg_class_Code__bytecode_or_interpreter_data__HeapObject"], c.deoptimization_data as i64),
            opt(&["v8dbg_class_Code__source_position_table__ByteArray"], c.position_table as i64),
            opt(&["v8dbg_class_Code__bytecode_offset_table__ByteArray"], c.position_table as i64),
            opt(&["v8dbg_DeoptimizationDataInlinedFunctionCountIndex"], d.inlined_function_count as i64),
            opt(&["v8dbg_DeoptimizationDataLiteralArrayIndex"], d.literal_array as i64),
            opt(&["v8dbg_DeoptimizationDataInliningPositionsIndex"], d.inlining_positions as i64),
        ];
        match c.instructions {
            Instructions::Inline { header } => {
                v.push(req(&["v8dbg_class_Code__instruction_start__uintptr_t"], header as i64));
            }
            Instructions::Stream { start_field, header, .. } => {
                v.push(opt(&["v8dbg_class_Code__instruction_start__Address"], start_field as i64));
                v.push(req(&["v8dbg_class_InstructionStream__instruction_start__uintptr_t"], header as i64));
                v.push(req(&["v8dbg_type_InstructionStream__INSTRUCTION_STREAM_TYPE"], t.instruction_stream.unwrap_or(0) as i64));
            }
        }
        if d.shared_function_info_wrapped.is_some() {
            v.push(req(&["v8dbg_DeoptimizationDataWrappedSharedFunctionInfoIndex"], d.shared_function_info as i64));
            v.push(req(
                &["v8dbg_type_SharedFunctionInfoWrapper__SHARED_FUNCTION_INFO_WRAPPER_TYPE"],
                t.shared_function_info_wrapper.unwrap_or(0) as i64,
            ));
            v.push(req(
                &["v8dbg_class_SharedFunctionInfoWrapper__shared_info__Tagged_SharedFunctionInfo_"],
                d.shared_function_info_wrapped.unwrap_or(0) as i64,
            ));
        } else {
            v.push(opt(&["v8dbg_DeoptimizationDataSharedFunctionInfoIndex"], d.shared_function_info as i64));
        }
        // The array types: each id must be the one V8 publishes for the kind of array this layout expects there.
        for id in [t.position_table, t.deoptimization_data, t.deoptimization_literals, t.inlining_positions] {
            v.push(Check { aliases: array_type_symbol(self, id), expected: id as i64, required: true });
        }
        if let Some(d) = self.interpreter_data {
            v.push(req(&["v8dbg_type_InterpreterData__INTERPRETER_DATA_TYPE"], d.type_id as i64));
        }
        let f = &self.frame_types;
        v.push(req(&["v8dbg_frametype_EntryFrame"], f.entry as i64));
        v.push(req(&["v8dbg_frametype_ExitFrame"], f.exit as i64));
        v.push(req(&["v8dbg_frametype_BuiltinExitFrame"], f.builtin_exit as i64));
        if let Some(t) = f.api_callback_exit {
            v.push(req(&["v8dbg_frametype_ApiCallbackExitFrame"], t as i64));
        }
        if let Some(t) = f.api_accessor_exit {
            v.push(opt(&["v8dbg_frametype_ApiAccessorExitFrame"], t as i64));
        }
        v
    }
}

/// The `v8dbg_type_*` symbol naming the array type `id` in this layout.
fn array_type_symbol(l: &Layout, id: u16) -> &'static [&'static str] {
    l.array_types.iter().find(|(k, _)| *k == id).map_or(&["v8dbg_type_unknown_array"], |(_, name)| std::slice::from_ref(name))
}

/// One symbol check: the first alias the binary publishes must hold `expected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    pub aliases: &'static [&'static str],
    pub expected: i64,
    pub required: bool,
}
