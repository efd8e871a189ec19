//! Faults of `thread-ctx record`'s profile outputs degrade gracefully and are
//! reported: bad flags are refused before anything is loaded, naming the flag;
//! a Node target without a V8 perf map is warned about at the start (JS frames
//! stay unnamed, the rest works), and the agent says so once per process, not
//! once per window; a target that exits mid-recording still gets
//! its profile written; a perf map an earlier process with the same pid left
//! behind is not used.

use thread_ctx_test_support::process as common;
mod profile_common;

use common::*;
use profile_common::*;

/// Samples with a span the exit test waits for before it kills the target.
const MIN_SPAN_SAMPLES: usize = 100;

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
        assert!(
            r.code != 0 && r.stderr.contains(expected),
            "record {extra:?}: expected failure saying {expected:?}, got exit {} stderr {}",
            r.code,
            r.stderr
        );
    }
    let r = thread_ctx(&["record", &pid, "--no-user-stacks", "--pprof", "/tmp/x.pb.gz"]);
    assert!(r.code != 0 && r.stderr.contains("--no-user-stacks: --pprof, --flamegraph and --folded need stacks"), "{}", r.stderr);
}

/// The second stderr line of a recording of a Node target whose JS frames stay unnamed (the first
/// says why they are not named from its heap).
const NO_MAP_WARNING: &str = "thread-ctx: warning: no V8 jitdump or perf map";

/// Records `w` for 1 s at 99 Hz into a folded file, again (at most 6 times) until `sampled(text)`:
/// a busy machine may give the workload too little CPU in one second. Every recording must exit 0,
/// say why the heap does not name its frames, warn (`NO_MAP_WARNING`, saying each of
/// `warning_says`) and name no frame `never_named`.
fn record_unnamed_until(
    w: &WriterProcess,
    dir: &std::path::Path,
    warning_says: &[&str],
    never_named: &str,
    what: &str,
    sampled: impl Fn(&str) -> bool,
) {
    for attempt in 1..=6 {
        let folded = dir.join(format!("unnamed-{attempt}.folded"));
        let r = thread_ctx(&["record", &w.pid.to_string(), "--hz", "99", "--duration", "1s", "--folded", folded.to_str().unwrap()]);
        assert_eq!(r.code, 0, "JS frames without names are not fatal: {}", r.stderr);
        // First why its frames are not named from its heap (a node without v8dbg symbols), then that
        // the fallback has nothing to name them from.
        let mut lines = r.stderr.lines();
        let fallback = lines.next().unwrap_or("");
        assert!(fallback.contains("no v8dbg symbols") && fallback.contains("falling back to the perf map"), "{}", r.stderr);
        let warning = lines.next().unwrap_or("");
        assert!(
            warning.starts_with(NO_MAP_WARNING) && warning_says.iter().all(|s| warning.contains(s)),
            "expected the first stderr line to warn that JS frames stay unnamed, saying {warning_says:?}, got:\n{}",
            r.stderr
        );
        let said = r.stderr.lines().filter(|l| l.contains("no V8 jitdump or perf map")).count();
        assert_eq!(said, 1, "the missing perf map is said once, at the start:\n{}", r.stderr);
        let text = std::fs::read_to_string(&folded).unwrap();
        assert!(!text.contains(never_named), "a frame was named {never_named}:\n{text}");
        if sampled(&text) {
            return;
        }
        assert!(attempt < 6, "{what} (6 recordings):\n{text}");
        eprintln!("recording {attempt}: {what} not sampled yet; recording again");
    }
}

#[test]
fn missing_perf_map_is_warned_about_and_native_frames_still_named() {
    if !ebpf_or_skip("missing_perf_map_is_warned_about_and_native_frames_still_named") {
        return;
    }
    let _one = one_at_a_time();
    let dir = scratch("profile-no-perf-map");
    // A node without v8dbg symbols: its JS frames are named from the perf map or jitdump, or not at all.
    let node = node_without_v8dbg(&NodeRuntime { major: Some("20"), flags: &[] }.binary(), &dir);
    let w = workload_on(&node.0, "cpu", &[], None);
    spans(&w, 2, STARTUP);
    // JS names cannot come from anywhere else than a jitdump or perf map.
    record_unnamed_until(
        &w,
        &dir,
        &["--perf-prof", "--perf-basic-prof-only-functions"],
        "burnAlpha",
        "JIT frames unnamed and native ones named",
        |text| text.contains("[anon:jit]") && text.contains("uv_run"),
    );
}

/// The agent writes pprof files window after window: a process whose JS frames it cannot name
/// (a node without v8dbg symbols, and no perf map) is said once (in its first window with samples), not once per window, and not never.
#[test]
fn the_agent_says_once_per_process_that_its_js_frames_stay_unnamed() {
    if !ebpf_or_skip("the_agent_says_once_per_process_that_its_js_frames_stay_unnamed") {
        return;
    }
    let _one = one_at_a_time();
    let dir = scratch("agent-unnamed-js");
    // A node without v8dbg symbols: its JS frames are named from the perf map or jitdump, or not at all.
    let node = node_without_v8dbg(&NodeRuntime { major: Some("20"), flags: &[] }.binary(), &dir);
    let w = workload_on(&node.0, "cpu", &[], None);
    spans(&w, 2, STARTUP);
    let pid = w.pid.to_string();
    let r = thread_ctx(&["agent", "--pid", &pid, "--hz", "99", "--interval", "1s", "--duration", "4s", "--pprof-dir", dir.to_str().unwrap()]);
    assert_eq!(r.code, 0, "agent failed: {}", r.stderr);
    let windows = std::fs::read_dir(&dir).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".pb.gz")).count();
    assert!(windows >= 2, "expected pprof files of 2+ windows to show the note is not repeated, got {windows}:\n{}", r.stderr);
    let notes: Vec<&str> = r.stderr.lines().filter(|l| l.contains("no V8 jitdump or perf map")).collect();
    assert_eq!(notes.len(), 1, "one note for the process over {windows} windows:\n{}", r.stderr);
    let fallback = r.stderr.lines().filter(|l| l.contains("no v8dbg symbols") && l.contains("falling back to the perf map")).count();
    assert_eq!(fallback, 1, "why its JS frames are not named from its heap, said once:\n{}", r.stderr);
    assert!(
        notes[0].split_once(' ').is_some_and(|(_, said)| said.starts_with("thread-ctx agent: "))
            && notes[0].contains(&format!("process {pid}"))
            && notes[0].contains("--perf-prof"),
        "{}",
        notes[0]
    );
}

#[test]
fn stale_perf_map_of_an_earlier_process_with_the_same_pid_is_ignored() {
    if !ebpf_or_skip("stale_perf_map_of_an_earlier_process_with_the_same_pid_is_ignored") {
        return;
    }
    let _one = one_at_a_time();
    let dir = scratch("profile-stale-perf-map");
    // A node without v8dbg symbols: its JS frames are named from the perf map or jitdump, or not at all.
    let node = node_without_v8dbg(&NodeRuntime { major: Some("20"), flags: &[] }.binary(), &dir);
    let w = workload_on(&node.0, "cpu", &[], None);
    spans(&w, 2, STARTUP);
    // What an earlier process with this pid would have left: V8 never deletes its map, and
    // its names at these addresses would be lies. Written an hour before the workload started;
    // the workload's drop removes it.
    let path = format!("/tmp/perf-{}.map", w.pid);
    std::fs::write(&path, "1000 7ffffffff000 LazyCompile:*staleFunction old.js:1\n").unwrap();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(hour_ago).unwrap();
    // Until a JIT frame was sampled: the kind a stale map would name.
    let ignored = format!("{path} ignored: last written before the process started");
    record_unnamed_until(&w, &dir, &[&ignored], "staleFunction", "an unnamed JIT frame", |text| text.contains("[anon:jit]"));
}

#[test]
fn target_exiting_mid_recording_still_gets_its_profile() {
    if !ebpf_or_skip("target_exiting_mid_recording_still_gets_its_profile") {
        return;
    }
    let _one = one_at_a_time();
    let dir = scratch("profile-exit");
    let mut w = workload("cpu");
    spans(&w, 2, STARTUP);
    let pprof = dir.join("exit.pb.gz");
    let pid = w.pid;
    // The target is killed once MIN_SPAN_SAMPLES samples carry its spans: on a busy machine that
    // takes longer, it does not leave the profile short. The recording's own cap is never reached.
    let args = ["record", &pid.to_string(), "--hz", "199", "--duration", "60s", "--format", "jsonl", "--pprof", pprof.to_str().unwrap()];
    let (mut with_span, mut killed) = (0, false);
    let r = thread_ctx_until(&args, |line| {
        let Some(line) = line else { return false };
        with_span += line.contains("\"span_id\":\"") as usize;
        if with_span >= MIN_SPAN_SAMPLES && !killed {
            w.child.kill().unwrap();
            w.child.wait().unwrap();
            killed = true;
        }
        false
    });
    assert!(killed, "{with_span} samples carried a span before the recording ended by itself: {}", r.stderr);
    assert_eq!(r.code, 0, "the target exiting ends the recording, not in failure: {}", r.stderr);
    assert!(r.stderr.contains(&format!("process {pid} exited after")), "stderr says the target exited: {}", r.stderr);
    let view = decode_pprof(&dir.join("exit.pb.gz"));
    let burn: i64 = view.samples.iter().filter(|s| s.functions.iter().any(|f| f.starts_with("burn"))).map(|s| s.values["samples"]).sum();
    // Nearly all of the spans' CPU is in the burn functions.
    assert!(
        burn as usize >= MIN_SPAN_SAMPLES / 2,
        "the {with_span} samples with a span taken before the exit are in the profile, JS frames named: {burn} in burnAlpha/burnBeta"
    );
}

/// `record --alloc` of a service that has not turned allocation sampling on (no V8 sampling heap
/// profiler runs, no interval published) says so and what to do, instead of an empty allocation
/// table and exit 0: a usage error (2), like a selection that matches nothing.
#[test]
fn alloc_of_a_service_without_allocation_sampling_says_it_is_off() {
    if !ebpf_or_skip("alloc_of_a_service_without_allocation_sampling_says_it_is_off") {
        return;
    }
    let _one = one_at_a_time();
    let w = workload("cpu");
    spans(&w, 2, STARTUP);
    let r = thread_ctx(&["record", &w.pid.to_string(), "--hz", "99", "--duration", "1s", "--alloc"]);
    assert_eq!(r.code, 2, "expected exit 2:\n{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("has not turned allocation sampling on") && r.stderr.contains("allocations"), "{}", r.stderr);
    assert!(!r.stdout.contains("ALLOCATIONS BY"), "no empty allocation table:\n{}", r.stdout);
    assert!(r.stdout.contains("CPU samples"), "the CPU summary is still printed:\n{}", r.stdout);
}
