use super::*;
use limits::DropReason;

fn decode(w: &Writer) -> (Info, ProcessContext) {
    let info = w.info().expect("published");
    let base = info.header_address as *const u8;
    // SAFETY: the header of a published mapping (at least a page).
    let (version, size, ts, ptr) = unsafe { header::read(base) }.expect("signature OTEL_CTX");
    assert_eq!(version, 2);
    assert_ne!(ts, 0, "published-at must be set after a publish");
    assert_eq!((size, ts, ptr), (info.payload_size, info.published_at, info.payload_address));
    // SAFETY: the published payload, kept alive by the writer `w` borrowed here.
    let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, size as usize) };
    (info, ProcessContext::decode(bytes).expect("payload parses"))
}

fn string_attr<'a>(kvs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    kvs.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|v| v.value.as_ref())
}

fn key_map(pc: &ProcessContext) -> Vec<String> {
    match string_attr(&pc.attributes, KEY_MAP_KEY) {
        Some(Value::ArrayValue(a)) => a
            .values
            .iter()
            .map(|v| match &v.value {
                Some(Value::StringValue(s)) => s.clone(),
                other => panic!("key map entry should be a string, got {other:?}"),
            })
            .collect(),
        other => panic!("expected {KEY_MAP_KEY} as an array, got {other:?}"),
    }
}

#[test]
fn publishes_resource_schema_version_and_instance_id() {
    let mut w = Writer::new();
    w.set_resource(vec![("service.name".into(), AttrValue::Str("svc".into())), ("process.pid".into(), AttrValue::Int(42))], Origin::Explicit, 0)
        .unwrap();
    let (info, pc) = decode(&w);
    let res = pc.resource.clone().unwrap().attributes;
    assert_eq!(string_attr(&res, "service.name"), Some(&Value::StringValue("svc".into())));
    assert_eq!(string_attr(&res, "process.pid"), Some(&Value::IntValue(42)));
    assert_eq!(string_attr(&res, INSTANCE_ID_KEY), Some(&Value::StringValue(info.service_instance_id.clone())));
    assert_eq!(info.service_instance_id.len(), 36);
    assert_eq!(string_attr(&pc.attributes, SCHEMA_VERSION_KEY), Some(&Value::StringValue("tlsdesc_v1_dev".into())));
    assert!(key_map(&pc).is_empty());
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps.lines().find(|l| l.starts_with(&format!("{:x}-", info.header_address))).expect("mapping listed in maps");
    assert!(line.contains("OTEL_CTX"), "the mapping's maps line should name OTEL_CTX, got {line:?}");
}

#[test]
fn given_instance_id_is_kept_and_generated_one_is_stable() {
    let mut w = Writer::new();
    let generated = w.set_resource(vec![], Origin::Explicit, 0).unwrap().info.service_instance_id;
    assert_eq!(w.set_resource(vec![], Origin::Explicit, 0).unwrap().info.service_instance_id, generated);
    w.set_resource(vec![(INSTANCE_ID_KEY.into(), AttrValue::Str("mine".into()))], Origin::Explicit, 0).unwrap();
    let (_, pc) = decode(&w);
    let res = pc.resource.clone().unwrap().attributes;
    assert_eq!(res.iter().filter(|kv| kv.key == INSTANCE_ID_KEY).count(), 1);
    assert_eq!(string_attr(&res, INSTANCE_ID_KEY), Some(&Value::StringValue("mine".into())));
}

#[test]
fn appending_keys_republishes_with_a_new_timestamp() {
    let mut w = Writer::new();
    let first = w.set_resource(vec![], Origin::Explicit, 0).unwrap().info;
    assert_eq!(w.append_keys(&["http.route".into(), "http.request.method".into()]).unwrap().0, vec![0, 1]);
    let (info, pc) = decode(&w);
    assert!(info.published_at > first.published_at, "published-at must change: {} then {}", first.published_at, info.published_at);
    assert_eq!(key_map(&pc), ["http.route", "http.request.method"]);
    // Known keys keep their index and do not republish.
    assert_eq!(w.append_keys(&["http.request.method".into(), "user".into()]).unwrap().0, vec![1, 2]);
    assert_eq!(w.append_keys(&["user".into()]).unwrap().0, vec![2]);
    assert_eq!(w.info().unwrap().publish_count, 3);
    assert_eq!(key_map(&decode(&w).1), ["http.route", "http.request.method", "user"]);
}

#[test]
fn bad_keys_change_nothing() {
    let mut w = Writer::new();
    w.append_keys(&["a".into()]).unwrap();
    let before = w.info().unwrap();
    let too_many: Vec<String> = (0..256).map(|i| format!("k{i}")).collect();
    assert_eq!(w.append_keys(&too_many), Err(ContextError::TooManyKeys { got: 257, existing: 1, added: 256 }));
    assert_eq!(w.append_keys(&["b".into(), "b".into()]), Err(ContextError::DuplicateKey { arg: "keys", key: "b".into() }));
    assert_eq!(w.append_keys(&["".into()]), Err(ContextError::EmptyKey { arg: "keys", index: 0 }));
    assert!(matches!(
        w.set_resource(vec![("x".into(), AttrValue::Bool(true)), ("x".into(), AttrValue::Int(1))], Origin::Explicit, 0),
        Err(ContextError::DuplicateKey { .. })
    ));
    let after = w.info().unwrap();
    assert_eq!((after.published_at, after.publish_count, after.payload_address), (before.published_at, before.publish_count, before.payload_address));
    assert_eq!(w.keys(), ["a"]);
    // Exactly 256 fits.
    assert_eq!(w.append_keys(&too_many[..255]).unwrap().0.last(), Some(&255));
}

/// MADV_DONTFORK: a fork() child has no OTEL_CTX mapping (it is not the same service instance).
#[test]
fn fork_child_has_no_mapping() {
    let mut w = Writer::new();
    let addr = w.set_resource(vec![], Origin::Explicit, 0).unwrap().info.header_address;
    // SAFETY: the child only reads /proc and calls _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let present = maps.lines().any(|l| l.starts_with(&format!("{addr:x}-")));
        // SAFETY: _exit has no preconditions.
        unsafe { libc::_exit(if present { 1 } else { 0 }) };
    }
    let mut status = 0;
    // SAFETY: valid out pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the fork child still had the OTEL_CTX mapping (status {status})");
}

fn strings(n: usize, len: usize) -> Vec<(String, AttrValue)> {
    (0..n).map(|i| (format!("attr.{i:03}"), AttrValue::Str("v".repeat(len)))).collect()
}

/// Whatever the resource, the payload stays within what every reader accepts; identity
/// attributes are kept first, and what was left out is reported with its reason.
#[test]
fn payload_limits_drop_whole_attributes_and_report_them() {
    let mut w = Writer::new();
    let mut attrs = strings(10, 3000); // 30 KB of values: over the 16,383-byte budget
    attrs.push(("long".into(), AttrValue::Str("x".repeat(limits::MAX_STRING_LEN + 1))));
    attrs.push(("tags".into(), AttrValue::Strings(vec!["ok".into(), "y".repeat(limits::MAX_STRING_LEN + 1)])));
    attrs.push(("service.name".into(), AttrValue::Str("svc".into()))); // last given, kept first
    let published = w.set_resource(attrs, Origin::Sdk, 2).unwrap();
    let (info, pc) = decode(&w);
    assert!(info.payload_size as usize <= limits::MAX_PAYLOAD_LEN, "payload of {} bytes", info.payload_size);
    let res = pc.resource.unwrap().attributes;
    assert_eq!(res[0].key, "service.name", "identity attributes come first");
    assert!(res.iter().any(|kv| kv.key == INSTANCE_ID_KEY));
    let reasons = |r: DropReason| published.dropped.iter().filter(|(_, why)| *why == r).map(|(k, _)| k.as_str()).collect::<Vec<_>>();
    assert_eq!(reasons(DropReason::TooLong), ["long", "tags"]);
    let over = reasons(DropReason::OverBudget);
    assert!(!over.is_empty() && over.len() < 10, "some 3000-byte values fit, not all: {over:?}");
    assert_eq!(res.len() + published.dropped.len(), 13 + 1, "every attribute kept or reported (+ the instance id)");
    assert_eq!((info.origin, info.dropped_attribute_count), (Some(Origin::Sdk), 2 + published.dropped.len()));
}

#[test]
fn at_most_128_resource_attributes() {
    let mut w = Writer::new();
    let published = w.set_resource(strings(200, 1), Origin::Explicit, 0).unwrap();
    let res = decode(&w).1.resource.unwrap().attributes;
    assert_eq!(res.len(), limits::MAX_RESOURCE_ATTRIBUTES);
    assert_eq!(res[0].key, INSTANCE_ID_KEY, "the generated instance id is an identity attribute, kept");
    assert_eq!(published.dropped.len(), 200 + 1 - limits::MAX_RESOURCE_ATTRIBUTES);
    assert!(published.dropped.iter().all(|(_, r)| *r == DropReason::TooMany));
}

/// The key map takes part of the same payload: a longer map refits the resource.
#[test]
fn key_map_limits_and_refit() {
    let mut w = Writer::new();
    let before = w.set_resource(strings(5, 3000), Origin::Explicit, 0).unwrap();
    assert!(before.dropped.is_empty(), "15 KB of values fit beside an empty key map");
    assert_eq!(w.append_keys(&["ok".into(), "k".repeat(limits::MAX_KEY_LEN + 1)]), Err(ContextError::KeyTooLong { index: 1, len: 256 }));
    let long_keys: Vec<String> = (0..17).map(|i| format!("{i:03}").repeat(85)).collect(); // 17 x 255 bytes
    assert_eq!(w.append_keys(&long_keys), Err(ContextError::KeyMapTooLong { got: 17 * 255 }));
    let (_, dropped) = w.append_keys(&long_keys[..16]).unwrap();
    // ~4.2 KB of key map beside ~15.2 KB of resource: the last attributes no longer fit.
    assert_eq!(
        dropped.iter().map(|(k, r)| (k.as_str(), *r)).collect::<Vec<_>>(),
        [("attr.003", DropReason::OverBudget), ("attr.004", DropReason::OverBudget)]
    );
    let (info, pc) = decode(&w);
    assert!(info.payload_size as usize <= limits::MAX_PAYLOAD_LEN);
    assert_eq!(key_map(&pc).len(), 16, "the key map is never cut");
    assert_eq!(pc.resource.unwrap().attributes.len(), 4, "attr.000-002 and the instance id");
    assert_eq!(info.dropped_attribute_count, 2);
}

/// V8's heap sampling interval rides with the process context, outside the resource and the
/// `threadlocal.*` keys; the first interval stays, and one set before any publish goes out with it.
#[test]
fn heap_sampling_interval_is_published_once_per_process() {
    let mut w = Writer::new();
    assert_eq!(w.set_heap_sampling_interval(1 << 19), Ok(1 << 19));
    assert!(w.info().is_none(), "nothing is published for the interval alone");
    w.set_resource(vec![("service.name".into(), AttrValue::Str("svc".into()))], Origin::Explicit, 0).unwrap();
    let (_, pc) = decode(&w);
    assert_eq!(string_attr(&pc.attributes, HEAP_SAMPLING_INTERVAL_KEY), Some(&Value::IntValue(1 << 19)));
    assert_eq!(string_attr(&pc.resource.unwrap().attributes, HEAP_SAMPLING_INTERVAL_KEY), None);
    assert_eq!(w.set_heap_sampling_interval(4096), Ok(1 << 19), "a second interval does not replace the first");
    let mut later = Writer::new();
    later.set_resource(vec![], Origin::Environment, 0).unwrap();
    let count = later.info().unwrap().publish_count;
    assert_eq!(later.set_heap_sampling_interval(65536), Ok(65536));
    assert_eq!(later.info().unwrap().publish_count, count + 1, "republished with the interval");
    assert_eq!(string_attr(&decode(&later).1.attributes, HEAP_SAMPLING_INTERVAL_KEY), Some(&Value::IntValue(65536)));
}

#[test]
fn each_schema_publishes_its_version_and_nothing_else_and_switches_back() {
    let mut w = Writer::new();
    assert!(w.set_schema(Schema::NodeJs).unwrap().is_none(), "nothing published yet");
    w.set_resource(vec![], Origin::Explicit, 0).unwrap();
    let (info, pc) = decode(&w);
    assert_eq!(info.schema.version(), "nodejs_v1_dev");
    assert_eq!(string_attr(&pc.attributes, SCHEMA_VERSION_KEY), Some(&Value::StringValue("nodejs_v1_dev".into())));
    // RFC #1861's latest text: the layout is the schema's, the record slot offset is in the TLS struct.
    let keys: Vec<&str> = pc.attributes.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, [SCHEMA_VERSION_KEY, KEY_MAP_KEY], "no threadlocal.* layout integer");
    let before = info.publish_count;
    let info = w.set_schema(Schema::TlsV1).unwrap().expect("republished");
    assert_eq!(info.publish_count, before + 1);
    assert_eq!(string_attr(&decode(&w).1.attributes, SCHEMA_VERSION_KEY), Some(&Value::StringValue("tls_v1".into())));
    w.set_schema(Schema::TlsdescV1Dev).unwrap();
    assert_eq!(string_attr(&decode(&w).1.attributes, SCHEMA_VERSION_KEY), Some(&Value::StringValue("tlsdesc_v1_dev".into())));
    let count = w.info().unwrap().publish_count;
    assert_eq!(w.set_schema(Schema::TlsdescV1Dev).unwrap().unwrap().publish_count, count, "an unchanged schema is not republished");
    assert_eq!(Schema::of_version("tls_v1"), Some(Schema::TlsV1));
    assert_eq!(Schema::of_version("nodejs_v1"), None);
}
