//! Faults degrade gracefully: threads exiting mid-read, a thread already traced
//! by someone else, and a reader without the rights to read the target.

use common::*;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use thread_ctx_test_support::process as common;

const MIN_SIGNALS: usize = 3000;
const MIN_DUMPS: usize = 3;

#[test]
fn threads_exiting_mid_read_are_reported_not_fatal() {
    let w = c_writer(&fixtures().writer_le, &["--thread-churn"], &[]);
    // Reads until short-lived threads were met (at least 15 reads, 300 at most): how often a read
    // meets one depends on how the machine schedules the churn.
    let mut churn_rows = 0;
    for i in 0..300 {
        if i >= 15 && churn_rows > 0 {
            break;
        }
        let v = json_of("validate", w.pid, 0);
        for p in &w.published {
            assert_eq!(thread_row(&v, p.tid)["state"], "valid", "read {i}: tid {}", p.tid);
        }
        for t in v["threads"].as_array().unwrap() {
            let state = t["state"].as_str().unwrap();
            assert!(["valid", "no_context", "exited"].contains(&state), "read {i}: unexpected row {t:#}");
            if state == "exited" {
                assert!(t["problems"].to_string().contains("exited while being read"), "{t:#}");
            }
            churn_rows += (t["name"] == "fx-churn") as usize;
        }
    }
    assert!(churn_rows > 0, "expected to meet short-lived threads at least once in 300 reads");
}

#[test]
fn thread_traced_by_another_tracer_is_an_error_row_and_validate_exit_3() {
    let f = fixtures();
    let w = c_writer(&f.writer_dl, &["--dlopen", f.lib_tlsdesc.to_str().unwrap()], &[]);
    let busy = w.published[1].tid as i32;
    // This test thread becomes the tracer of one writer thread (without stopping it).
    assert_eq!(unsafe { libc::ptrace(libc::PTRACE_SEIZE, busy, 0, 0) }, 0, "test could not seize tid {busy}");
    let r = thread_ctx(&["validate", "--json", &w.pid.to_string()]);
    // Release it before asserting, so the writer can be killed and reaped cleanly.
    unsafe {
        libc::ptrace(libc::PTRACE_INTERRUPT, busy, 0, 0);
        let mut status = 0;
        libc::waitpid(busy, &mut status, libc::__WALL);
        libc::ptrace(libc::PTRACE_DETACH, busy, 0, 0);
    }
    assert_eq!(r.code, 3, "expected exit 3 (unreadable thread), saw {}\n{}{}", r.code, r.stdout, r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let t = thread_row(&v, busy as i64);
    assert_eq!(t["state"], "error", "{t:#}");
    let why = t["problems"].to_string();
    assert!(why.contains("PTRACE_SEIZE") && why.contains("Operation not permitted") && why.contains("already traced"), "{why}");
    assert_eq!(thread_row(&v, w.published[0].tid)["state"], "valid");
    assert!(r.stderr.contains("could not be read"), "stderr: {}", r.stderr);
}

#[test]
fn unprivileged_reader_gets_a_clear_permission_error() {
    let w = c_writer(&fixtures().writer_le, &[], &[]);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_thread-ctx"));
    cmd.args(["dump", &w.pid.to_string()]);
    as_nobody(&mut cmd);
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => panic!("could not run thread-ctx as uid 65534 (this test needs root to drop privileges): {e}"),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "exit 5: no permission; stderr: {stderr}");
    assert!(stderr.contains("Permission denied") && stderr.contains(&format!("/proc/{}/", w.pid)), "stderr: {stderr}");
}

#[test]
fn signals_arriving_during_a_read_are_delivered_not_swallowed() {
    let w = c_writer(&fixtures().writer_le, &["--count-signals"], &[]);
    let (pid, main_tid) = (w.pid, w.published[0].tid as i32);
    // Signals go on until at least MIN_SIGNALS are sent and MIN_DUMPS dumps have run among them
    // (60 s at most): on a busy machine the dumps are slower, and the signals keep coming.
    let dumps = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let dumps_seen = dumps.clone();
    // Real-time signals queue (no coalescing), so every one sent must be counted.
    let sender = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut sent = 0;
        while sent < MIN_SIGNALS || (dumps_seen.load(Ordering::Relaxed) < MIN_DUMPS && Instant::now() < deadline) {
            let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, main_tid, libc::SIGRTMIN()) };
            assert_eq!(r, 0, "tgkill: {}", std::io::Error::last_os_error());
            sent += 1;
            std::thread::sleep(Duration::from_micros(30));
        }
        sent
    });
    while !sender.is_finished() {
        json_of("dump", pid, 0);
        dumps.fetch_add(1, Ordering::Relaxed);
    }
    let (sent, dumps) = (sender.join().unwrap(), dumps.load(Ordering::Relaxed));
    std::thread::sleep(Duration::from_millis(200));
    unsafe { libc::syscall(libc::SYS_tgkill, pid, main_tid, libc::SIGUSR2) };
    let line = w.lines.recv_timeout(Duration::from_secs(10)).expect("writer's \"signals N\" line");
    assert_eq!(line, format!("signals {sent}"), "expected every SIGRTMIN sent during {dumps} dumps to be delivered");
    assert!(dumps >= MIN_DUMPS, "expected {MIN_DUMPS} dumps to overlap the signals within 60 s, ran {dumps}");
}
