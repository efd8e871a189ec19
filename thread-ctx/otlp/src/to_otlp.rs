//! The project's resource and attribute values (`thread_ctx_discovery::process_context_proto`,
//! decoded from a process context) as OTLP's generated messages: the one place the two meet.

use opentelemetry_proto::tonic::common::v1 as otlp_common;
use opentelemetry_proto::tonic::resource::v1 as otlp_resource;
use thread_ctx_discovery::process_context_proto::{any_value::Value, AnyValue, KeyValue, Resource};

pub fn resource(r: &Resource) -> otlp_resource::Resource {
    otlp_resource::Resource {
        attributes: r.attributes.iter().map(key_value).collect(),
        dropped_attributes_count: r.dropped_attributes_count,
        ..Default::default()
    }
}

pub fn key_value(kv: &KeyValue) -> otlp_common::KeyValue {
    otlp_common::KeyValue { key: kv.key.clone(), value: kv.value.as_ref().map(any_value), ..Default::default() }
}

pub fn any_value(v: &AnyValue) -> otlp_common::AnyValue {
    use otlp_common::any_value::Value as V;
    let value = v.value.as_ref().map(|v| match v {
        Value::StringValue(s) => V::StringValue(s.clone()),
        Value::BoolValue(b) => V::BoolValue(*b),
        Value::IntValue(i) => V::IntValue(*i),
        Value::DoubleValue(d) => V::DoubleValue(*d),
        Value::ArrayValue(a) => V::ArrayValue(otlp_common::ArrayValue { values: a.values.iter().map(any_value).collect() }),
        Value::KvlistValue(l) => V::KvlistValue(otlp_common::KeyValueList { values: l.values.iter().map(key_value).collect() }),
        Value::BytesValue(b) => V::BytesValue(b.clone()),
        Value::StringValueStrindex(i) => V::StringValueStrindex(*i),
    });
    otlp_common::AnyValue { value }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use thread_ctx_discovery::process_context_proto::{string_value, ArrayValue, KeyValueList};

    /// The conversion is the identity on the wire: both sides are the same OTLP messages.
    #[test]
    fn every_value_kind_encodes_as_the_otlp_message_does() {
        let kv = |k: &str, v: Value| KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }) };
        let r = Resource {
            attributes: vec![
                KeyValue { key: "s".into(), value: Some(string_value("shop")) },
                kv("b", Value::BoolValue(true)),
                kv("i", Value::IntValue(-7)),
                kv("d", Value::DoubleValue(0.5)),
                kv("a", Value::ArrayValue(ArrayValue { values: vec![string_value("x"), AnyValue { value: Some(Value::IntValue(1)) }] })),
                kv("l", Value::KvlistValue(KeyValueList { values: vec![kv("k", Value::BytesValue(vec![1, 2]))] })),
                kv("n", Value::StringValueStrindex(3)),
                KeyValue { key: "none".into(), value: None },
            ],
            dropped_attributes_count: 2,
        };
        assert_eq!(resource(&r).encode_to_vec(), r.encode_to_vec());
    }
}
