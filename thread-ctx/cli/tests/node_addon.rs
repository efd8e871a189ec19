//! `thread-ctx` against our own addon in real Node: the main thread and two
//! workers each set a distinct context; `dump --json` must return exactly those,
//! through static TLS by default and through the DTV when glibc is told to keep
//! no optional static TLS surplus; and with schema `nodejs`, through each
//! thread's async-context frame, on every runtime that has one. Needs `node`
//! and the built addon (`npm run build` at the repository root; the V8 addon
//! and Node 22, 24, 26 from scripts/setup.sh).

use common::*;
use thread_ctx_test_support::process as common;

fn node_writer(env: &[(&str, &str)]) -> WriterProcess {
    node_writer_on(&NodeRuntime::ON_PATH, &[], env)
}

fn node_writer_on(runtime: &NodeRuntime, args: &[&str], env: &[(&str, &str)]) -> WriterProcess {
    let pkg = package_dir();
    start_writer(node_command_on(runtime, &test_file("fixtures/node_writer.js"), &[], &[&[pkg.to_str().unwrap()], args].concat(), env), false)
}

fn check(env: &[(&str, &str)], access_kind: &str, addon_model: &str) {
    let w = node_writer(env);
    assert_eq!(w.published.len(), 3, "main thread + 2 workers: {:?}", w.published);
    for p in &w.published {
        assert_eq!(p.extra[0], addon_model, "threadInfo().tlsModel of tid {}", p.tid);
    }
    let inspect = json_of("inspect", w.pid, 0);
    let writer = only_writer(&inspect);
    assert!(writer["path"].as_str().unwrap().ends_with("otel-thread-ctx.linux-x64-gnu.node"), "{writer:#}");
    assert_eq!(
        (writer["model"].as_str(), writer["access"]["kind"].as_str()),
        (Some("tlsdesc"), Some(access_kind)),
        "expected the addon's TLSDESC symbol with {access_kind} access, saw {writer:#}"
    );
    if access_kind == "static" {
        // The addon's own view of its static TLS offset must agree with ours.
        let ours = writer["access"]["tp_offset"].to_string();
        for p in &w.published {
            assert_eq!(p.extra[1], ours, "tid {}: threadInfo().tlsOffset vs reader's tp_offset", p.tid);
        }
    }
    let dump = json_of("dump", w.pid, 0);
    assert_dump_matches(&dump, &w.published);
    let valid = dump["threads"].as_array().unwrap().iter().filter(|t| t["state"] == "valid").count();
    assert_eq!(valid, 3, "exactly the 3 JS threads carry a context: {:#}", dump["threads"]);
    json_of("validate", w.pid, 0);
}

#[test]
fn addon_in_node_default_env_uses_static_tls() {
    check(&[], "static", "static");
}

#[test]
fn addon_in_node_without_static_surplus_walks_the_dtv() {
    check(&[FORCE_DYNAMIC_TLS], "dtv", "dynamic");
}

/// The V8 addon's object, as the maps file names it: schema nodejs's writer.
const NODEJS_WRITER: &str = "/prebuilds/v8-addon/node-abi";

/// Schema nodejs: the sampled writer is the V8 addon's `otel_thread_ctx_nodejs_v1`, whose process
/// context declares the schema and no layout integer (RFC #1861's latest text: the layout is the
/// schema's, each thread's struct carries its record slot offset), and each JS thread's row reads
/// its own span's record (the Rust addon's TLS record, unused, shows none).
#[test]
fn schema_nodejs_each_js_thread_reads_its_own_span_through_its_frame() {
    for runtime in [NodeRuntime::NODE_24, NodeRuntime::NODE_26, NodeRuntime::NODE_22_FRAME] {
        let w = node_writer_on(&runtime, &["--schema", "nodejs"], &[]);
        let on = runtime.name();
        assert_eq!(w.published.len(), 3, "{on}: main thread + 2 workers: {:?}", w.published);
        let inspect = json_of("inspect", w.pid, 0);
        let writers = inspect["writers"].as_array().unwrap();
        let nodejs: Vec<&serde_json::Value> = writers.iter().filter(|w| w["symbol"] == "otel_thread_ctx_nodejs_v1").collect();
        let [nodejs] = nodejs.as_slice() else { panic!("{on}: expected one otel_thread_ctx_nodejs_v1 writer: {writers:#?}") };
        assert!(nodejs["path"].as_str().unwrap().contains(NODEJS_WRITER), "{on}: {nodejs:#}");
        assert!(nodejs["nodejs_error"].is_null(), "{on}: layout refused: {}", nodejs["nodejs_error"]);
        assert_eq!(nodejs["nodejs_layout"]["source"], "schema_defaults", "{on}: nothing published but the schema: {nodejs:#}");
        assert_eq!(inspect["process_context"]["schema_version"], "nodejs_v1_dev", "{on}");
        let dump = json_of("dump", w.pid, 0);
        assert_dump_matches_of(&dump, &w.published, Some(NODEJS_WRITER));
        let tls_valid: Vec<_> = rows_of(&dump, Some("otel-thread-ctx.linux-x64-gnu.node")).filter(|t| t["state"] == "valid").collect();
        assert!(tls_valid.is_empty(), "{on}: the TLS record shows none while schema nodejs publishes: {tls_valid:#?}");
        json_of("validate", w.pid, 0);
    }
}

/// OTEP 4947 renames the schema `tlsdesc_v1_dev` to `tls_v1`: a service announcing the new name
/// (the manager's `tlsSchemaVersion` option) is read from outside like any other, its record
/// attributes named through its key map, by ptrace (`dump`) and eBPF (`record`).
#[test]
fn a_service_announcing_tls_v1_is_read_like_tlsdesc_v1_dev() {
    let pkg = package_dir();
    let w = start_writer(node_command(&test_file("fixtures/tls_v1_writer.js"), &[], &[pkg.to_str().unwrap(), "--spin"], &[]), false);
    let dump = json_of("dump", w.pid, 0);
    assert_eq!(dump["process_context"]["schema_version"], "tls_v1", "{:#}", dump["process_context"]);
    assert_dump_matches(&dump, &w.published);
    let row = thread_row(&dump, w.published[0].tid);
    assert_eq!(row["attrs"], serde_json::json!([{ "key_index": 0, "key": "http.route", "value": "/v1/tls" }]), "row {row:#}");
    if !ebpf_or_skip("a_service_announcing_tls_v1_is_read_like_tlsdesc_v1_dev (record)") {
        return;
    }
    let _one = one_at_a_time();
    let (tid, span) = (w.published[0].tid, w.published[0].span_id.clone());
    let mut seen = 0;
    let r = thread_ctx_until(&["record", &w.pid.to_string(), "--hz", "199", "--duration", "60s", "--format", "jsonl", "--no-user-stacks"], |line| {
        if let Some(v) = line.and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok()).filter(|v| v["tid"] == tid) {
            assert_eq!((v["state"].as_str(), v["span_id"].as_str()), (Some("valid"), Some(span.as_str())), "{v}");
            let attrs = v["attrs"].to_string();
            assert!(attrs.contains("\"http.route\"") && attrs.contains("/v1/tls"), "attributes named through the key map: {v}");
            seen += 1;
        }
        seen >= 20
    });
    assert_eq!(r.code, 0, "record: {}", r.stderr);
    assert!(seen >= 20, "20 samples of the spinning thread, saw {seen}:\n{}", r.stderr);
}
