//! What an OpenTelemetry Collector received, read back: the file exporter's `proto` format (each
//! `ProfilesData` message preceded by its size, 4 bytes big endian) decoded into messages
//! ([`decode_file_exporter`]), and every sample of a message with its dictionary indices resolved
//! into plain values ([`resolve`]). `thread-ctx report` and the tests that check what reached a
//! real Collector read it through here.
//!
//! The data is not ours: an index out of range, a message that does not decode or a size past the
//! end is an error naming what is wrong, never a panic; a message still being written (the file's
//! incomplete tail) is left out and its size reported.

use crate::framed::{read_framed, Format, Framed};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::profiles::v1development::{ProfilesData, ProfilesDictionary, ValueType};
use prost::Message;
use std::collections::BTreeMap;
use std::path::Path;
use thread_ctx_discovery::ids::hex;
use thread_ctx_output::file_error::{FileError, Result};

/// The messages of a file exporter's output.
#[derive(Debug, Default)]
pub struct ExporterFile {
    pub messages: Vec<ProfilesData>,
    /// Bytes at the end that do not hold a whole message yet (the Collector may still be writing).
    pub incomplete_tail: usize,
}

/// Decodes the file exporter's `proto` format. A size prefix that runs past the end is an
/// incomplete tail; a message that does not decode is an error naming its offset.
pub fn decode_file_exporter(bytes: &[u8]) -> Result<ExporterFile> {
    let (messages, incomplete_tail) = decode_messages::<ProfilesData>(bytes, "ProfilesData")?;
    Ok(ExporterFile { messages, incomplete_tail })
}

/// The file exporter's `proto` framing, for any OTLP message `M` (`what` names it in errors):
/// the messages, and the bytes at the end that do not hold a whole one yet.
pub fn decode_messages<M: Message + Default>(bytes: &[u8], what: &str) -> Result<(Vec<M>, usize)> {
    let mut messages = Vec::new();
    let mut at = 0usize;
    while bytes.len() - at >= 4 {
        let size = u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let Some(message) = bytes.get(at + 4..).and_then(|rest| rest.get(..size)) else { break };
        let data = M::decode(message)
            .map_err(|cause| FileError::Decode { what: format!("the message at byte {at} ({size} bytes) is not an OTLP {what}"), cause })?;
        messages.push(data);
        at += 4 + size;
    }
    Ok((messages, bytes.len() - at))
}

/// Reads a file exporter's profiles output one message at a time ([`read_framed`]: memory holds
/// one message however large the file) and gives each to `visit`; errors name the file and say
/// which format it expected, and what the file looks like instead (the file exporter's `json`
/// output, a pprof profile, a file too short for one message). A file with no whole message but
/// bytes is not one a Collector is still writing: its first message would be whole by now.
pub fn scan_exporter_file(path: &Path, mut visit: impl FnMut(ProfilesData) -> Result<()>) -> Result<Framed> {
    read_framed(path, None, &FORMAT, |_, data| visit(data))
}

/// [`scan_exporter_file`] over the first `whole_bytes` bytes only: a second pass reads exactly the
/// messages a first one did (its [`Framed::whole_bytes`]), however much the Collector has written
/// since.
pub fn rescan_exporter_file(path: &Path, whole_bytes: u64, mut visit: impl FnMut(ProfilesData) -> Result<()>) -> Result<Framed> {
    read_framed(path, Some(whole_bytes), &FORMAT, |_, data| visit(data))
}

/// Every message of a file exporter's output at once (see [`scan_exporter_file`], which holds
/// one at a time).
pub fn read_exporter_file(path: &Path) -> Result<ExporterFile> {
    let mut messages = Vec::new();
    let read = scan_exporter_file(path, |m| {
        messages.push(m);
        Ok(())
    })?;
    Ok(ExporterFile { messages, incomplete_tail: read.incomplete_tail as usize })
}

const FORMAT: Format = Format {
    what: "ProfilesData",
    not_it: "not the Collector file exporter's proto format (size-prefixed OTLP ProfilesData)",
    expected: "expected the Collector file exporter's proto format (size-prefixed OTLP ProfilesData)",
};

/// A sample with everything its indices point at, as plain values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedSample {
    /// The resource's attributes (values as text, see [`value_text`]).
    pub resource: BTreeMap<String, String>,
    pub scope_name: String,
    /// The profile's `sample_type` (type, unit) and `period_type` with `period`.
    pub sample_type: (String, String),
    pub period: (String, String, i64),
    /// The profile's window: its start (wall clock) and length.
    pub profile_time_unix_nano: u64,
    pub profile_duration_nano: u64,
    pub profile_attributes: BTreeMap<String, String>,
    /// Leaf first, one entry per line of each location (inlined frames expand).
    pub frames: Vec<ResolvedFrame>,
    /// The link's trace and span id, `None` for index 0 (no link).
    pub link: Option<(Vec<u8>, Vec<u8>)>,
    pub attributes: BTreeMap<String, String>,
    pub values: Vec<i64>,
    pub timestamps_unix_nano: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedFrame {
    pub function: String,
    pub system_name: String,
    pub file: String,
    /// Where the function starts.
    pub start_line: i64,
    /// The line's line and column (where the frame was sampled, when known).
    pub line: i64,
    pub column: i64,
    pub address: u64,
    /// The location's attributes (e.g. `profile.frame.type`).
    pub attributes: BTreeMap<String, String>,
    /// `None` for mapping index 0.
    pub mapping: Option<ResolvedMapping>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResolvedMapping {
    pub filename: String,
    pub memory_start: u64,
    pub memory_limit: u64,
    pub file_offset: u64,
    /// E.g. `process.executable.build_id.gnu`.
    pub attributes: BTreeMap<String, String>,
}

/// Every sample of one message, resolved against its dictionary; an index out of range is an
/// error naming the table.
pub fn resolve(data: &ProfilesData) -> Result<Vec<ResolvedSample>> {
    let mut out = Vec::new();
    resolve_each(data, |s| out.push(s))?;
    Ok(out)
}

/// Each sample of one message resolved and given to `visit` in turn, so that a large message's
/// samples are never all resolved at once (each frame's names are copied out of the
/// dictionary: a message's samples resolved together took many times its size).
pub fn resolve_each(data: &ProfilesData, mut visit: impl FnMut(ResolvedSample)) -> Result<()> {
    let default = ProfilesDictionary::default();
    let d = data.dictionary.as_ref().unwrap_or(&default);
    for rp in &data.resource_profiles {
        let mut resource = BTreeMap::new();
        for kv in rp.resource.iter().flat_map(|r| &r.attributes) {
            // The Collector moves resource attribute keys and string values into the
            // dictionary's string table (key_strindex, string_value_strindex).
            let key = if kv.key.is_empty() { string(d, kv.key_strindex)? } else { kv.key.clone() };
            let value = kv.value.as_ref().map(|v| value_text(d, v)).transpose()?.unwrap_or_default();
            resource.insert(key, value);
        }
        for sp in &rp.scope_profiles {
            let scope_name = sp.scope.as_ref().map(|s| s.name.clone()).unwrap_or_default();
            for p in &sp.profiles {
                let vt = |v: &Option<ValueType>| -> Result<(String, String)> {
                    v.as_ref().map_or(Ok((String::new(), String::new())), |v| Ok((string(d, v.type_strindex)?, string(d, v.unit_strindex)?)))
                };
                let sample_type = vt(&p.sample_type)?;
                let (pt, pu) = vt(&p.period_type)?;
                let profile_attributes = attributes(d, &p.attribute_indices)?;
                for s in &p.samples {
                    let stack = at(&d.stack_table, s.stack_index, "stack_table")?;
                    let mut frames = Vec::new();
                    for &li in &stack.location_indices {
                        frames.extend(location_frames(d, li)?);
                    }
                    let link = match s.link_index {
                        0 => None,
                        i => {
                            let l = at(&d.link_table, i, "link_table")?;
                            Some((l.trace_id.clone(), l.span_id.clone()))
                        }
                    };
                    visit(ResolvedSample {
                        resource: resource.clone(),
                        scope_name: scope_name.clone(),
                        sample_type: sample_type.clone(),
                        period: (pt.clone(), pu.clone(), p.period),
                        profile_time_unix_nano: p.time_unix_nano,
                        profile_duration_nano: p.duration_nano,
                        profile_attributes: profile_attributes.clone(),
                        frames,
                        link,
                        attributes: attributes(d, &s.attribute_indices)?,
                        values: s.values.clone(),
                        timestamps_unix_nano: s.timestamps_unix_nano.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

fn location_frames(d: &ProfilesDictionary, index: i32) -> Result<Vec<ResolvedFrame>> {
    let loc = at(&d.location_table, index, "location_table")?;
    let mapping = match loc.mapping_index {
        0 => None,
        i => {
            let m = at(&d.mapping_table, i, "mapping_table")?;
            Some(ResolvedMapping {
                filename: string(d, m.filename_strindex)?,
                memory_start: m.memory_start,
                memory_limit: m.memory_limit,
                file_offset: m.file_offset,
                attributes: attributes(d, &m.attribute_indices)?,
            })
        }
    };
    let location_attributes = attributes(d, &loc.attribute_indices)?;
    let frame = |function: String, system_name: String, file: String, start_line: i64, line: i64, column: i64| ResolvedFrame {
        function,
        system_name,
        file,
        start_line,
        line,
        column,
        address: loc.address,
        attributes: location_attributes.clone(),
        mapping: mapping.clone(),
    };
    if loc.lines.is_empty() {
        return Ok(vec![frame(String::new(), String::new(), String::new(), 0, 0, 0)]);
    }
    loc.lines
        .iter()
        .map(|l| {
            let f = at(&d.function_table, l.function_index, "function_table")?;
            Ok(frame(
                string(d, f.name_strindex)?,
                string(d, f.system_name_strindex)?,
                string(d, f.filename_strindex)?,
                f.start_line,
                l.line,
                l.column,
            ))
        })
        .collect()
}

fn attributes(d: &ProfilesDictionary, indices: &[i32]) -> Result<BTreeMap<String, String>> {
    indices
        .iter()
        .map(|&i| {
            let kv = at(&d.attribute_table, i, "attribute_table")?;
            Ok((string(d, kv.key_strindex)?, kv.value.as_ref().map(|v| value_text(d, v)).transpose()?.unwrap_or_default()))
        })
        .collect()
}

fn string(d: &ProfilesDictionary, index: i32) -> Result<String> {
    at(&d.string_table, index, "string_table").cloned()
}

fn at<'a, T>(table: &'a [T], index: i32, name: &str) -> Result<&'a T> {
    usize::try_from(index)
        .ok()
        .and_then(|i| table.get(i))
        .ok_or_else(|| FileError::Invalid(format!("{name}[{index}] is out of range (the table has {} entries)", table.len())))
}

/// An attribute value as text: strings as they are (string-table references resolved), numbers
/// and booleans in decimal, bytes in hex, arrays and maps in a JSON-like form.
pub fn value_text(d: &ProfilesDictionary, v: &AnyValue) -> Result<String> {
    Ok(match &v.value {
        None => String::new(),
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::StringValueStrindex(i)) => string(d, *i)?,
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(f)) => f.to_string(),
        Some(any_value::Value::BytesValue(b)) => hex(b),
        Some(any_value::Value::ArrayValue(a)) => {
            format!("[{}]", a.values.iter().map(|v| value_text(d, v)).collect::<Result<Vec<_>>>()?.join(","))
        }
        Some(any_value::Value::KvlistValue(l)) => {
            let mut parts = Vec::new();
            for kv in &l.values {
                let key = if kv.key.is_empty() { string(d, kv.key_strindex)? } else { kv.key.clone() };
                parts.push(format!("{key}={}", kv.value.as_ref().map(|v| value_text(d, v)).transpose()?.unwrap_or_default()));
            }
            format!("{{{}}}", parts.join(","))
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use opentelemetry_proto::tonic::profiles::v1development as otlp;

    /// The file exporter's framing of `messages`.
    pub(crate) fn framed<M: Message>(messages: &[M]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in messages {
            let bytes = m.encode_to_vec();
            out.extend((bytes.len() as u32).to_be_bytes());
            out.extend(bytes);
        }
        out
    }

    fn message(sample: otlp::Sample) -> ProfilesData {
        let dictionary = otlp::ProfilesDictionary {
            string_table: vec![String::new(), "samples".into(), "count".into()],
            stack_table: vec![otlp::Stack::default()],
            link_table: vec![otlp::Link::default(), otlp::Link { trace_id: vec![1; 16], span_id: vec![2; 8] }],
            ..Default::default()
        };
        let profile =
            otlp::Profile { sample_type: Some(otlp::ValueType { type_strindex: 1, unit_strindex: 2 }), samples: vec![sample], ..Default::default() };
        ProfilesData {
            resource_profiles: vec![otlp::ResourceProfiles {
                scope_profiles: vec![otlp::ScopeProfiles { profiles: vec![profile], ..Default::default() }],
                ..Default::default()
            }],
            dictionary: Some(dictionary),
        }
    }

    #[test]
    fn whole_messages_decode_and_an_incomplete_tail_waits() {
        let m = message(otlp::Sample { link_index: 1, values: vec![1], ..Default::default() });
        let mut bytes = framed(&[m.clone(), m.clone()]);
        let whole = bytes.len();
        bytes.extend(framed(std::slice::from_ref(&m))[..7].iter());
        let file = decode_file_exporter(&bytes).unwrap();
        assert_eq!((file.messages.len(), file.incomplete_tail), (2, bytes.len() - whole));
        let samples = resolve(&file.messages[0]).unwrap();
        assert_eq!(samples[0].link, Some((vec![1; 16], vec![2; 8])));
        assert_eq!(samples[0].sample_type, ("samples".to_string(), "count".to_string()));
    }

    #[test]
    fn garbage_and_bad_indices_are_errors_not_panics() {
        let mut bytes = 3u32.to_be_bytes().to_vec();
        bytes.extend([0xff, 0xff, 0xff]);
        let err = decode_file_exporter(&bytes).unwrap_err().to_string();
        assert!(err.contains("the message at byte 0 (3 bytes) is not an OTLP ProfilesData"), "{err}");
        let bad = message(otlp::Sample { link_index: 9, ..Default::default() });
        let err = resolve(&bad).unwrap_err().to_string();
        assert_eq!(err, "link_table[9] is out of range (the table has 2 entries)");
        let bad = message(otlp::Sample { stack_index: -1, ..Default::default() });
        assert!(resolve(&bad).unwrap_err().to_string().starts_with("stack_table[-1]"));
    }

    /// A file without one whole message is not a Collector's output (an empty one is: nothing
    /// arrived yet); the error says what the file looks like.
    #[test]
    fn a_file_with_no_whole_message_says_what_it_looks_like() {
        let dir = tempfile::tempdir().unwrap();
        let said = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            read_exporter_file(&path).map(|f| f.messages.len()).map_err(|e| e.to_string())
        };
        assert!(said("p.pb.gz", &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]).unwrap_err().contains("is gzip data (a pprof profile?"));
        assert!(said("two", &[0x0a, 0]).unwrap_err().contains("holds 2 bytes, less than one message's 4-byte size"));
        assert!(said("cut", &[0, 0, 1, 0, 9, 9]).unwrap_err().contains("its first message claims 256"));
        assert_eq!(said("empty", &[]), Ok(0));
        let m = message(otlp::Sample { link_index: 1, values: vec![1], ..Default::default() });
        let mut one_and_a_bit = framed(std::slice::from_ref(&m));
        one_and_a_bit.extend([0, 0]);
        assert_eq!(said("writing", &one_and_a_bit), Ok(1), "a whole message, and the next one still being written");
    }
}
