//! Where the `nodejs_v1_dev` walk's V8 layout facts come from, and the checks
//! that refuse a layout the reader cannot trust (one line saying why).
//!
//! A writer may publish the integers as process-context attributes
//! (`threadlocal.wrapped_object_offset`, ...); a writer that publishes none
//! (dd-trace 6.21 with @datadog/pprof 5.20 declares only the schema and the key
//! map) gets this schema's defaults for the V8 version the target actually runs
//! (read from its V8's own version symbols, see [`crate::v8_version`]).
//! Published integers are checked against the same table when the V8 version
//! is known: a writer built against other V8 headers than the node it runs in
//! would send the walk to the wrong field.
//!
//! The last step has three shapes in the wild. The latest text of RFC #1861
//! fixes this layout by schema and puts the one offset that moves between V8
//! versions, `record_slot_offset`, in each thread's TLS struct (this package's
//! writer): when that byte is set the walk uses it, and the field is the record
//! ([`super::walk`]). Before it, Datadog's shipped writer (@datadog/pprof 5.20,
//! the wrapper and record allocated together) stores the record's address
//! itself in the embedder field, and publishes no
//! `threadlocal.native_wrap_fields_offset`; a writer that keeps the record
//! behind its native wrapper publishes that offset (this package's earlier
//! writer), and the record pointer is read at `W + offset`. So: published → one
//! more indirection; absent → `W` is the record.

use crate::error::Error;
use crate::v8_version::{V8Version, V8VersionError};
use serde::Serialize;
use std::sync::Arc;

/// `threadlocal.schema_version` of this schema.
pub const SCHEMA_VERSION: &str = "nodejs_v1_dev";

pub const WRAPPED_OBJECT_OFFSET_KEY: &str = "threadlocal.wrapped_object_offset";
pub const TAGGED_SIZE_KEY: &str = "threadlocal.tagged_size";
pub const NATIVE_WRAP_FIELDS_OFFSET_KEY: &str = "threadlocal.native_wrap_fields_offset";
pub const JS_MAP_TABLE_OFFSET_KEY: &str = "threadlocal.js_map_table_offset";
pub const ORDERED_HASH_MAP_HEADER_SIZE_KEY: &str = "threadlocal.ordered_hash_map_header_size";

/// Node's standard builds: no pointer compression, so a tagged value is a full word.
pub const TAGGED_SIZE: u64 = 8;
/// Largest object offset accepted from a writer: V8's headers are a few words;
/// the bound keeps every derived address a short step from a checked pointer.
pub const MAX_OBJECT_OFFSET: u64 = 256;
/// Largest offset of the record pointer inside the writer's native wrapper.
pub const MAX_NATIVE_OFFSET: u64 = 4096;

/// The V8 layout the walk uses. Every offset is a multiple of the tagged size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodejsLayout {
    /// Byte offset, inside the stored JS object, of the embedder field holding the native wrapper pointer.
    pub wrapped_object_offset: u64,
    /// Byte offset of the record pointer inside the native wrapper `W` the embedder
    /// field points at, when the writer publishes one; None: `W` is the record.
    pub native_wrap_fields_offset: Option<u64>,
    /// Byte offset of the OrderedHashMap table inside the JSMap (the async-context frame).
    pub js_map_table_offset: u64,
    /// Bytes before the table's three Smi counts (the FixedArray header: map, length).
    pub ordered_hash_map_header_size: u64,
    pub tagged_size: u64,
    pub source: LayoutSource,
    /// The target's V8 version, when it could be read.
    #[serde(serialize_with = "crate::v8_version::serialize_version")]
    pub v8: Option<V8Version>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutSource {
    /// Every integer came from the process context.
    Published,
    /// Some or all came from this schema's defaults for the target's V8 version.
    SchemaDefaults,
}

impl std::fmt::Display for NodejsLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match self.source {
            LayoutSource::Published => "published by the writer",
            LayoutSource::SchemaDefaults => "nodejs_v1_dev defaults",
        };
        let v8 = self.v8.map_or("V8 version unknown".to_string(), |v| v.to_string());
        let record = match self.native_wrap_fields_offset {
            Some(o) => format!("record pointer at wrapper +{o}"),
            None => "the field points at the record".to_string(),
        };
        write!(
            f,
            "{source}, {v8}: wrapped object +{} ({record}; a thread's record_slot_offset, when its struct sets it, wins), JSMap table +{}, hash map header {}, tagged size {}",
            self.wrapped_object_offset, self.js_map_table_offset, self.ordered_hash_map_header_size, self.tagged_size
        )
    }
}

/// What V8 itself fixes for a version this reader knows: the walk's facts in the
/// version's entry of thread-ctx-v8's list of supported V8s (the one table of V8
/// layouts; the writer's `v8-addon/layout.h` is checked against it too).
fn v8_facts(v: V8Version) -> Option<(u64, u64, u64)> {
    let f = thread_ctx_v8::supported::find(v)?.layout.nodejs?;
    Some((f.wrapped_object_offset, f.js_map_table_offset, f.ordered_hash_map_header_size))
}

/// The versions with a `nodejs_v1_dev` layout, as messages say them.
fn known_versions() -> String {
    let each: Vec<String> = thread_ctx_v8::supported::SUPPORTED
        .iter()
        .filter(|s| s.layout.nodejs.is_some())
        .map(|s| format!("{}.{} (Node {})", s.layout.version.major, s.layout.version.minor, s.node))
        .collect();
    format!("V8 {}", each.join(", "))
}

/// Why a `nodejs_v1_dev` writer's struct is not walked: the one line a user sees.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LayoutError {
    #[error("no process context declares threadlocal.schema_version = \"{SCHEMA_VERSION}\"; not read")]
    NotDeclared,
    #[error("the process context is unreadable ({0}); not read")]
    ContextUnreadable(Arc<Error>),
    #[error("the process context declares schema {0:?}, not \"{SCHEMA_VERSION}\"; not read")]
    OtherSchema(Option<String>),
    #[error("{key} = {value} is not a non-negative integer")]
    NotAnInteger { key: &'static str, value: String },
    #[error(
        "{TAGGED_SIZE_KEY} = {0}: a pointer-compressed V8 (tagged size {0}), which the nodejs_v1_dev walk does not read (Node's standard builds use {TAGGED_SIZE})"
    )]
    PointerCompressed(u64),
    #[error("{key} = {published} is published, but {v8} puts it at {expected}: the writer was built for another V8; refusing to walk")]
    OtherV8 { key: &'static str, published: u64, v8: V8Version, expected: u64 },
    #[error("no known nodejs_v1_dev layout: {0} is not a version whose layout this reader knows ({known}), and the writer publishes no threadlocal.* layout integers; refusing to walk", known = known_versions())]
    UnknownV8(V8Version),
    #[error("no known nodejs_v1_dev layout: the target's V8 version could not be read ({0}), and the writer publishes no threadlocal.* layout integers; refusing to walk")]
    NoV8(V8VersionError),
    #[error("{key} = {value} is implausible (expected a multiple of {TAGGED_SIZE} in {min}..={max}); refusing to walk")]
    Implausible { key: &'static str, value: u64, min: u64, max: u64 },
}

/// The layout for a target whose process context declares `nodejs_v1_dev`,
/// from its attributes (`threadlocal.*` integers, when published) and its V8
/// version (Err: why it could not be read).
pub fn layout_for(
    attributes: &serde_json::Map<String, serde_json::Value>,
    v8: Result<V8Version, V8VersionError>,
) -> Result<NodejsLayout, LayoutError> {
    let published = |key: &'static str| -> Result<Option<u64>, LayoutError> {
        match attributes.get(key) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| LayoutError::NotAnInteger { key, value: v.to_string() }),
        }
    };
    let wrapped = published(WRAPPED_OBJECT_OFFSET_KEY)?;
    let tagged = published(TAGGED_SIZE_KEY)?;
    let native = published(NATIVE_WRAP_FIELDS_OFFSET_KEY)?;
    let table = published(JS_MAP_TABLE_OFFSET_KEY)?;
    let header = published(ORDERED_HASH_MAP_HEADER_SIZE_KEY)?;
    if let Some(t) = tagged.filter(|&t| t != TAGGED_SIZE) {
        return Err(LayoutError::PointerCompressed(t));
    }
    let all_published = wrapped.is_some() && table.is_some() && header.is_some();
    let version = v8.as_ref().ok().copied();
    let layout = match (version.and_then(v8_facts), all_published) {
        (Some((v_wrapped, v_table, v_header)), _) => {
            for (key, value, expected) in [
                (WRAPPED_OBJECT_OFFSET_KEY, wrapped, v_wrapped),
                (JS_MAP_TABLE_OFFSET_KEY, table, v_table),
                (ORDERED_HASH_MAP_HEADER_SIZE_KEY, header, v_header),
            ] {
                if let (Some(published), Some(v8)) = (value.filter(|&p| p != expected), version) {
                    return Err(LayoutError::OtherV8 { key, published, v8, expected });
                }
            }
            NodejsLayout {
                wrapped_object_offset: v_wrapped,
                native_wrap_fields_offset: native,
                js_map_table_offset: v_table,
                ordered_hash_map_header_size: v_header,
                tagged_size: TAGGED_SIZE,
                source: if all_published { LayoutSource::Published } else { LayoutSource::SchemaDefaults },
                v8: version,
            }
        }
        (None, true) => NodejsLayout {
            wrapped_object_offset: wrapped.unwrap(),
            native_wrap_fields_offset: native,
            js_map_table_offset: table.unwrap(),
            ordered_hash_map_header_size: header.unwrap(),
            tagged_size: TAGGED_SIZE,
            source: LayoutSource::Published,
            v8: version,
        },
        (None, false) => {
            return Err(match v8 {
                Ok(v) => LayoutError::UnknownV8(v),
                Err(e) => LayoutError::NoV8(e),
            });
        }
    };
    check_plausible(&layout)?;
    Ok(layout)
}

/// Bounds on what the walk adds to target pointers: small, word-aligned steps.
fn check_plausible(l: &NodejsLayout) -> Result<(), LayoutError> {
    let word = |key: &'static str, value: u64, min: u64, max: u64| {
        if !value.is_multiple_of(TAGGED_SIZE) || value < min || value > max {
            Err(LayoutError::Implausible { key, value, min, max })
        } else {
            Ok(())
        }
    };
    word(WRAPPED_OBJECT_OFFSET_KEY, l.wrapped_object_offset, 3 * TAGGED_SIZE, MAX_OBJECT_OFFSET)?;
    word(JS_MAP_TABLE_OFFSET_KEY, l.js_map_table_offset, 3 * TAGGED_SIZE, MAX_OBJECT_OFFSET)?;
    word(ORDERED_HASH_MAP_HEADER_SIZE_KEY, l.ordered_hash_map_header_size, 2 * TAGGED_SIZE, MAX_OBJECT_OFFSET)?;
    l.native_wrap_fields_offset.map_or(Ok(()), |o| word(NATIVE_WRAP_FIELDS_OFFSET_KEY, o, 0, MAX_NATIVE_OFFSET))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }
    const NODE24: V8Version = V8Version::new(13, 6, 0, 0);

    #[test]
    fn defaults_follow_the_v8_version() {
        let l = layout_for(&attrs(json!({})), Ok(NODE24)).unwrap();
        assert_eq!((l.wrapped_object_offset, l.js_map_table_offset, l.ordered_hash_map_header_size), (32, 24, 16));
        assert_eq!(l.source, LayoutSource::SchemaDefaults);
        let l = layout_for(&attrs(json!({})), Ok(V8Version::new(12, 4, 0, 0))).unwrap();
        assert_eq!(l.wrapped_object_offset, 24);
    }

    #[test]
    fn unknown_version_without_publication_is_one_line() {
        let e = layout_for(&attrs(json!({})), Ok(V8Version::new(15, 1, 0, 0))).unwrap_err().to_string();
        assert!(e.contains("V8 15.1") && e.contains("refusing") && !e.contains('\n'), "{e}");
        assert!(e.contains("V8 12.4 (Node 22), 13.6 (Node 24), 14.6 (Node 26)"), "the message names the list: {e}");
        let node25 = layout_for(&attrs(json!({})), Ok(V8Version::new(14, 1, 0, 0))).unwrap_err().to_string();
        assert!(node25.contains("V8 14.1") && node25.contains("refusing"), "a V8 outside the one list is refused: {node25}");
        let e = layout_for(&attrs(json!({})), Err(V8VersionError::NoSymbols)).unwrap_err().to_string();
        assert!(e.contains("could not be read"), "{e}");
    }

    #[test]
    fn published_layout_is_used_for_an_unknown_version_when_plausible() {
        let full = json!({
            WRAPPED_OBJECT_OFFSET_KEY: 40, TAGGED_SIZE_KEY: 8, NATIVE_WRAP_FIELDS_OFFSET_KEY: 8,
            JS_MAP_TABLE_OFFSET_KEY: 24, ORDERED_HASH_MAP_HEADER_SIZE_KEY: 16,
        });
        let l = layout_for(&attrs(full.clone()), Ok(V8Version::new(15, 0, 0, 0))).unwrap();
        assert_eq!((l.wrapped_object_offset, l.native_wrap_fields_offset, l.source), (40, Some(8), LayoutSource::Published));
        let mut odd = full.clone();
        odd[WRAPPED_OBJECT_OFFSET_KEY] = json!(1 << 20);
        assert!(layout_for(&attrs(odd), Err(V8VersionError::NoSymbols)).unwrap_err().to_string().contains("implausible"));
        let mut unaligned = full;
        unaligned[NATIVE_WRAP_FIELDS_OFFSET_KEY] = json!(3);
        assert!(layout_for(&attrs(unaligned), Err(V8VersionError::NoSymbols)).unwrap_err().to_string().contains("implausible"));
    }

    #[test]
    fn published_values_must_match_a_known_v8() {
        let e = layout_for(&attrs(json!({ WRAPPED_OBJECT_OFFSET_KEY: 24 })), Ok(NODE24)).unwrap_err().to_string();
        assert!(e.contains("V8 13.6.0.0 puts it at 32"), "{e}");
        let e = layout_for(&attrs(json!({ TAGGED_SIZE_KEY: 4 })), Ok(NODE24)).unwrap_err().to_string();
        assert!(e.contains("pointer-compressed"), "{e}");
        let e = layout_for(&attrs(json!({ JS_MAP_TABLE_OFFSET_KEY: "24" })), Ok(NODE24)).unwrap_err().to_string();
        assert!(e.contains("not a non-negative integer"), "{e}");
        let l = layout_for(&attrs(json!({ NATIVE_WRAP_FIELDS_OFFSET_KEY: 16 })), Ok(NODE24)).unwrap();
        assert_eq!(l.native_wrap_fields_offset, Some(16));
        assert_eq!(layout_for(&attrs(json!({})), Ok(NODE24)).unwrap().native_wrap_fields_offset, None, "W is the record");
    }
}
