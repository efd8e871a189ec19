//! Hostile `nodejs_v1_dev` targets: a real process
//! (tests/fixtures/nodejs_hostile_target.c) exporting `otel_thread_ctx_nodejs_v1`
//! with fake V8 structures, one lie per thread (a CPED pointer into nothing, a
//! cyclic and a 1000-entry chain, a non-Smi count, bucket counts of 3 and 2^30,
//! a record outside any mapping, a record_slot_offset that is not word-aligned),
//! beside honest threads: one the process context's layout leads to its record, one
//! its struct's record_slot_offset does (RFC #1861's latest text: the byte wins
//! over the layout). Read from outside through ptrace (`dump`, `validate`) and
//! eBPF (`record`): every lie is a counted miss of its own kind, nothing hangs or
//! crashes, and the honest threads still read, also when the process context
//! publishes the native wrapper's offset (the revision this package's writer
//! published before). A process that declares the schema without a layout the
//! reader can trust is refused in one line.

use thread_ctx_test_support::process as common;

use common::{c_writer, cc, ebpf_or_skip, one_at_a_time, test_file, thread_ctx_until, ReaderRun, WriterProcess};
use serde_json::Value;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A reader that takes longer than this on the fixture is hung.
const LIMIT: Duration = Duration::from_secs(60);
/// eBPF samples per lying thread before the states are judged.
const MIN_SAMPLES_EACH: usize = 15;

/// (thread name, dump state, walk miss, sampler state) for each thread of the fixture.
const EXPECTED: [(&str, &str, Option<&str>, &str); 11] = [
    ("honest", "valid", None, "valid"),
    ("slot-byte", "valid", None, "valid"),
    ("no-store", "no_context", Some("no_store"), "nodejs_no_store"),
    ("cped-lie", "error", Some("frame_fault"), "nodejs_frame_fault"),
    ("cycle", "malformed", Some("chain_too_long"), "nodejs_chain_too_long"),
    ("long-chain", "malformed", Some("chain_too_long"), "nodejs_chain_too_long"),
    ("rehash", "malformed", Some("bad_frame"), "nodejs_bad_frame"),
    ("buckets-3", "malformed", Some("bad_frame"), "nodejs_bad_frame"),
    ("buckets-huge", "malformed", Some("bad_frame"), "nodejs_bad_frame"),
    // The walk ends at a record address; reading the record there faults.
    ("rec-outside", "error", None, "record_fault"),
    ("slot-odd", "malformed", Some("bad_frame"), "nodejs_bad_frame"),
];
/// The threads that read, and the span id each shows.
const HONEST: [(&str, &str); 2] = [("honest", "a0a1a2a3a4a5a6a7"), ("slot-byte", "b0b1b2b3b4b5b6b7")];

struct Built {
    exe: PathBuf,
    lib: PathBuf,
}

fn built() -> &'static Built {
    static B: OnceLock<Built> = OnceLock::new();
    B.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("thread-ctx-nodejs-hostile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let src = test_file("fixtures/nodejs_hostile_target.c");
        let src = src.to_str().unwrap();
        let (exe, lib) = (dir.join("node-hostile-frames"), dir.join("libnodejs_struct.so"));
        // TLSDESC, as Datadog's addon and the schema use.
        cc(&["-O1", "-Wall", "-shared", "-fPIC", "-mtls-dialect=gnu2", "-DNODEJS_STRUCT_LIB", "-o", lib.to_str().unwrap(), src]);
        cc(&["-O1", "-Wall", "-o", exe.to_str().unwrap(), src, "-ldl", "-lpthread"]);
        Built { exe, lib }
    })
}

fn target(extra: &[&str]) -> WriterProcess {
    let b = built();
    let mut args = vec!["--lib", b.lib.to_str().unwrap()];
    args.extend_from_slice(extra);
    c_writer(&b.exe, &args, &[])
}

/// `thread-ctx ARGS`, failing instead of hanging the suite when it does not exit within LIMIT.
fn bounded(args: &[&str]) -> ReaderRun {
    let started = Instant::now();
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_thread-ctx")).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("running thread-ctx");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`thread-ctx {}` did not finish within {LIMIT:?} on the hostile nodejs target", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let run = ReaderRun { code: status.code().unwrap_or(-1), stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
    assert!(status.code().is_some() && !run.stderr.contains("panicked"), "`thread-ctx {}` crashed ({status}):\n{}", args.join(" "), run.stderr);
    run
}

fn names(w: &WriterProcess) -> HashMap<i64, &str> {
    w.published.iter().zip(&w.names).map(|(p, n)| (p.tid, n.as_str())).collect()
}

#[test]
fn dump_gives_each_lie_its_own_miss_and_reads_the_honest_thread() {
    let w = target(&[]);
    let r = bounded(&["dump", "--json", &w.pid.to_string()]);
    assert_eq!(r.code, 0, "dump: {}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    common::fail_clearly_if_ptrace_denied(&v);
    let by_name = names(&w);
    let rows = v["threads"].as_array().unwrap();
    for (name, state, miss, _) in EXPECTED {
        let tid = by_name.iter().find(|(_, n)| **n == name).map(|(t, _)| *t).unwrap();
        let row = rows.iter().find(|t| t["tid"] == tid).unwrap_or_else(|| panic!("no row for {name}"));
        assert_eq!(row["state"], state, "{name}: {row:#}");
        assert_eq!(row["nodejs_miss"].as_str(), miss, "{name}: {row:#}");
        assert!(!row["problems"].as_array().unwrap().is_empty() || state == "valid", "{name} says why: {row:#}");
    }
    common::assert_dump_matches(&v, &honest_threads(&w));
    // validate judges the lies malformed (exit 1), in time.
    let r = bounded(&["validate", &w.pid.to_string()]);
    assert_eq!(r.code, 1, "validate should find the lies malformed:\n{}\n{}", r.stdout, r.stderr);
}

#[test]
fn the_sampler_counts_each_lie_as_its_own_state() {
    if !ebpf_or_skip("the_sampler_counts_each_lie_as_its_own_state") {
        return;
    }
    let _one = one_at_a_time();
    let w = target(&["--spin"]);
    let by_name = names(&w);
    let pid = w.pid.to_string();
    let mut states: HashMap<&str, HashMap<String, usize>> = HashMap::new();
    let enough = |s: &HashMap<&str, HashMap<String, usize>>| {
        EXPECTED.iter().all(|(name, ..)| s.get(name).is_some_and(|m| m.values().sum::<usize>() >= MIN_SAMPLES_EACH))
    };
    let r = thread_ctx_until(&["record", &pid, "--hz", "199", "--duration", "60s", "--format", "jsonl", "--no-user-stacks"], |line| {
        if let Some(v) = line.and_then(|l| serde_json::from_str::<Value>(l).ok()) {
            if let Some(name) = v["tid"].as_i64().and_then(|t| by_name.get(&t)) {
                *states.entry(name).or_default().entry(v["state"].as_str().unwrap_or("?").to_string()).or_default() += 1;
                if let Some((_, span)) = HONEST.iter().find(|(n, _)| n == name) {
                    assert_eq!(v["span_id"], *span, "{name}: {v}");
                }
            }
        }
        enough(&states)
    });
    assert_eq!(r.code, 0, "record: {}", r.stderr);
    assert!(enough(&states), "each thread needs {MIN_SAMPLES_EACH} samples: {states:?}\n{}", r.stderr);
    for (name, _, _, state) in EXPECTED {
        let seen = &states[name];
        assert_eq!(seen.keys().collect::<Vec<_>>(), vec![state], "{name}: every sample should read as {state}: {seen:?}");
    }
    // The summary names the new states beside the others.
    let r = bounded(&["record", &pid, "--hz", "99", "--duration", "2s", "--no-user-stacks"]);
    assert_eq!(r.code, 0, "record summary: {}", r.stderr);
    let because = r.stdout.lines().find(|l| l.contains("no span because")).unwrap_or_else(|| panic!("no 'no span because' line:\n{}", r.stdout));
    for state in ["nodejs_no_store", "nodejs_frame_fault", "nodejs_chain_too_long", "nodejs_bad_frame", "record_fault"] {
        assert!(because.contains(state), "{state} missing from {because:?}");
    }
}

fn honest_threads(w: &WriterProcess) -> Vec<common::Published> {
    HONEST.iter().map(|(name, _)| w.published[w.names.iter().position(|n| n == name).unwrap()].clone()).collect()
}

/// The revision this package's writer published before RFC #1861's latest text: the process
/// context names the offset of the record pointer in the native wrapper the field points at.
/// Both honest threads read, through ptrace and eBPF: the layout's thread through the wrapper,
/// the byte's thread with the field as the record.
#[test]
fn a_native_wrapper_revision_and_the_byte_both_read() {
    let w = target(&["--native-wrap", "--spin"]);
    let pid = w.pid.to_string();
    let r = bounded(&["dump", "--json", &pid]);
    assert_eq!(r.code, 0, "dump: {}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    common::fail_clearly_if_ptrace_denied(&v);
    common::assert_dump_matches(&v, &honest_threads(&w));
    if !ebpf_or_skip("a_native_wrapper_revision_and_the_byte_both_read (record)") {
        return;
    }
    let _one = one_at_a_time();
    let by_name = names(&w);
    let mut valid: HashMap<&str, usize> = HashMap::new();
    let r = thread_ctx_until(&["record", &pid, "--hz", "199", "--duration", "60s", "--format", "jsonl", "--no-user-stacks"], |line| {
        if let Some(v) = line.and_then(|l| serde_json::from_str::<Value>(l).ok()) {
            if let Some(&(name, span)) = v["tid"].as_i64().and_then(|t| by_name.get(&t)).and_then(|n| HONEST.iter().find(|(h, _)| h == n)) {
                assert_eq!((v["state"].as_str(), v["span_id"].as_str()), (Some("valid"), Some(span)), "{name}: {v}");
                *valid.entry(name).or_default() += 1;
            }
        }
        HONEST.iter().all(|(n, _)| valid.get(n).is_some_and(|&c| c >= MIN_SAMPLES_EACH))
    });
    assert_eq!(r.code, 0, "record: {}", r.stderr);
    assert!(
        HONEST.iter().all(|(n, _)| valid.get(n).is_some_and(|&c| c >= MIN_SAMPLES_EACH)),
        "{valid:?}
{}",
        r.stderr
    );
}

#[test]
fn a_schema_without_a_trusted_layout_is_refused_in_one_line() {
    let w = target(&["--no-layout"]);
    let pid = w.pid.to_string();
    let inspect = bounded(&["inspect", &pid]);
    let refusal = inspect.stdout.lines().filter(|l| l.contains("schema: NOT READ")).collect::<Vec<_>>();
    assert_eq!(refusal.len(), 1, "inspect:\n{}", inspect.stdout);
    assert!(refusal[0].contains("no known nodejs_v1_dev layout") && refusal[0].contains("V8 version could not be read"), "{}", refusal[0]);
    if !ebpf_or_skip("a_schema_without_a_trusted_layout_is_refused_in_one_line (record)") {
        return;
    }
    let r = bounded(&["record", &pid, "--duration", "1s"]);
    assert_ne!(r.code, 0, "record must refuse:\n{}", r.stdout);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line, saw:\n{}", r.stderr);
    assert!(lines[0].contains("otel_thread_ctx_nodejs_v1") && lines[0].contains("refusing to walk"), "{}", lines[0]);
}
