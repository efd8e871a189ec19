//! OTEP 4719 process contexts for the C writer to publish (`--proc-ctx FILE`): a payload encoded
//! here with prost, written to a file the writer reads.

use prost::Message;
use std::path::PathBuf;
use thread_ctx_discovery::process_context_proto::{any_value, string_value, AnyValue, ArrayValue, KeyValue, ProcessContext, Resource};

/// What a reader says when the writer stayed mid-update for all its attempts.
pub const GAVE_UP: &str = "stayed at published-at 0";

pub fn kv(key: &str, value: AnyValue) -> KeyValue {
    KeyValue { key: key.into(), value: Some(value) }
}

pub fn payload(service: &str, keys: &[&str]) -> Vec<u8> {
    ProcessContext {
        resource: Some(Resource {
            attributes: vec![kv("service.name", string_value(service)), kv("process.pid", AnyValue { value: Some(any_value::Value::IntValue(42)) })],
            ..Default::default()
        }),
        attributes: vec![
            kv("threadlocal.schema_version", string_value("tlsdesc_v1_dev")),
            kv(
                "threadlocal.attribute_key_map",
                AnyValue { value: Some(any_value::Value::ArrayValue(ArrayValue { values: keys.iter().map(|k| string_value(*k)).collect() })) },
            ),
        ],
    }
    .encode_to_vec()
}

pub fn write_file(name: &str, bytes: &[u8]) -> PathBuf {
    let p = crate::target_tmpdir().join(format!("{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    p
}
