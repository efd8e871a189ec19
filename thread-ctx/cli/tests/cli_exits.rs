//! Every exit code of `thread-ctx` and the message that comes with it, from
//! the real binary: usage errors (2), a reader failure (3), a process without
//! otel_thread_ctx_v1 (4), no permission (5), a process that is gone (6),
//! `--help` listing them, and `record TID` of a thread that is not its
//! process's main thread (records that thread only, and says whose it is).
//! The eBPF ones skip visibly when not root.

use thread_ctx_test_support::process as common;
use thread_ctx_test_support::sampler as sampler_common;

use common::*;
use sampler_common::spinners;
use std::process::{Command, Stdio};

/// Runs thread-ctx as uid/gid 65534 (nobody): a reader without rights.
fn thread_ctx_as_nobody(args: &[&str]) -> ReaderRun {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_thread-ctx"));
    cmd.args(args);
    as_nobody(&mut cmd);
    let out = cmd.output().unwrap_or_else(|e| panic!("could not run thread-ctx as uid 65534 (this test needs root to drop privileges): {e}"));
    ReaderRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A pid no process has: a child that exited and was reaped.
fn gone_pid() -> i32 {
    let mut c = Command::new("true").spawn().expect("spawning true");
    let pid = c.id() as i32;
    c.wait().unwrap();
    pid
}

fn assert_exit(r: &ReaderRun, code: i32, what: &str) {
    assert_eq!(r.code, code, "{what}: expected exit {code}, saw {}\nstdout:\n{}\nstderr:\n{}", r.code, r.stdout, r.stderr);
}

#[test]
fn usage_errors_exit_2_and_name_the_flag_once() {
    let r = thread_ctx(&["record", "1", "--duration", "5x"]);
    assert_exit(&r, 2, "record --duration 5x");
    assert!(
        r.stderr.contains("'--duration <DURATION>'") && r.stderr.contains("unknown unit \"x\": expected a number and a unit (ms, s, m or h)"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.matches("5x").count(), 1, "the value is named once: {}", r.stderr);
    let r = thread_ctx(&["record", "1", "--duration", "soon"]);
    assert_exit(&r, 2, "record --duration soon");
    assert!(r.stderr.contains("no number: expected a number and a unit"), "{}", r.stderr);
    // Hours parse: this fails later, for the process, not for the duration.
    let gone = gone_pid();
    let r = thread_ctx(&["record", &gone.to_string(), "--duration", "1.5h"]);
    assert_exit(&r, 6, "record --duration 1.5h of a gone pid");
    let r = thread_ctx(&["record", "1", "--format", "summary", "--frames"]);
    assert_exit(&r, 2, "--frames without jsonl");
    assert!(r.stderr.contains("--frames: "), "{}", r.stderr);
    let r = thread_ctx(&["record", "1", "--by", " "]);
    assert_exit(&r, 2, "--by blank");
    assert!(r.stderr.contains("expected span, trace or a record attribute key"), "{}", r.stderr);
    let r = thread_ctx(&["record", "1", "--flamegraph", "/nonexistent-dir/x.svg"]);
    assert_exit(&r, 2, "--flamegraph into a missing directory");
    assert!(r.stderr.contains("--flamegraph: directory /nonexistent-dir does not exist"), "{}", r.stderr);
    let r = thread_ctx(&["flamegraph", "/nonexistent-dir/p.pb.gz", "-o", "/tmp/x.svg"]);
    assert_exit(&r, 2, "flamegraph of a missing profile");
    assert!(r.stderr.contains("PROFILE: /nonexistent-dir/p.pb.gz does not exist"), "{}", r.stderr);
    assert_eq!(r.stderr.matches("/nonexistent-dir/p.pb.gz").count(), 1, "the path is named once: {}", r.stderr);
    let r = thread_ctx(&["dump", "0"]);
    assert_exit(&r, 2, "dump 0");
}

#[test]
fn help_lists_every_exit_code() {
    for args in [&["--help"][..], &["record", "--help"], &["dump", "--help"]] {
        let r = thread_ctx(args);
        assert_exit(&r, 0, &args.join(" "));
        assert!(r.stdout.contains("Exit codes:"), "{}", r.stdout);
        for code in [
            "0  success",
            "1  validate",
            "2  usage",
            "3  the reader failed",
            "4  the target has no otel_thread_ctx_v1",
            "5  no permission",
            "6  the target process does not exist",
        ] {
            assert!(r.stdout.contains(code), "`thread-ctx {}` lacks {code:?}:\n{}", args.join(" "), r.stdout);
        }
    }
}

#[test]
fn an_unreadable_profile_is_a_reader_failure_3_naming_the_file_once() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-exits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.pb.gz");
    std::fs::write(&garbage, b"\x1f\x8bnot gzip at all").unwrap();
    let r = thread_ctx(&["flamegraph", garbage.to_str().unwrap(), "-o", dir.join("x.svg").to_str().unwrap()]);
    assert_exit(&r, 3, "flamegraph of a corrupt file");
    assert!(r.stderr.contains("bad gzip data"), "{}", r.stderr);
    assert_eq!(r.stderr.matches(garbage.to_str().unwrap()).count(), 1, "the path is named once: {}", r.stderr);
}

#[test]
fn a_process_without_the_symbol_exits_4_with_a_hint_to_load_the_package() {
    let mut sleeper = Command::new("sleep").arg("60").stdout(Stdio::null()).spawn().expect("spawning sleep");
    let pid = sleeper.id().to_string();
    for sub in ["inspect", "dump", "validate", "record"] {
        let r = thread_ctx(&[sub, &pid]);
        assert_exit(&r, 4, &format!("{sub} of sleep"));
        assert!(r.stderr.contains(&format!("process {pid} (sleep) has no otel_thread_ctx_v1")), "{sub}: {}", r.stderr);
        assert!(r.stderr.contains("require('otel-thread-ctx')") && r.stderr.contains("register()"), "{sub}: {}", r.stderr);
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
fn a_process_that_is_gone_exits_6() {
    let pid = gone_pid().to_string();
    for sub in ["inspect", "dump", "validate", "record"] {
        let r = thread_ctx(&[sub, &pid]);
        assert_exit(&r, 6, &format!("{sub} of a gone pid"));
        assert!(r.stderr.contains(&format!("no process {pid} (expected the pid of a running process)")), "{sub}: {}", r.stderr);
    }
}

#[test]
fn dump_without_permission_exits_5_and_says_who_may_read() {
    if !can_run("dump_without_permission_exits_5_and_says_who_may_read", (!is_root()).then_some("it needs root to drop to another user")) {
        return;
    }
    let w = c_writer(&fixtures().writer_le, &[], &[]);
    for sub in ["dump", "inspect"] {
        let r = thread_ctx_as_nobody(&[sub, &w.pid.to_string()]);
        assert_exit(&r, 5, &format!("{sub} as nobody of a root process"));
        assert!(r.stderr.contains(&format!("cannot read /proc/{}/maps", w.pid)), "{sub}: {}", r.stderr);
        assert!(r.stderr.contains("run thread-ctx as root (sudo) or as the target's user (uid 0)"), "{sub}: {}", r.stderr);
    }
}

#[test]
fn record_without_ebpf_rights_exits_5() {
    if !can_run("record_without_ebpf_rights_exits_5", (!is_root()).then_some("it needs root to drop to another user")) {
        return;
    }
    // A writer of the same unprivileged user: discovery works, loading eBPF does not.
    let mut cmd = Command::new(&fixtures().writer_le);
    as_nobody(&mut cmd);
    let w = start_writer(cmd, true);
    let r = thread_ctx_as_nobody(&["record", &w.pid.to_string(), "--duration", "1s"]);
    assert_exit(&r, 5, "record as nobody");
    assert!(r.stderr.contains("eBPF needs root"), "{}", r.stderr);
}

#[test]
fn record_of_a_thread_id_records_that_thread_only() {
    let test = "record_of_a_thread_id_records_that_thread_only";
    if !ebpf_or_skip(test) {
        return;
    }
    let _serial = one_at_a_time();
    let w = c_writer(&spinners().spinner_le, &[], &[]);
    let thread = w.published.iter().find(|p| p.tid != w.pid as i64).expect("a spinning thread other than main").tid;
    // Loop until the thread was sampled (it spins, but the machine may be busy), at most 5 recordings.
    for attempt in 1..=5 {
        let r = thread_ctx(&["record", &thread.to_string(), "--hz", "199", "--duration", "1s", "--format", "jsonl"]);
        assert_exit(&r, 0, "record TID");
        assert!(r.stderr.contains(&format!("{thread} is a thread of process {}: recording that thread only", w.pid)), "{}", r.stderr);
        let tids: Vec<i64> = r.stdout.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["tid"].as_i64().unwrap()).collect();
        assert!(
            tids.iter().all(|t| *t == thread),
            "only thread {thread} is recorded, saw tids {:?}",
            tids.iter().collect::<std::collections::BTreeSet<_>>()
        );
        if !tids.is_empty() {
            let s = thread_ctx(&["record", &thread.to_string(), "--hz", "99", "--duration", "500ms"]);
            assert_exit(&s, 0, "record TID summary");
            assert!(s.stdout.starts_with(&format!("thread {thread} of pid {}: ", w.pid)), "{}", s.stdout);
            return;
        }
        let _ = writeln_stderr(&format!("{test}: no sample of thread {thread} in recording {attempt}; recording again"));
    }
    panic!("{test}: thread {thread} spun through 5 one-second recordings at 199 Hz without a sample");
}

/// `thread-ctx … 2>&1 | head` once head has gone: every write fails with EPIPE. Each command
/// still ends with its own exit code, quietly: no panic, no SIGABRT (the release build aborts
/// on panic), as `grep` ends on a closed pipe.
#[test]
fn a_closed_pipe_ends_every_command_quietly_with_its_code() {
    let mut sleeper = Command::new("sleep").arg("60").stdout(Stdio::null()).spawn().expect("spawning sleep");
    let pid = sleeper.id().to_string();
    let cases: [(&[&str], i32); 5] = [
        (&["--help"], 0),
        (&["inspect", &pid], 4),
        (&["dump", &pid, "--json"], 4),
        (&["report", "--otlp", "/nonexistent/received.pb"], 2),
        (&["record", "1", "--duration", "5x"], 2),
    ];
    for (args, code) in cases {
        let status = thread_ctx_into_closed_pipe(args);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.code(),
            Some(code),
            "thread-ctx {} into a closed pipe: expected exit {code}, got {status:?} (signal {:?})",
            args.join(" "),
            status.signal()
        );
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

/// eBPF needs root whoever owns the target: as another user, `record` does not suggest running
/// as the target's user (which would fail next, at loading eBPF).
#[test]
fn record_of_another_users_process_says_ebpf_needs_root() {
    if !can_run("record_of_another_users_process_says_ebpf_needs_root", (!is_root()).then_some("it needs root to drop to another user")) {
        return;
    }
    let w = c_writer(&fixtures().writer_le, &[], &[]);
    let r = thread_ctx_as_nobody(&["record", &w.pid.to_string(), "--duration", "1s"]);
    assert_exit(&r, 5, "record as nobody of a root process");
    assert!(r.stderr.contains("eBPF needs root"), "{}", r.stderr);
    assert!(!r.stderr.contains("target's user"), "running as the target's user would not load eBPF either: {}", r.stderr);
}

/// Every agent setting that cannot be used, from a flag or from the environment, is refused
/// before anything starts (exit 2), quoting the value given, so that an operator finds which
/// line of a unit file or a pod spec is wrong.
#[test]
fn agent_config_errors_quote_the_bad_value() {
    let agent = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_thread-ctx"));
        cmd.arg("agent").args(args).env_remove("OTEL_EXPORTER_OTLP_ENDPOINT").env_remove("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let endpoint = ["--endpoint", "http://127.0.0.1:9"];
    /// Flags, environment, and the value the message must quote.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 11] = [
        (&["--interval", "500ms"], &[], "'500ms'"),
        (&["--hz", "0"], &[], "'0'"),
        (&["--duration", "5x"], &[], "'5x'"),
        (&["--process-timeout", "abc"], &[], "'abc'"),
        (&["--pprof-dir", "/nonexistent/dir"], &[], "/nonexistent/dir"),
        (&["--protocol", "grpcx", "--endpoint", "http://127.0.0.1:9"], &[], "\"grpcx\""),
        (&["--endpoint", "ftp//nowhere"], &[], "\"ftp//nowhere\""),
        (&endpoint, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift")], "\"thrift\""),
        (&endpoint, &[("OTEL_EXPORTER_OTLP_TIMEOUT", "abc")], "\"abc\""),
        (&endpoint, &[("OTEL_EXPORTER_OTLP_COMPRESSION", "zip")], "\"zip\""),
        (&endpoint, &[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")], "\"novalue\""),
    ];
    for (args, env, quoted) in cases {
        let (code, stderr) = agent(args, env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains(quoted), "{args:?} {env:?}: expected the value {quoted} in: {stderr}");
    }
}
