//! `thread-ctx` against C writers using each standard TLS access model: the
//! model classified, static vs DTV access, the exact ids per thread, and the
//! `validate` exit codes. Needs `cc` (gcc + libc6-dev) and ptrace rights (root).

use common::*;
use thread_ctx_test_support::process as common;

fn check_model(w: &WriterProcess, model: &str, access_kind: &str) {
    let inspect = json_of("inspect", w.pid, 0);
    let writer = only_writer(&inspect);
    assert_eq!(
        (writer["model"].as_str(), writer["access"]["kind"].as_str()),
        (Some(model), Some(access_kind)),
        "expected model {model} with {access_kind} access, saw {writer:#}"
    );
    let dump = json_of("dump", w.pid, 0);
    assert_dump_matches(&dump, &w.published);
    assert_eq!(dump["verdict"], "ok");
    // The idle thread never touched the variable, the cleared one has valid = 0.
    for (name, why) in [("fx-idle", if access_kind == "dtv" { "not allocated" } else { "NULL" }), ("fx-cleared", "valid = 0")] {
        let t = dump["threads"].as_array().unwrap().iter().find(|t| t["name"] == name).expect(name);
        assert_eq!(t["state"], "no_context", "{name}: expected no_context, saw {t:#}");
        assert!(t["problems"].to_string().contains(why), "{name}: expected a note containing {why:?}, saw {t:#}");
    }
    assert_eq!(w.published.len(), 3);
    let v = thread_ctx(&["validate", &w.pid.to_string()]);
    assert_eq!(v.code, 0, "validate of a well-formed writer: expected exit 0, saw {}\n{}{}", v.code, v.stdout, v.stderr);
}

#[test]
fn tlsdesc_in_dlopened_library_uses_static_tls() {
    let f = fixtures();
    let w = c_writer(&f.writer_dl, &["--dlopen", f.lib_tlsdesc.to_str().unwrap(), "--seed", "17"], &[]);
    check_model(&w, "tlsdesc", "static");
}

#[test]
fn tlsdesc_forced_into_dynamic_tls_walks_the_dtv() {
    let f = fixtures();
    let w = c_writer(&f.writer_dl, &["--dlopen", f.lib_tlsdesc.to_str().unwrap(), "--seed", "18"], &[FORCE_DYNAMIC_TLS]);
    check_model(&w, "tlsdesc", "dtv");
}

#[test]
fn general_dynamic_in_dlopened_library_walks_the_dtv() {
    let f = fixtures();
    let w = c_writer(&f.writer_dl, &["--dlopen", f.lib_gd.to_str().unwrap(), "--seed", "19"], &[]);
    check_model(&w, "general_dynamic", "dtv");
}

#[test]
fn initial_exec_in_linked_library_uses_static_tls() {
    let w = c_writer(&fixtures().writer_ie, &["--seed", "20"], &[]);
    check_model(&w, "initial_exec", "static");
}

#[test]
fn local_exec_in_executable_uses_static_tls() {
    let w = c_writer(&fixtures().writer_le, &["--seed", "21"], &[]);
    check_model(&w, "local_exec", "static");
}

#[test]
fn validate_exits_1_on_valid_7() {
    let f = fixtures();
    let w = c_writer(&f.writer_dl, &["--dlopen", f.lib_tlsdesc.to_str().unwrap(), "--bad-valid"], &[]);
    let v = json_of("validate", w.pid, 1);
    assert_eq!(v["verdict"], "malformed");
    let bad = thread_row(&v, w.published[1].tid);
    assert_eq!(bad["state"], "malformed", "{bad:#}");
    assert!(bad["problems"].to_string().contains("valid = 7"), "expected a 'valid = 7' problem, saw {bad:#}");
    // The others still read fine, and dump itself does not fail.
    assert_eq!(thread_row(&v, w.published[0].tid)["state"], "valid");
    assert_eq!(json_of("dump", w.pid, 0)["verdict"], "malformed");
}

#[test]
fn validate_exits_1_on_attrs_size_700() {
    let w = c_writer(&fixtures().writer_le, &["--bad-attrs", "--attrs"], &[]);
    let v = json_of("validate", w.pid, 1);
    let bad = thread_row(&v, w.published[2].tid);
    assert_eq!(bad["state"], "malformed", "{bad:#}");
    assert!(bad["problems"].to_string().contains("attrs-data size = 700"), "{bad:#}");
    let text = thread_ctx(&["validate", &w.pid.to_string()]);
    assert_eq!(text.code, 1);
    assert!(text.stdout.contains("MALFORMED") && text.stdout.contains("verdict: malformed"), "{}", text.stdout);
}

#[test]
fn attrs_without_key_map_keep_their_indexes() {
    let w = c_writer(&fixtures().writer_ie, &["--attrs"], &[]);
    let v = json_of("dump", w.pid, 0);
    let t = thread_row(&v, w.published[2].tid);
    let attrs: Vec<(u64, String)> =
        t["attrs"].as_array().unwrap().iter().map(|a| (a["key_index"].as_u64().unwrap(), a["value"].as_str().unwrap().to_string())).collect();
    assert_eq!(attrs, vec![(0, "/route/2/café".into()), (1, "POST".into()), (9, "out-of-map".into())]);
    assert!(t["attrs"][0]["key"].is_null(), "no process context, so no key names: {t:#}");
}

#[test]
fn bad_pid_is_a_clear_error() {
    let r = thread_ctx(&["dump", "999999999"]);
    assert_eq!(r.code, 6, "exit 6: no such process; {}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("no process 999999999"), "stderr: {}", r.stderr);
    let r = thread_ctx(&["dump", "abc"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("invalid value 'abc' for '<PID>'"), "stderr: {}", r.stderr);
}
