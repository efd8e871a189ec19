//! The OTEP 4719 process-context payload: `ProcessContext { Resource resource = 1;
//! repeated KeyValue attributes = 2; }` over the OTLP common and resource
//! messages it uses, as this crate's own prost messages (field numbers from
//! opentelemetry/proto/common/v1 and resource/v1). They are also the project's
//! resource type: a profile names its process with [`Resource`], and only the
//! OTLP crate turns it into the OTLP message, so a change of OTLP's generated
//! types touches that crate alone.

/// `opentelemetry.proto.common.v1.AnyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5, 6, 7, 8")]
    pub value: Option<any_value::Value>,
}

pub mod any_value {
    // Variant names as prost-build generates them from the OTLP .proto.
    #[allow(clippy::enum_variant_names)]
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(string, tag = "1")]
        StringValue(String),
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        #[prost(int64, tag = "3")]
        IntValue(i64),
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        #[prost(message, tag = "5")]
        ArrayValue(super::ArrayValue),
        #[prost(message, tag = "6")]
        KvlistValue(super::KeyValueList),
        #[prost(bytes, tag = "7")]
        BytesValue(Vec<u8>),
        /// A reference into a profiles dictionary's string table; meaningless in a process context.
        #[prost(int32, tag = "8")]
        StringValueStrindex(i32),
    }
}

/// `opentelemetry.proto.common.v1.ArrayValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

/// `opentelemetry.proto.common.v1.KeyValueList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}

/// `opentelemetry.proto.common.v1.KeyValue` (its `key_strindex`, used only inside profiles, is skipped).
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `opentelemetry.proto.resource.v1.Resource` (its entity references are skipped).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    #[prost(uint32, tag = "2")]
    pub dropped_attributes_count: u32,
}

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
