//! `thread-ctx record` as a command in a pipeline: a reader that closes stdout
//! early (`| head -2`) ends the recording at once, with exit 0 and no error.

use thread_ctx_test_support::process as common;
use thread_ctx_test_support::sampler as sampler_common;

use sampler_common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn jsonl_into_a_closed_pipe_ends_quietly() {
    let test = "jsonl_into_a_closed_pipe_ends_quietly";
    if !ebpf_or_skip(test) {
        return;
    }
    let _serial = one_at_a_time();
    let w = common::c_writer(&spinners().spinner_le, &[], &[]);
    let started = Instant::now();
    let mut rec = Command::new(env!("CARGO_BIN_EXE_thread-ctx"))
        .args(["record", &w.pid.to_string(), "--hz", "199", "--duration", "60s", "--format", "jsonl"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning thread-ctx record");
    // Like `head -2`: read two lines, then close the pipe.
    let mut lines = BufReader::new(rec.stdout.take().unwrap()).lines();
    for n in 1..=2 {
        let l = lines.next().unwrap_or_else(|| panic!("{test}: record ended before sample line {n}")).unwrap();
        serde_json::from_str::<serde_json::Value>(&l).unwrap_or_else(|e| panic!("{test}: line {n} is not JSON ({e}): {l}"));
    }
    drop(lines);
    let out = rec.wait_with_output().expect("waiting for thread-ctx record");
    let (took, stderr) = (started.elapsed(), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{test}: expected exit 0 once stdout closed, got {:?}; stderr:\n{stderr}", out.status);
    assert!(stderr.is_empty(), "{test}: a closed stdout ends recording quietly, but stderr says:\n{stderr}");
    assert!(took < Duration::from_secs(10), "{test}: expected recording to stop soon after stdout closed, it took {took:?} of the 60 s asked");
}

/// `record PID … 2>&1 | head` once head has gone: the summary (stdout) and the lines about the
/// files written (stderr) both meet EPIPE; the recording still writes its files and exits 0,
/// without a panic or SIGABRT. The same for jsonl.
#[test]
fn summary_and_notes_into_a_closed_pipe_end_quietly() {
    let test = "summary_and_notes_into_a_closed_pipe_end_quietly";
    if !ebpf_or_skip(test) {
        return;
    }
    let _serial = one_at_a_time();
    let w = common::c_writer(&spinners().spinner_le, &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let pprof = dir.path().join("p.pb.gz");
    let pid = w.pid.to_string();
    for args in [
        &["record", &pid, "--hz", "99", "--duration", "1s", "--pprof", pprof.to_str().unwrap()][..],
        &["record", &pid, "--hz", "99", "--duration", "1s", "--format", "jsonl"],
    ] {
        let status = common::thread_ctx_into_closed_pipe(args);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.code(), Some(0), "{test}: `thread-ctx {}` into a closed pipe: {status:?} (signal {:?})", args.join(" "), status.signal());
    }
    assert!(pprof.exists(), "{test}: the pprof is written even though nobody reads the output");
}
