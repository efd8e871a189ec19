//! `thread-ctx` against our own addon in real Node: the main thread and two
//! workers each set a distinct context; `dump --json` must return exactly those,
//! through static TLS by default and through the DTV when glibc is told to keep
//! no optional static TLS surplus. Needs `node` and the built addon
//! (`npm run build` at the repository root).

mod common;
use common::*;

fn node_writer(env: &[(&str, &str)]) -> WriterProcess {
    let pkg = package_dir();
    start_writer(node_command(&test_file("fixtures/node_writer.js"), &[], &[pkg.to_str().unwrap()], env), false)
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
