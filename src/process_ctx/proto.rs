//! The OTEP 4719 payload: `ProcessContext` with the OTLP common/resource messages it uses, as prost
//! derived messages (field numbers from opentelemetry/proto/common/v1 and resource/v1; no protoc).

/// `opentelemetry.proto.common.v1.AnyValue` (the kinds this writer emits).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5")]
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
    }
}

/// `opentelemetry.proto.common.v1.ArrayValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

/// `opentelemetry.proto.common.v1.KeyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `opentelemetry.proto.resource.v1.Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// OTEP 4719 `ProcessContext { Resource resource = 1; repeated KeyValue attributes = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessContext {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub attributes: Vec<KeyValue>,
}

impl KeyValue {
    pub fn new(key: impl Into<String>, value: any_value::Value) -> Self {
        KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }) }
    }

    pub fn string(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self::new(key, any_value::Value::StringValue(value.into()))
    }

    pub fn strings(key: impl Into<String>, values: &[String]) -> Self {
        let values = values.iter().map(|v| AnyValue { value: Some(any_value::Value::StringValue(v.clone())) }).collect();
        Self::new(key, any_value::Value::ArrayValue(ArrayValue { values }))
    }
}
