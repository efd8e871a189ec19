//! What a process-context payload may hold, so that every reader accepts it: the OpenTelemetry
//! eBPF profiler refuses payloads over 64 KiB; the C reference implementation's reader takes
//! strings of at most 4096 bytes and a payload whose length fits a two-byte varint (16,383).
//! Resource attributes that break a limit are left out whole and reported; the thread-context
//! attributes (schema version, key map) are bounded when keys are registered and never dropped.

use prost::Message;

use super::proto::{any_value::Value, KeyValue};

pub const MAX_PAYLOAD_LEN: usize = 16_383;
/// A key or string value (each string of an array too).
pub const MAX_STRING_LEN: usize = 4096;
/// The OpenTelemetry SDKs' default attribute count limit.
pub const MAX_RESOURCE_ATTRIBUTES: usize = 128;
/// One key of the attribute key map, and all of them together (the map is in every payload).
pub const MAX_KEY_LEN: usize = 255;
pub const MAX_KEY_MAP_LEN: usize = 4096;

/// Kept first when the payload budget runs out: what readers identify a service by.
const PRIORITY: &[&str] = &[
    "service.name",
    "service.instance.id",
    "service.namespace",
    "service.version",
    "deployment.environment.name",
    "telemetry.sdk.name",
    "telemetry.sdk.language",
    "telemetry.sdk.version",
    "process.pid",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    TooLong,
    TooMany,
    OverBudget,
}

impl DropReason {
    pub fn describe(self) -> String {
        match self {
            DropReason::TooLong => format!("a key or string value over {MAX_STRING_LEN} bytes"),
            DropReason::TooMany => format!("more than {MAX_RESOURCE_ATTRIBUTES} attributes"),
            DropReason::OverBudget => format!("the payload would exceed {MAX_PAYLOAD_LEN} bytes"),
        }
    }
}

fn too_long(kv: &KeyValue) -> bool {
    let long = |s: &String| s.len() > MAX_STRING_LEN;
    long(&kv.key)
        || match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(Value::StringValue(s)) => long(s),
            Some(Value::ArrayValue(a)) => a.values.iter().any(|v| matches!(&v.value, Some(Value::StringValue(s)) if long(s))),
            _ => false,
        }
}

fn priority(key: &str) -> usize {
    PRIORITY.iter().position(|k| *k == key).unwrap_or(PRIORITY.len())
}

/// Bytes one more element of a repeated message field costs: tag, length, message.
fn field_len(kv: &KeyValue) -> usize {
    let len = kv.encoded_len();
    1 + prost::encoding::encoded_len_varint(len as u64) + len
}

/// The resource attributes that fit in `budget` bytes of payload (as `Resource.attributes`
/// elements), identity attributes first; the others with why they were left out.
pub fn fit(resource: &[KeyValue], budget: usize) -> (Vec<KeyValue>, super::Dropped) {
    let mut dropped = Vec::new();
    let mut candidates: Vec<&KeyValue> = Vec::with_capacity(resource.len());
    for kv in resource {
        if too_long(kv) {
            dropped.push((kv.key.clone(), DropReason::TooLong));
        } else {
            candidates.push(kv);
        }
    }
    candidates.sort_by_key(|kv| priority(&kv.key)); // stable: the rest keep their order
    let mut kept = Vec::with_capacity(candidates.len());
    let mut used = 0;
    for kv in candidates {
        if kept.len() == MAX_RESOURCE_ATTRIBUTES {
            dropped.push((kv.key.clone(), DropReason::TooMany));
        } else if used + field_len(kv) > budget {
            dropped.push((kv.key.clone(), DropReason::OverBudget));
        } else {
            used += field_len(kv);
            kept.push(kv.clone());
        }
    }
    (kept, dropped)
}
