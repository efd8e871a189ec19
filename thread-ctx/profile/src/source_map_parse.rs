//! A source map parsed lean, after its parsed size is known: the JSON is read
//! once with its `mappings` borrowed (not copied), `sourcesContent` and
//! `names` skipped (a frame needs the original source, line and column, never
//! the source text or the original identifier), the segments counted, and
//! only when the tokens fit the caller's budget are they decoded, straight
//! into the `sourcemap` crate's tokens.
//!
//! Why not `sourcemap::decode_slice` for a regular map: it deserializes into
//! owned strings first (`mappings` copied, every `sourcesContent` entry and
//! every name allocated, a name as a `serde_json::Value`), before anyone can
//! say the result is too large. A 29.6 MiB map cost the agent ~130 MiB per
//! parse that way, and a map of 8M one-letter names 16 bytes of heap per
//! byte of JSON. Here a refused map costs its JSON bytes and a scan.
//!
//! An index map (`sections`) is rare (Metro bundles): it is decoded by the
//! crate and flattened, after a conservative estimate from the JSON's size.

use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use sourcemap::{RawToken, SourceMap};
use std::borrow::Cow;
use std::sync::Arc;

/// The most `sources` entries read: a bundle of a large app names a few thousand; more is an attack
/// on the parser's memory (each entry costs ~40 bytes before its text).
pub const MAX_SOURCES: usize = 1 << 16;
/// Heap bytes of one decoded segment (the crate's `RawToken`: six u32 and a bool, padded).
pub const TOKEN_BYTES: u64 = std::mem::size_of::<RawToken>() as u64;
/// Heap bytes of one source name besides its text (the `Arc<str>` header and the vector's slot).
const SOURCE_OVERHEAD: u64 = 16 + 16;
/// An index map's parsed size, per byte of its JSON: the crate's owned copy of every section's
/// mappings plus their tokens (a segment is at least 2 bytes of JSON: 28 / 2) and the flattening's copy.
const INDEX_MAP_BYTES_PER_JSON_BYTE: u64 = 32;

/// Why a map was not parsed (beside the crate's own errors).
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("not a source map: {0}")]
    Json(serde_json::Error),
    #[error("not a source map: {0}")]
    Map(sourcemap::Error),
    #[error("a segment of {0} fields (1, 4 or 5 expected)")]
    BadSegment(usize),
    #[error("a segment names source {0}, past the map's sources")]
    BadSource(u32),
    /// Its tokens would take more heap than the caller has left: nothing was decoded.
    #[error("parsed it would take ~{} MiB, more than the {} MiB left of its share", mib(*estimate), mib(*left))]
    OverBudget { estimate: u64, left: u64 },
}

pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1u64 << 20) as f64)
}

/// A parsed map and the heap bytes it holds (estimated as it was decoded).
pub struct Parsed {
    pub map: sourcemap::DecodedMap,
    pub bytes: u64,
}

/// The fields read: `mappings` borrowed from the JSON when it has no escapes (base64 never does).
#[derive(Deserialize)]
struct Lean<'a> {
    /// Borrowed only as a `Cow` field of its own (serde's special case); a map without one has none.
    #[serde(borrow, default)]
    mappings: Cow<'a, str>,
    #[serde(default, deserialize_with = "bounded_sources")]
    sources: Vec<Option<String>>,
    #[serde(rename = "sourceRoot", default)]
    source_root: Option<String>,
    #[serde(default)]
    sections: Option<IgnoredAny>,
}

fn bounded_sources<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Option<String>>, D::Error> {
    struct Bounded;
    impl<'de> Visitor<'de> for Bounded {
        type Value = Vec<Option<String>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "at most {MAX_SOURCES} source names")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(s) = seq.next_element::<Option<String>>()? {
                if out.len() == MAX_SOURCES {
                    return Err(serde::de::Error::custom(format!("more than {MAX_SOURCES} sources")));
                }
                out.push(s);
            }
            Ok(out)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
    }
    d.deserialize_any(Bounded)
}

/// The JSON without the `)]}'` line a map may start with (the spec's guard against XSSI).
fn without_header(json: &[u8]) -> &[u8] {
    if json.starts_with(b")]}'") {
        return json.iter().position(|&b| b == b'\n').map_or(&[][..], |i| &json[i + 1..]);
    }
    json
}

/// Segments in `mappings`: the tokens it decodes to.
pub fn segments(mappings: &str) -> u64 {
    mappings.split([';', ',']).filter(|s| !s.is_empty()).count() as u64
}

/// The heap a regular map's tokens and source names take once decoded.
pub fn estimate(segments: u64, sources: &[Option<String>]) -> u64 {
    segments * TOKEN_BYTES + sources.iter().map(|s| s.as_ref().map_or(0, |s| s.len() as u64) + SOURCE_OVERHEAD).sum::<u64>()
}

/// Parses `json` when its parsed size is at most `budget` bytes; else [`ParseError::OverBudget`],
/// having allocated nothing but the source names.
pub fn parse(json: &[u8], budget: u64) -> Result<Parsed, ParseError> {
    let json = without_header(json);
    let lean: Lean = serde_json::from_slice(json).map_err(ParseError::Json)?;
    if lean.sections.is_some() {
        let estimate = json.len() as u64 * INDEX_MAP_BYTES_PER_JSON_BYTE;
        if estimate > budget {
            return Err(ParseError::OverBudget { estimate, left: budget });
        }
        drop(lean);
        let map = match sourcemap::decode_slice(json).map_err(ParseError::Map)? {
            sourcemap::DecodedMap::Index(index) => sourcemap::DecodedMap::Regular(index.flatten().map_err(ParseError::Map)?),
            other => other,
        };
        return Ok(Parsed { map, bytes: estimate });
    }
    let mappings = &*lean.mappings;
    let segments = segments(mappings);
    let estimate = estimate(segments, &lean.sources);
    if estimate > budget {
        return Err(ParseError::OverBudget { estimate, left: budget });
    }
    let tokens = decode(mappings, segments as usize, lean.sources.len() as u32)?;
    let sources: Vec<Arc<str>> = lean.sources.into_iter().map(|s| Arc::from(s.unwrap_or_default())).collect();
    let mut map = SourceMap::new(None, tokens, Vec::new(), sources, None);
    map.set_source_root(lean.source_root);
    Ok(Parsed { map: sourcemap::DecodedMap::Regular(map), bytes: estimate })
}

/// The tokens of `mappings` (source map v3: per generated line, segments of base64 VLQ deltas;
/// the generated column restarts each line, the source, its line and column run on).
fn decode(mappings: &str, segments: usize, sources: u32) -> Result<Vec<RawToken>, ParseError> {
    let mut tokens = Vec::with_capacity(segments);
    let (mut src_id, mut src_line, mut src_col) = (0u32, 0u32, 0u32);
    for (dst_line, line) in mappings.split(';').enumerate() {
        let mut dst_col = 0u32;
        for segment in line.split(',').filter(|s| !s.is_empty()) {
            let nums = sourcemap::vlq::parse_vlq_segment(segment).map_err(ParseError::Map)?;
            if !matches!(nums.len(), 1 | 4 | 5) {
                return Err(ParseError::BadSegment(nums.len()));
            }
            dst_col = (i64::from(dst_col) + nums[0]) as u32;
            let mut token = RawToken { dst_line: dst_line as u32, dst_col, src_line: !0, src_col: !0, src_id: !0, name_id: !0, is_range: false };
            if nums.len() > 1 {
                src_id = (i64::from(src_id) + nums[1]) as u32;
                if src_id >= sources {
                    return Err(ParseError::BadSource(src_id));
                }
                src_line = (i64::from(src_line) + nums[2]) as u32;
                src_col = (i64::from(src_col) + nums[3]) as u32;
                (token.src_id, token.src_line, token.src_col) = (src_id, src_line, src_col);
            }
            tokens.push(token);
        }
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TSC_MAP: &str = r#"{"version":3,"file":"heavy.js","sourceRoot":"","sources":["../src/heavy.ts"],"names":["x"],"sourcesContent":["function heavy(n: number) {}"],"mappings":";;AAAA,SAAS,KAAK,CAAC,CAAS;IACtB,OAAO,CAAC,GAAG,CAAC,CAAC;AACf,CAAC"}"#;

    #[test]
    fn tokens_match_the_crates_own_decoding() {
        let ours = parse(TSC_MAP.as_bytes(), u64::MAX).unwrap();
        let theirs = sourcemap::decode_slice(TSC_MAP.as_bytes()).unwrap();
        for (line, col) in [(2, 0), (2, 14), (3, 4), (3, 20), (4, 1)] {
            let (a, b) = (ours.map.lookup_token(line, col).unwrap(), theirs.lookup_token(line, col).unwrap());
            assert_eq!((a.get_source(), a.get_src_line(), a.get_src_col()), (b.get_source(), b.get_src_line(), b.get_src_col()), "{line}:{col}");
        }
        assert_eq!(ours.bytes, 13 * TOKEN_BYTES + "../src/heavy.ts".len() as u64 + SOURCE_OVERHEAD, "13 segments, one source");
    }

    #[test]
    fn a_map_over_budget_is_refused_before_decoding() {
        let mappings = "AAAA,".repeat(100_000);
        let json = format!(r#"{{"version":3,"sources":["a.ts"],"mappings":"{mappings}"}}"#);
        let need = 100_000 * TOKEN_BYTES + 4 + SOURCE_OVERHEAD;
        match parse(json.as_bytes(), need - 1) {
            Err(ParseError::OverBudget { estimate, left }) => assert_eq!((estimate, left), (need, need - 1)),
            other => panic!("refused over budget, got {:?}", other.map(|p| p.bytes)),
        }
        assert_eq!(parse(json.as_bytes(), need).unwrap().bytes, need, "exactly the budget fits");
    }

    #[test]
    fn source_text_and_names_cost_nothing_parsed() {
        // A map that is mostly its sources' text and names (a bundle with sourcesContent): only
        // its tokens and source names are held, so it fits a budget far below its size.
        let content = "x".repeat(4 << 20);
        let names = vec!["\"n\""; 1 << 20].join(",");
        let json = format!(r#"{{"version":3,"sources":["a.ts"],"names":[{names}],"sourcesContent":["{content}"],"mappings":"AAAA,CAAC"}}"#);
        let parsed = parse(json.as_bytes(), 1 << 10).expect("fits 1 KiB");
        assert_eq!(parsed.bytes, 2 * TOKEN_BYTES + 4 + SOURCE_OVERHEAD);
        assert!(parsed.map.lookup_token(0, 1).is_some());
    }

    #[test]
    fn hostile_shapes_are_refused_with_a_reason() {
        let many = format!(r#"{{"version":3,"sources":[{}"a"],"mappings":""}}"#, "\"a\",".repeat(MAX_SOURCES));
        let why = parse(many.as_bytes(), u64::MAX).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(why.contains(&format!("more than {MAX_SOURCES} sources")), "{why}");
        assert!(matches!(parse(br#"{"version":3,"sources":["a"],"mappings":"AA"}"#, u64::MAX), Err(ParseError::BadSegment(2))));
        assert!(matches!(parse(br#"{"version":3,"sources":["a"],"mappings":"ACAA"}"#, u64::MAX), Err(ParseError::BadSource(1))));
        let index = br#"{"version":3,"sections":[{"offset":{"line":0,"column":0},"map":{"version":3,"sources":["a"],"mappings":"AAAA"}}]}"#;
        assert!(matches!(parse(index, 10), Err(ParseError::OverBudget { .. })), "index maps are estimated from their size");
        assert!(parse(index, u64::MAX).unwrap().map.lookup_token(0, 0).is_some());
        assert!(parse(b")]}'\n{\"version\":3,\"sources\":[\"a\"],\"mappings\":\"AAAA\"}", u64::MAX).is_ok(), "the XSSI guard line");
    }
}
