//! Faults of `thread-ctx record`'s profile outputs degrade gracefully and are
//! reported: bad flags are refused before anything is loaded, naming the flag;
//! a Node target without a V8 perf map is warned about at the start (JS frames
//! stay unnamed, the rest works); a target that exits mid-recording still gets
//! its profile written.

mod common;
mod profile_common;

use common::*;
use profile_common::*;
use std::time::Duration;

#[test]
fn bad_profile_flags_are_refused_naming_the_flag() {
    // Checked before discovery and before eBPF: no root needed. Any live pid will do.
    let pid = std::process::id().to_string();
    let cases: [(&[&str], &str); 5] = [
        (&["--trace", "abc", "--flamegraph", "/tmp/x.svg"], "--trace: expected 32 hex digits"),
        (&["--span", "00f067aa0ba902", "--folded", "/tmp/x.folded"], "--span: expected 16 hex digits"),
        (&["--attr", "http.route", "--folded", "/tmp/x.folded"], "--attr: expected KEY=VALUE"),
        (&["--attr", "http.route=/a", "--pprof", "/tmp/x.pb.gz"], "--trace/--span/--attr select what --flamegraph and --folded show"),
        (&["--flamegraph", "/no/such/dir/x.svg"], "--flamegraph: directory /no/such/dir does not exist"),
    ];
    for (extra, expected) in cases {
        let r = thread_ctx(&[&["record", pid.as_str(), "--duration", "1s"][..], extra].concat());
        assert!(r.code != 0 && r.stderr.contains(expected), "record {extra:?}: expected failure saying {expected:?}, got exit {} stderr {}", r.code, r.stderr);
    }
    let r = thread_ctx(&["record", &pid, "--no-user-stacks", "--pprof", "/tmp/x.pb.gz"]);
    assert!(r.code != 0 && r.stderr.contains("--no-user-stacks: --pprof, --flamegraph and --folded need stacks"), "{}", r.stderr);
}

#[test]
fn missing_perf_map_is_warned_about_and_native_frames_still_named() {
    if !ebpf_or_skip("missing_perf_map_is_warned_about_and_native_frames_still_named") {
        return;
    }
    let _one = one_at_a_time();
    let dir = scratch("profile-no-perf-map");
    let w = workload_with("cpu", false);
    spans(&w, 2, Duration::from_secs(20));
    let folded = dir.join("all.folded");
    let r = thread_ctx(&["record", &w.pid.to_string(), "--hz", "99", "--duration", "1s", "--folded", folded.to_str().unwrap()]);
    assert_eq!(r.code, 0, "a missing perf map is not fatal: {}", r.stderr);
    let warning = r.stderr.lines().next().unwrap_or("");
    assert!(
        warning.starts_with("thread-ctx: warning: no V8 jitdump or perf map") && warning.contains("--perf-prof") && warning.contains("--perf-basic-prof-only-functions"),
        "expected the first stderr line to warn about the missing perf map, got:\n{}",
        r.stderr
    );
    let text = std::fs::read_to_string(&folded).unwrap();
    assert!(!text.contains("burnAlpha"), "JS names cannot come from anywhere else");
    assert!(text.contains("[anon:jit]") && text.contains("uv_run"), "JIT frames stay unnamed, native ones are named:\n{text}");
}

#[test]
fn target_exiting_mid_recording_still_gets_its_profile() {
    if !ebpf_or_skip("target_exiting_mid_recording_still_gets_its_profile") {
        return;
    }
    let _one = one_at_a_time();
    let dir = scratch("profile-exit");
    let mut w = workload("cpu");
    spans(&w, 2, Duration::from_secs(20));
    let pprof = dir.join("exit.pb.gz");
    let pid = w.pid;
    let recorder = std::thread::spawn(move || {
        thread_ctx(&["record", &pid.to_string(), "--hz", "199", "--duration", "60s", "--pprof", pprof.to_str().unwrap()])
    });
    // Killed once it has burned 1 s of CPU since recording started (~199 samples), however
    // busy the machine is: the samples asserted below are then guaranteed to exist.
    std::thread::sleep(Duration::from_millis(300));
    let cpu_at_start = cpu_seconds(pid);
    let deadline = std::time::Instant::now() + Duration::from_secs(45);
    while cpu_seconds(pid) - cpu_at_start < 1.0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    w.child.kill().unwrap();
    w.child.wait().unwrap();
    let r = recorder.join().unwrap();
    assert_eq!(r.code, 0, "the target exiting ends the recording, not in failure: {}", r.stderr);
    assert!(r.stderr.contains(&format!("process {pid} exited after")), "stderr says the target exited: {}", r.stderr);
    let view = decode_pprof(&dir.join("exit.pb.gz"));
    let burn: i64 = view.samples.iter().filter(|s| s.functions.iter().any(|f| f.starts_with("burn"))).map(|s| s.values["samples"]).sum();
    assert!(burn >= 50, "the samples taken before the exit are in the profile, JS frames named: {burn} in burnAlpha/burnBeta");
}

/// User + system CPU seconds of a process so far (/proc/PID/stat), 0 when it is gone.
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}
