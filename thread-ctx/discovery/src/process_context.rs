//! OTEP 4719 process-context reader: find the OTEL_CTX mapping, check its
//! header, copy the payload and re-check the header so a concurrent update is
//! never decoded half-written.

use crate::error::{Error, Result};
use crate::maps::Mapping;
use crate::process_context_proto as proto;
use crate::remote_memory::RemoteMemory;
use prost::Message;
use serde::Serialize;

pub const SIGNATURE: &[u8; 8] = b"OTEL_CTX";
pub const VERSION: u32 = 2;
pub const HEADER_SIZE: usize = 32;
/// Largest payload we copy (the OpenTelemetry eBPF profiler's bound too; a
/// real context is a few hundred bytes). The size is the target's word: we
/// never allocate more than this for it.
pub const MAX_PAYLOAD: u32 = 64 << 10;
pub const SCHEMA_VERSION_KEY: &str = "threadlocal.schema_version";
pub const KEY_MAP_KEY: &str = "threadlocal.attribute_key_map";
const ATTEMPTS: usize = 200;
/// Mappings named OTEL_CTX tried per process (the spec says one): each may
/// cost a reader up to ATTEMPTS waits, and a process can map thousands.
pub const MAX_CONTEXT_MAPPINGS: usize = 4;

/// Maps names under which writers publish the context (memfd first, then anonymous fallbacks).
pub fn is_context_mapping(m: &Mapping) -> bool {
    matches!(m.name.as_str(), "/memfd:OTEL_CTX" | "/memfd:OTEL_CTX (deleted)" | "[anon_shmem:OTEL_CTX]" | "[anon:OTEL_CTX]")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextHeader {
    pub version: u32,
    pub payload_size: u32,
    pub published_at_ns: u64,
    pub payload_addr: u64,
}

/// What is wrong with a process-context header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("signature {0:?}, expected \"OTEL_CTX\"")]
    Signature(String),
    #[error("version {0}, expected {VERSION}")]
    Version(u32),
    #[error("payload size {0} exceeds the {MAX_PAYLOAD}-byte limit")]
    PayloadSize(u32),
}

impl ContextHeader {
    /// Parses the 32-byte header; Err names what is wrong.
    pub fn parse(b: &[u8; HEADER_SIZE]) -> std::result::Result<Self, HeaderError> {
        if &b[0..8] != SIGNATURE {
            return Err(HeaderError::Signature(String::from_utf8_lossy(&b[0..8]).into_owned()));
        }
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        let h = ContextHeader { version: u32_at(8), payload_size: u32_at(12), published_at_ns: u64_at(16), payload_addr: u64_at(24) };
        if h.version != VERSION {
            return Err(HeaderError::Version(h.version));
        }
        if h.payload_size > MAX_PAYLOAD {
            return Err(HeaderError::PayloadSize(h.payload_size));
        }
        Ok(h)
    }
}

/// A decoded process context.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessContextInfo {
    pub mapping: String,
    pub address: u64,
    pub version: u32,
    pub published_at_ns: u64,
    pub payload_size: u32,
    /// Resource attributes, key -> value (a repeated key: the last one wins).
    pub resource: serde_json::Map<String, serde_json::Value>,
    /// Process-context attributes (`threadlocal.*` among them).
    pub attributes: serde_json::Map<String, serde_json::Value>,
    pub schema_version: Option<String>,
    pub attribute_key_map: Option<Vec<String>>,
    #[serde(skip)]
    pub decoded: proto::ProcessContext,
}

/// Finds and reads the process context; Ok(None) when the process publishes none.
pub fn read_process_context(pid: i32, maps: &[Mapping]) -> Result<Option<ProcessContextInfo>> {
    let mem = RemoteMemory::new(pid);
    let mut last_err = None;
    // A context mapping is data: an executable one named OTEL_CTX is not one.
    let candidates = maps.iter().filter(|m| is_context_mapping(m) && !m.perms.contains('x') && m.end.saturating_sub(m.start) >= HEADER_SIZE as u64);
    for m in candidates.take(MAX_CONTEXT_MAPPINGS) {
        match read_at(&mem, m) {
            Ok(info) => return Ok(Some(info)),
            Err(e) => last_err = Some(e),
        }
    }
    last_err.map_or(Ok(None), Err)
}

fn read_at(mem: &RemoteMemory, m: &Mapping) -> Result<ProcessContextInfo> {
    let fail = |reason: String| Error::ProcessContext { mapping: m.name.clone(), addr: m.start, reason };
    let read_header = || -> Result<[u8; HEADER_SIZE]> {
        let mut b = [0u8; HEADER_SIZE];
        mem.read(m.start, &mut b, "OTEL_CTX header")?;
        Ok(b)
    };
    for _ in 0..ATTEMPTS {
        let h = ContextHeader::parse(&read_header()?).map_err(|e| fail(e.to_string()))?;
        if h.published_at_ns == 0 {
            // Writer is mid-update; it will publish a new timestamp shortly.
            std::thread::sleep(std::time::Duration::from_micros(200));
            continue;
        }
        let payload = mem.read_vec(h.payload_addr, h.payload_size as usize, "OTEL_CTX payload");
        let again = ContextHeader::parse(&read_header()?).map_err(|e| fail(e.to_string()))?;
        if again != h {
            continue; // updated while we copied: the copy may be torn
        }
        return decode(m, h, &payload?);
    }
    Err(fail(format!("header kept changing (or stayed at published-at 0) over {ATTEMPTS} attempts")))
}

/// Decodes a payload copied for header `h` of mapping `m`: a pure function of
/// the bytes (fuzzed). prost bounds nesting (100 levels) and checks every
/// length against the bytes left, so a malformed payload is an error, never
/// a large allocation.
pub fn decode(m: &Mapping, h: ContextHeader, payload: &[u8]) -> Result<ProcessContextInfo> {
    let fail = |reason: String| Error::ProcessContext { mapping: m.name.clone(), addr: m.start, reason };
    if payload.len() != h.payload_size as usize {
        return Err(fail(format!("payload of {} bytes, the header says {}", payload.len(), h.payload_size)));
    }
    let decoded = proto::ProcessContext::decode(payload)
        .map_err(|e| fail(format!("payload ({} bytes) is not a ProcessContext protobuf: {e}", payload.len())))?;
    Ok(describe(m, h, decoded))
}

fn describe(m: &Mapping, h: ContextHeader, decoded: proto::ProcessContext) -> ProcessContextInfo {
    let pairs = |kvs: &[proto::KeyValue]| -> serde_json::Map<String, serde_json::Value> {
        kvs.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(serde_json::Value::Null, proto::to_json))).collect()
    };
    let find = |key: &str| decoded.attributes.iter().rev().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref());
    let schema_version = find(SCHEMA_VERSION_KEY).and_then(proto::as_str).map(str::to_string);
    let attribute_key_map = find(KEY_MAP_KEY).and_then(|v| match &v.value {
        Some(proto::any_value::Value::ArrayValue(a)) => Some(a.values.iter().map(|v| proto::as_str(v).unwrap_or_default().to_string()).collect()),
        _ => None,
    });
    ProcessContextInfo {
        mapping: m.name.clone(),
        address: m.start,
        version: h.version,
        published_at_ns: h.published_at_ns,
        payload_size: h.payload_size,
        resource: decoded.resource.as_ref().map(|r| pairs(&r.attributes)).unwrap_or_default(),
        attributes: pairs(&decoded.attributes),
        schema_version,
        attribute_key_map,
        decoded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(sig: &[u8; 8], version: u32, size: u32) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(sig);
        b[8..12].copy_from_slice(&version.to_ne_bytes());
        b[12..16].copy_from_slice(&size.to_ne_bytes());
        b[16..24].copy_from_slice(&5u64.to_ne_bytes());
        b[24..32].copy_from_slice(&0x1000u64.to_ne_bytes());
        b
    }

    #[test]
    fn header_checks_signature_version_and_size() {
        let h = ContextHeader::parse(&header(SIGNATURE, 2, 10)).unwrap();
        assert_eq!((h.payload_size, h.published_at_ns, h.payload_addr), (10, 5, 0x1000));
        assert!(matches!(ContextHeader::parse(&header(b"OTEL_CTY", 2, 10)), Err(HeaderError::Signature(s)) if s == "OTEL_CTY"));
        assert_eq!(ContextHeader::parse(&header(SIGNATURE, 1, 10)), Err(HeaderError::Version(1)));
        assert!(ContextHeader::parse(&header(SIGNATURE, 2, u32::MAX)).unwrap_err().to_string().contains("limit"));
    }
}
