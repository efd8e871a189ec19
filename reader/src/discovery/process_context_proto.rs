//! The OTEP 4719 process-context payload: `ProcessContext { Resource resource = 1;
//! repeated KeyValue attributes = 2; }` over the OTLP common and resource
//! messages of the `opentelemetry-proto` crate (which does not carry this
//! wrapper message itself).

pub use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, ArrayValue, KeyValue, KeyValueList};
pub use opentelemetry_proto::tonic::resource::v1::Resource;

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessContext {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// Extra attributes; `threadlocal.*` live here.
    #[prost(message, repeated, tag = "2")]
    pub attributes: Vec<KeyValue>,
}

/// A string value.
pub fn string_value(s: impl Into<String>) -> AnyValue {
    AnyValue { value: Some(any_value::Value::StringValue(s.into())) }
}

/// The string inside a value, if it is one.
pub fn as_str(v: &AnyValue) -> Option<&str> {
    match &v.value {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

/// A JSON rendering for output (bytes as lowercase hex; a string-table
/// reference, which only profiles use, as its index).
pub fn to_json(v: &AnyValue) -> serde_json::Value {
    use any_value::Value::*;
    match &v.value {
        None => serde_json::Value::Null,
        Some(StringValue(s)) => s.clone().into(),
        Some(BoolValue(b)) => (*b).into(),
        Some(IntValue(i)) => (*i).into(),
        Some(DoubleValue(d)) => serde_json::Number::from_f64(*d).map_or(serde_json::Value::Null, Into::into),
        Some(ArrayValue(a)) => a.values.iter().map(to_json).collect(),
        Some(KvlistValue(kv)) => kv.values.iter().map(|e| (e.key.clone(), e.value.as_ref().map_or(serde_json::Value::Null, to_json))).collect(),
        Some(BytesValue(b)) => crate::ids::hex(b).into(),
        Some(StringValueStrindex(i)) => serde_json::json!({ "string_table_index": i }),
    }
}
