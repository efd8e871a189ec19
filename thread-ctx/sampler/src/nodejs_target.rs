//! A `nodejs_v1_dev` process's part of its `targets` map entry (`struct
//! nodejs_layout` of bpf/sampler_abi.h): the schema and the walk's offsets.

use super::skel::types;
use thread_ctx_discovery::nodejs::NodejsLayout;

/// `enum target_schema`: SCHEMA_NODEJS.
const SCHEMA_NODEJS: u32 = 1;
/// `NODEJS_RECORD_IN_FIELD`: the store's embedder field points at the record itself.
const RECORD_IN_FIELD: u64 = u64::MAX;

pub(super) fn encode(t: &mut types::target, l: &NodejsLayout) {
    t.schema = SCHEMA_NODEJS;
    t.nodejs.wrapped_object_offset = l.wrapped_object_offset;
    t.nodejs.native_wrap_fields_offset = l.native_wrap_fields_offset.unwrap_or(RECORD_IN_FIELD);
    t.nodejs.js_map_table_offset = l.js_map_table_offset;
    t.nodejs.ordered_hash_map_header_size = l.ordered_hash_map_header_size;
}
