//! Every V8 this project reads, one entry each: [`SUPPORTED`], the one list the
//! layout check, the error messages, the tests and the fuzz targets iterate.
//!
//! Each V8's layout is a table of its own, written as the differences from the
//! V8 before it (the first, V8 10.2, is the base): what moved between two
//! releases is what each table says. The values come from V8's sources as each
//! Node ships them and from the official binaries; every one that a binary
//! publishes as a `v8dbg_*` symbol is checked against it at load
//! ([`Layout::checked`](crate::layout::Layout::checked)).
//!
//! Adding a Node (its V8): one entry here, the differences from the entry
//! before, and its row in the tests that run one process per version (see
//! CONTRIBUTING.md, "A new Node version").

use crate::error::LayoutError;
use crate::layout::{
    CodeLayout, DeoptLayout, FrameTypes, Instructions, InterpreterDataLayout, IsolateLayout, Layout, NodejsFacts, ScopeInfoLayout, StringLayout,
    Types,
};
use crate::symbols::PostmortemSymbols;
use crate::version::V8Version;

/// One supported V8 and the Node major that ships it.
#[derive(Debug, Clone)]
pub struct SupportedV8 {
    pub node: u32,
    /// The official build has the Maglev tier (`v8_enable_maglev`; off in Node 18, 20 and 22).
    pub maglev: bool,
    /// `layout.version` is major.minor.0.0: a binary's own build and patch numbers replace them.
    pub layout: Layout,
}

/// Every supported V8, oldest first.
pub const SUPPORTED: &[SupportedV8] = &[
    SupportedV8 { node: 18, maglev: false, layout: V8_10_2 },
    SupportedV8 { node: 20, maglev: false, layout: V8_11_3 },
    SupportedV8 { node: 22, maglev: false, layout: V8_12_4 },
    SupportedV8 { node: 24, maglev: true, layout: V8_13_6 },
    SupportedV8 { node: 26, maglev: true, layout: V8_14_6 },
];

/// The entry of `version` (by major.minor).
pub fn find(version: V8Version) -> Option<&'static SupportedV8> {
    SUPPORTED.iter().find(|s| (s.layout.version.major, s.layout.version.minor) == (version.major, version.minor))
}

/// The entry of Node `major`.
pub fn for_node(major: u32) -> Option<&'static SupportedV8> {
    SUPPORTED.iter().find(|s| s.node == major)
}

/// The Node majors, oldest first.
pub fn node_majors() -> Vec<u32> {
    SUPPORTED.iter().map(|s| s.node).collect()
}

/// The list as messages say it: `V8 10.2 (Node 18), 11.3 (Node 20), ...`.
pub fn describe() -> String {
    let each: Vec<String> = SUPPORTED.iter().map(|s| format!("{}.{} (Node {})", s.layout.version.major, s.layout.version.minor, s.node)).collect();
    format!("V8 {}", each.join(", "))
}

impl Layout {
    /// This reader's layout for `version` (by major.minor, from [`SUPPORTED`]), unchecked.
    pub fn defaults(version: V8Version) -> Option<Layout> {
        find(version).map(|s| Layout { version, ..s.layout.clone() })
    }

    /// The defaults for the binary's V8, checked against every `v8dbg_*` symbol it publishes.
    pub fn checked(symbols: &PostmortemSymbols) -> Result<Layout, LayoutError> {
        let path = symbols.path.clone();
        if symbols.values.is_empty() {
            return Err(LayoutError::NoSymbols { path });
        }
        let Some(version) = symbols.version else { return Err(LayoutError::NoVersion { path }) };
        let Some(layout) = Layout::defaults(version) else { return Err(LayoutError::UnknownVersion { path, version, known: describe() }) };
        for check in layout.checks() {
            match check.aliases.iter().find_map(|name| symbols.values.get(*name).map(|v| (*name, *v))) {
                Some((symbol, published)) if published != check.expected => {
                    return Err(LayoutError::Mismatch { path, version, symbol: symbol.to_string(), published, expected: check.expected });
                }
                Some(_) => {}
                None if check.required => {
                    return Err(LayoutError::Missing { path, version, symbol: check.aliases[0].to_string() });
                }
                None => {}
            }
        }
        Ok(layout)
    }
}

/// The base: V8 10.2, Node 18.
const V8_10_2: Layout = Layout {
    version: V8Version::new(10, 2, 0, 0),
    fp_context: -8,
    fp_function: -16,
    fp_bytecode_array: -32,
    fp_bytecode_offset: -40,
    reg_bytecode_array: 12,
    reg_bytecode_offset: 9,
    map_instance_type: 12,
    types: Types {
        first_nonstring: 128,
        shared_function_info: 257,
        script: 170,
        scope_info: 256,
        bytecode_array: 195,
        code: 240,
        instruction_stream: None,
        position_table: 194,
        deoptimization_data: 179,
        deoptimization_literals: 237,
        inlining_positions: 194,
        shared_function_info_wrapper: None,
    },
    string: StringLayout {
        representation_mask: 7,
        seq_tag: 0,
        cons_tag: 1,
        external_tag: 2,
        sliced_tag: 3,
        thin_tag: 5,
        encoding_mask: 8,
        one_byte_tag: 8,
        uncached_external_mask: 0x10,
        length: 12,
        seq_chars: 16,
        cons_first: 16,
        cons_second: 24,
        sliced_parent: 16,
        sliced_offset: 24,
        thin_actual: 16,
        external_data: 24,
    },
    fixed_array_length: 8,
    fixed_array_data: 16,
    js_function_shared: 24,
    sfi_function_data: 8,
    interpreter_data: Some(InterpreterDataLayout { type_id: 162, bytecode_array: 8 }),
    sfi_name_or_scope_info: 16,
    sfi_script: 32,
    // Smi flags, positions after the inferred name.
    scope_info: ScopeInfoLayout {
        flags_are_smi: true,
        context_local_count_index: 2,
        first_vars_index: 3,
        fixed_positions: None,
        max_inlined_local_names: 75,
        scope_type_mask: 0xf,
        has_saved_class_variable_bit: 10,
        function_variable_shift: 12,
        has_inferred_name_bit: 14,
        // EVAL_SCOPE, FUNCTION_SCOPE, MODULE_SCOPE, SCRIPT_SCOPE
        position_scope_types: &[1, 2, 3, 4],
        scope_type_base: 0,
    },
    script_source: 8,
    script_name: 16,
    script_line_ends: 56,
    script_eval_from_shared: 72,
    script_eval_from_position: 80,
    bytecode_length: 8,
    bytecode_position_table: 32,
    bytecode_data: 56,
    position_code_shift: 0,
    code: CodeLayout {
        flags: 48,
        kind_mask: 0xf,
        kind_shift: 0,
        kind_baseline: 11,
        kind_maglev: 12,
        kind_turbofan: 13,
        instruction_size: 40,
        instructions: Instructions::Inline { header: 128 },
        position_table: 24,
        deoptimization_data: 16,
    },
    deopt: DeoptLayout {
        inlined_function_count: 1,
        literal_array: 2,
        shared_function_info: 6,
        shared_function_info_wrapped: None,
        inlining_positions: 7,
        inlining_position_size: 16,
    },
    array_types: &[
        (194, "v8dbg_type_ByteArray__BYTE_ARRAY_TYPE"),
        (179, "v8dbg_type_FixedArray__FIXED_ARRAY_TYPE"),
        (237, "v8dbg_type_WeakFixedArray__WEAK_FIXED_ARRAY_TYPE"),
    ],
    frame_types: FrameTypes { entry: 1, exit: 3, builtin_exit: 22, api_callback_exit: None, api_accessor_exit: None },
    isolate: None,
    nodejs: None,
};

/// V8 11.3, Node 20: Code's instructions in an InstructionStream; the isolate in a C++ thread-local.
const V8_11_3: Layout = Layout {
    version: V8Version::new(11, 3, 0, 0),
    bytecode_data: 54,
    types: Types {
        shared_function_info: 262,
        script: 167,
        scope_info: 261,
        bytecode_array: 191,
        code: 245,
        instruction_stream: Some(252),
        position_table: 190,
        deoptimization_data: 175,
        deoptimization_literals: 240,
        inlining_positions: 190,
        ..V8_10_2.types
    },
    code: CodeLayout { instruction_size: 56, instructions: Instructions::Stream { start_field: 40, header: 16, code_field: 8 }, ..V8_10_2.code },
    array_types: &[
        (190, "v8dbg_type_ByteArray__BYTE_ARRAY_TYPE"),
        (175, "v8dbg_type_FixedArray__FIXED_ARRAY_TYPE"),
        (240, "v8dbg_type_WeakFixedArray__WEAK_FIXED_ARRAY_TYPE"),
    ],
    frame_types: FrameTypes { builtin_exit: 25, ..V8_10_2.frame_types },
    interpreter_data: Some(InterpreterDataLayout { type_id: 159, ..V8_10_2.interpreter_data.unwrap() }),
    isolate: Some(IsolateLayout { c_entry_fp: 0x180 }),
    ..V8_10_2
};

/// V8 12.4, Node 22: trusted arrays, a 32-byte InstructionStream header, AsyncContextFrame.
const V8_12_4: Layout = Layout {
    version: V8Version::new(12, 4, 0, 0),
    js_function_shared: 32,
    bytecode_position_table: 24,
    bytecode_data: 64,
    types: Types {
        shared_function_info: 274,
        scope_info: 272,
        bytecode_array: 205,
        code: 206,
        instruction_stream: Some(210),
        position_table: 212,
        deoptimization_data: 213,
        deoptimization_literals: 247,
        inlining_positions: 186,
        ..V8_11_3.types
    },
    code: CodeLayout {
        kind_baseline: 10,
        kind_maglev: 11,
        kind_turbofan: 12,
        instruction_size: 52,
        instructions: Instructions::Stream { start_field: 40, header: 32, code_field: 8 },
        position_table: 16,
        deoptimization_data: 8,
        ..V8_11_3.code
    },
    array_types: &[
        (186, "v8dbg_type_ByteArray__BYTE_ARRAY_TYPE"),
        (212, "v8dbg_type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE"),
        (213, "v8dbg_type_TrustedFixedArray__TRUSTED_FIXED_ARRAY_TYPE"),
        (247, "v8dbg_type_WeakFixedArray__WEAK_FIXED_ARRAY_TYPE"),
    ],
    frame_types: FrameTypes { builtin_exit: 26, api_callback_exit: Some(27), ..V8_11_3.frame_types },
    interpreter_data: Some(InterpreterDataLayout { type_id: 207, ..V8_11_3.interpreter_data.unwrap() }),
    isolate: Some(IsolateLayout { c_entry_fp: 0x110 }),
    nodejs: Some(NodejsFacts { wrapped_object_offset: 24, js_map_table_offset: 24, ordered_hash_map_header_size: 16 }),
    ..V8_11_3
};

/// V8 13.6, Node 24: fixed ScopeInfo position slots, wrapped SharedFunctionInfos in
/// deoptimization data, two more scope types, one more slot before API objects' fields.
const V8_13_6: Layout = Layout {
    version: V8Version::new(13, 6, 0, 0),
    sfi_name_or_scope_info: 24,
    sfi_script: 40,
    scope_info: ScopeInfoLayout {
        flags_are_smi: false,
        first_vars_index: 5,
        fixed_positions: Some((3, 4)),
        position_scope_types: &[],
        scope_type_base: 2,
        ..V8_12_4.scope_info
    },
    types: Types {
        shared_function_info: 282,
        scope_info: 280,
        bytecode_array: 186,
        code: 187,
        instruction_stream: Some(192),
        position_table: 196,
        deoptimization_data: 193,
        deoptimization_literals: 199,
        inlining_positions: 196,
        shared_function_info_wrapper: Some(195),
        ..V8_12_4.types
    },
    code: CodeLayout { flags: 52, instruction_size: 56, ..V8_12_4.code },
    deopt: DeoptLayout { literal_array: 3, shared_function_info: 7, shared_function_info_wrapped: Some(8), inlining_positions: 8, ..V8_12_4.deopt },
    array_types: &[
        (196, "v8dbg_type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE"),
        (193, "v8dbg_type_ProtectedFixedArray__PROTECTED_FIXED_ARRAY_TYPE"),
        (199, "v8dbg_type_TrustedWeakFixedArray__TRUSTED_WEAK_FIXED_ARRAY_TYPE"),
    ],
    frame_types: FrameTypes { builtin_exit: 27, api_callback_exit: Some(28), api_accessor_exit: Some(29), ..V8_12_4.frame_types },
    interpreter_data: Some(InterpreterDataLayout { type_id: 188, ..V8_12_4.interpreter_data.unwrap() }),
    isolate: Some(IsolateLayout { c_entry_fp: 0x140 }),
    nodejs: Some(NodejsFacts { wrapped_object_offset: 32, ..V8_12_4.nodejs.unwrap() }),
    ..V8_12_4
};

/// V8 14.6, Node 26: other type ids and code kinds, one more bit below each code offset delta.
const V8_14_6: Layout = Layout {
    version: V8Version::new(14, 6, 0, 0),
    position_code_shift: 1,
    types: Types { shared_function_info: 288, script: 166, scope_info: 286, bytecode_array: 185, code: 186, ..V8_13_6.types },
    code: CodeLayout { kind_baseline: 11, kind_maglev: 12, kind_turbofan: 13, ..V8_13_6.code },
    frame_types: FrameTypes { builtin_exit: 17, api_callback_exit: Some(18), api_accessor_exit: None, ..V8_13_6.frame_types },
    interpreter_data: Some(InterpreterDataLayout { type_id: 187, ..V8_13_6.interpreter_data.unwrap() }),
    isolate: Some(IsolateLayout { c_entry_fp: 0x148 }),
    ..V8_13_6
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_ordered_and_each_version_once() {
        let versions: Vec<(u32, u32)> = SUPPORTED.iter().map(|s| (s.layout.version.major, s.layout.version.minor)).collect();
        assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
        assert!(SUPPORTED.windows(2).all(|w| w[0].node < w[1].node));
        for s in SUPPORTED {
            assert_eq!(find(s.layout.version).unwrap().node, s.node);
            assert_eq!(for_node(s.node).unwrap().layout.version, s.layout.version);
        }
        assert!(find(V8Version::new(14, 1, 0, 0)).is_none(), "Node 25's V8 is not in the list");
        assert_eq!(describe(), "V8 10.2 (Node 18), 11.3 (Node 20), 12.4 (Node 22), 13.6 (Node 24), 14.6 (Node 26)");
    }

    #[test]
    fn every_supported_v8_has_a_layout_and_no_other() {
        for s in SUPPORTED {
            let l = Layout::defaults(s.layout.version).unwrap();
            assert!(l.checks().iter().all(|c| !c.aliases.is_empty() && c.aliases[0] != "v8dbg_type_unknown_array"), "{}", s.layout.version);
        }
        for (major, minor) in [(9, 4), (12, 9), (14, 1), (15, 0)] {
            assert!(Layout::defaults(V8Version::new(major, minor, 0, 0)).is_none());
        }
    }

    #[test]
    fn exit_frames_are_told_from_entry_frames() {
        for s in SUPPORTED {
            let f = s.layout.frame_types;
            assert_eq!(f.exit_mask() & (1 << f.entry), 0, "{}", s.layout.version);
            assert_ne!(f.exit_mask() & (1 << f.builtin_exit), 0);
        }
    }
}
