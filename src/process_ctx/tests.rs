use super::*;

fn decode(w: &Writer) -> (Info, ProcessContext) {
    let info = w.info().expect("published");
    let base = info.header_address as *const u8;
    let (version, size, ts, ptr) = unsafe { header::read(base) }.expect("signature OTEL_CTX");
    assert_eq!(version, 2);
    assert_ne!(ts, 0, "published-at must be set after a publish");
    assert_eq!((size, ts, ptr), (info.payload_size, info.published_at, info.payload_address));
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
    w.set_resource(vec![("service.name".into(), AttrValue::Str("svc".into())), ("process.pid".into(), AttrValue::Int(42))]).unwrap();
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
    let generated = w.set_resource(vec![]).unwrap().service_instance_id;
    assert_eq!(w.set_resource(vec![]).unwrap().service_instance_id, generated);
    w.set_resource(vec![(INSTANCE_ID_KEY.into(), AttrValue::Str("mine".into()))]).unwrap();
    let (_, pc) = decode(&w);
    let res = pc.resource.clone().unwrap().attributes;
    assert_eq!(res.iter().filter(|kv| kv.key == INSTANCE_ID_KEY).count(), 1);
    assert_eq!(string_attr(&res, INSTANCE_ID_KEY), Some(&Value::StringValue("mine".into())));
}

#[test]
fn appending_keys_republishes_with_a_new_timestamp() {
    let mut w = Writer::new();
    let first = w.set_resource(vec![]).unwrap();
    assert_eq!(w.append_keys(&["http.route".into(), "http.request.method".into()]).unwrap(), vec![0, 1]);
    let (info, pc) = decode(&w);
    assert!(info.published_at > first.published_at, "published-at must change: {} then {}", first.published_at, info.published_at);
    assert_eq!(key_map(&pc), ["http.route", "http.request.method"]);
    // Known keys keep their index and do not republish.
    assert_eq!(w.append_keys(&["http.request.method".into(), "user".into()]).unwrap(), vec![1, 2]);
    assert_eq!(w.append_keys(&["user".into()]).unwrap(), vec![2]);
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
    assert!(matches!(w.set_resource(vec![("x".into(), AttrValue::Bool(true)), ("x".into(), AttrValue::Int(1))]), Err(ContextError::DuplicateKey { .. })));
    let after = w.info().unwrap();
    assert_eq!((after.published_at, after.publish_count, after.payload_address), (before.published_at, before.publish_count, before.payload_address));
    assert_eq!(w.keys(), ["a"]);
    // Exactly 256 fits.
    assert_eq!(w.append_keys(&too_many[..255]).unwrap().last(), Some(&255));
}

/// MADV_DONTFORK: a fork() child has no OTEL_CTX mapping (it is not the same service instance).
#[test]
fn fork_child_has_no_mapping() {
    let mut w = Writer::new();
    let addr = w.set_resource(vec![]).unwrap().header_address;
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let present = maps.lines().any(|l| l.starts_with(&format!("{addr:x}-")));
        unsafe { libc::_exit(if present { 1 } else { 0 }) };
    }
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the fork child still had the OTEL_CTX mapping (status {status})");
}
