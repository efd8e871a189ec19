//! The OTLP messages an OTEP 4719 process-context payload is made of, derived
//! by hand with prost (field numbers from opentelemetry/proto common/v1 and
//! resource/v1), so no protoc is needed.

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessContext {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// Extra attributes; `threadlocal.*` live here.
    #[prost(message, repeated, tag = "2")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    #[prost(uint32, tag = "2")]
    pub dropped_attributes_count: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub value: Option<any_value::Value>,
}

pub mod any_value {
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
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}

impl AnyValue {
    pub fn string(s: impl Into<String>) -> Self {
        AnyValue { value: Some(any_value::Value::StringValue(s.into())) }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Some(any_value::Value::StringValue(s)) => Some(s),
            _ => None,
        }
    }

    /// A JSON rendering for output (bytes as lowercase hex).
    pub fn to_json(&self) -> serde_json::Value {
        use any_value::Value::*;
        match &self.value {
            None => serde_json::Value::Null,
            Some(StringValue(s)) => s.clone().into(),
            Some(BoolValue(b)) => (*b).into(),
            Some(IntValue(i)) => (*i).into(),
            Some(DoubleValue(d)) => serde_json::Number::from_f64(*d).map_or(serde_json::Value::Null, Into::into),
            Some(ArrayValue(a)) => a.values.iter().map(AnyValue::to_json).collect(),
            Some(KvlistValue(kv)) => {
                kv.values.iter().map(|e| (e.key.clone(), e.value.as_ref().map_or(serde_json::Value::Null, AnyValue::to_json))).collect()
            }
            Some(BytesValue(b)) => crate::record::hex(b).into(),
        }
    }
}

impl KeyValue {
    pub fn new(key: impl Into<String>, value: AnyValue) -> Self {
        KeyValue { key: key.into(), value: Some(value) }
    }
}
