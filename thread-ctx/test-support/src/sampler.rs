//! Harness for the eBPF sampler tests: root check (skip visibly, or fail under
//! REQUIRE_EBPF=1), one sampling run at a time, and running the sampler on a pid
//! with the access discovery resolved for it.

use crate::process::{cc, STARTUP};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use thread_ctx_discovery::discover;
use thread_ctx_discovery::RecordReach;
use thread_ctx_discovery::TlsAccess;
use thread_ctx_sampler::{Counters, CtxState, Event, Sampler, SamplerOptions};

pub use crate::process::{ebpf_or_skip, one_at_a_time};

/// Whether process `pid` still exists (signal 0 checks it, whatever our rights over it).
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks existence/permission.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 || *libc::__errno_location() != libc::ESRCH }
}

/// A file under thread-ctx/cli/tests, as a string for command lines.
pub fn src(rel: &str) -> String {
    crate::process::test_file(rel).to_str().unwrap().to_string()
}

/// The spinner (sampler_fixtures/spinner.c) built once per test binary, one per access model.
pub struct Spinners {
    pub lib_tlsdesc: PathBuf,
    pub spinner_dl: PathBuf,
    pub spinner_ie: PathBuf,
    pub spinner_le: PathBuf,
}

pub fn spinners() -> &'static Spinners {
    static B: OnceLock<Spinners> = OnceLock::new();
    B.get_or_init(|| {
        let dir = crate::target_tmpdir().join(format!("sampler-c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
        let (record, spinner) = (src("fixtures/ctx_record.c"), src("sampler_fixtures/spinner.c"));
        cc(&["-O1", "-shared", "-fPIC", "-mtls-dialect=gnu2", "-o", &p("libtlsdesc.so"), &record]);
        cc(&["-O1", "-shared", "-fPIC", "-ftls-model=initial-exec", "-o", &p("libie.so"), &record]);
        let fp = ["-O1", "-Wall", "-fno-omit-frame-pointer"];
        cc(&[&fp[..], &["-o", &p("spinner_dl"), &spinner, "-ldl", "-lpthread"]].concat());
        // --no-as-needed: the executable reaches libie.so only through dlsym.
        let (libdir, rpath) = (format!("-L{}", dir.display()), format!("-Wl,-rpath,{}", dir.display()));
        cc(&[&fp[..], &["-o", &p("spinner_ie"), &spinner, &libdir, "-Wl,--no-as-needed", "-lie", "-Wl,--as-needed", &rpath, "-ldl", "-lpthread"]]
            .concat());
        // -rdynamic exports the executable's own otel_thread_ctx_v1 in .dynsym (local exec).
        cc(&[&fp[..], &["-rdynamic", "-o", &p("spinner_le"), &spinner, &record, "-ldl", "-lpthread"]].concat());
        Spinners {
            lib_tlsdesc: dir.join("libtlsdesc.so"),
            spinner_dl: dir.join("spinner_dl"),
            spinner_ie: dir.join("spinner_ie"),
            spinner_le: dir.join("spinner_le"),
        }
    })
}

/// The single resolved TLS access of `pid`, retried while the writer is still starting.
pub fn access_of(pid: i32) -> TlsAccess {
    let deadline = Instant::now() + STARTUP;
    loop {
        let d = discover(pid).unwrap_or_else(|e| panic!("discovery of pid {pid} failed: {e}"));
        let resolved: Vec<_> = d.writers.iter().filter_map(|w| w.access.clone().ok()).collect();
        if let [a] = resolved.as_slice() {
            return *a;
        }
        assert!(
            Instant::now() < deadline,
            "expected exactly one resolved otel_thread_ctx_v1 writer in pid {pid} within {STARTUP:?}, saw {:#?}",
            d.writers
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How the sampler reaches `pid`'s records: the writer `record` would sample (for a
/// `nodejs_v1_dev` process, its walk), retried while the writer is still starting.
pub fn reach_of(pid: i32) -> RecordReach {
    let deadline = Instant::now() + STARTUP;
    loop {
        let d = discover(pid).unwrap_or_else(|e| panic!("discovery of pid {pid} failed: {e}"));
        if let Ok(Some(reach)) = d.sampled_writer().map(|w| w.record_reach()) {
            return reach;
        }
        assert!(Instant::now() < deadline, "expected a writer the sampler can read in pid {pid} within {STARTUP:?}, saw {:#?}", d.writers);
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub struct Recording {
    pub samples: Vec<Event>,
    pub counters: Counters,
    /// The target was still alive when sampling ended.
    pub target_alive: bool,
}

/// Samples `pid` for `duration` at `hz` with user stacks, collecting every event.
pub fn record(pid: i32, reach: RecordReach, hz: u32, duration: Duration) -> Recording {
    record_until(pid, reach, hz, duration, |_| false)
}

/// Samples `pid` at `hz` until `enough(samples so far)` holds, or for `cap` at most. Tests that
/// need N samples of a thread ask for them this way: on a busy machine the thread gets less CPU
/// and the recording runs longer, instead of coming up short.
pub fn record_until(pid: i32, reach: RecordReach, hz: u32, cap: Duration, mut enough: impl FnMut(&[Event]) -> bool) -> Recording {
    let opts = SamplerOptions { hz, user_stacks: true, kernel_stacks: false, off_cpu: false, alloc: false };
    let sampler = Sampler::start(opts).unwrap_or_else(|e| panic!("starting the sampler failed: {e}"));
    sampler.track_reach(pid as u32, Some(reach)).unwrap_or_else(|e| panic!("tracking pid {pid} ({reach:?}) failed: {e}"));
    let mut samples = Vec::new();
    let deadline = Instant::now() + cap;
    while Instant::now() < deadline && process_alive(pid as u32) && !enough(&samples) {
        let wait = Duration::from_millis(100).min(deadline.saturating_duration_since(Instant::now()));
        let undecodable = sampler.poll(wait, &mut samples).unwrap_or_else(|e| panic!("sampling pid {pid} failed: {e}"));
        assert_eq!(undecodable, 0, "ring-buffer events that did not decode (ABI mismatch)");
    }
    // Stop sampling before the last drain: the program counts a sample before it captures the
    // stacks and submits it, so with sampling still on, a sample taken on the other CPU between
    // the drain and the counter read is counted but not delivered (CI saw 102 counted, 101
    // delivered). Once untracked, the two can only converge: a program that found the target
    // before the delete runs to its end without sleeping. Drain until they agree, 5 s at most
    // (a vCPU the hypervisor paused mid-program); a real mismatch is left for the caller to see.
    sampler.untrack(pid as u32).unwrap_or_else(|e| panic!("untracking pid {pid} failed: {e}"));
    let settle = Instant::now() + Duration::from_secs(5);
    let counters = loop {
        let counters = sampler.counters().expect("reading the sampler's counters");
        sampler.poll(Duration::ZERO, &mut samples).unwrap_or_else(|e| panic!("sampling pid {pid} failed: {e}"));
        let delivered = |state| samples.iter().filter(|s| s.state == state).count() as u64;
        if Instant::now() >= settle || CtxState::ALL.iter().all(|&state| counters.get(state) == delivered(state)) {
            break counters;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Recording { samples, counters, target_alive: process_alive(pid as u32) }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One line describing a sample, for failure messages.
pub fn describe(s: &Event) -> String {
    format!(
        "sample at {} ns, tid {}, cpu {}, state {}, header {:?}, attrs {}",
        s.time_ns,
        s.tid,
        s.cpu,
        s.state.name(),
        s.header.map(|h| (hex(&h.trace_id), hex(&h.span_id), h.valid, h.flags, h.attrs_size)),
        hex(&s.attrs)
    )
}

/// What `thread-ctx record PID --format jsonl` printed: one JSON object per sample, and stderr.
pub struct JsonlRun {
    pub samples: Vec<serde_json::Value>,
    pub stderr: String,
}

/// Runs the real `thread-ctx record` binary on `pid` and parses its JSON lines.
pub fn record_jsonl(pid: i32, hz: u32, duration: &str) -> JsonlRun {
    let args = ["record", &pid.to_string(), "--hz", &hz.to_string(), "--duration", duration, "--format", "jsonl"];
    let r = crate::process::thread_ctx(&args);
    assert_eq!(r.code, 0, "expected `thread-ctx {}` to exit 0, it exited {}; stderr:\n{}", args.join(" "), r.code, r.stderr);
    let samples = r
        .stdout
        .lines()
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("jsonl line {}: invalid JSON ({e}): {l}", i + 1)))
        .collect();
    JsonlRun { samples, stderr: r.stderr }
}

/// `thread-ctx record PID --format jsonl` until `enough(samples so far)` holds (then stopped with
/// SIGINT, as Ctrl-C would), or for `cap` at most: on a busy machine it records longer instead of
/// coming up short.
pub fn record_jsonl_until(pid: i32, hz: u32, cap: Duration, mut enough: impl FnMut(&[serde_json::Value]) -> bool) -> JsonlRun {
    let cap = format!("{}s", cap.as_secs());
    let args = ["record", &pid.to_string(), "--hz", &hz.to_string(), "--duration", &cap, "--format", "jsonl"];
    let mut samples = Vec::new();
    let r = crate::process::thread_ctx_until(&args, |line| {
        if let Some(l) = line {
            let n = samples.len() + 1;
            samples.push(serde_json::from_str(l).unwrap_or_else(|e| panic!("jsonl line {n}: invalid JSON ({e}): {l}")));
        }
        enough(&samples)
    });
    assert_eq!(r.code, 0, "expected `thread-ctx {}` to exit 0, it exited {}; stderr:\n{}", args.join(" "), r.code, r.stderr);
    JsonlRun { samples, stderr: r.stderr }
}
