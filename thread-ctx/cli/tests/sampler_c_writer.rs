//! The eBPF sampler against a C writer whose threads spin with known records:
//! every valid sample carries exactly the published ids and attrs, threads
//! without a context never read as valid, stacks start in the spinning
//! function, timestamps are CLOCK_MONOTONIC, and the in-kernel counters agree
//! with the delivered events; `dump` reads the same records through ptrace. For
//! static TLS (TLSDESC resolved static), dynamic TLS (DTV walk, forced with
//! GLIBC_TUNABLES), initial exec (a .so linked at startup) and local exec.

use thread_ctx_test_support::process as common;
use thread_ctx_test_support::sampler as sampler_common;

use common::{assert_dump_matches, c_writer, json_of, FORCE_DYNAMIC_TLS};
use object::{Object, ObjectSymbol};
use sampler_common::*;
use std::path::Path;
use std::time::Duration;
use thread_ctx_discovery::RecordReach;
use thread_ctx_sampler::CtxState;

const HZ: u32 = 199;
/// Samples wanted of each spinning thread (about 0.5 s of its CPU at HZ): the recording runs
/// until it has them, for CAP at most, so a busy machine makes it longer, not a failure.
const MIN_SAMPLES_PER_THREAD: usize = 100;
const CAP: Duration = Duration::from_secs(60);

/// [start, end) of `spin` in the running spinner: link-time size, runtime address it printed.
fn spin_range(exe: &Path, runtime_addr: &str) -> (u64, u64) {
    let data = std::fs::read(exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let sym = file.symbols().find(|s| s.name() == Ok("spin")).expect("spinner has a `spin` symbol");
    let start = u64::from_str_radix(runtime_addr.trim_start_matches("0x"), 16).unwrap();
    (start, start + sym.size())
}

/// Expected access: static TLS (true) or a DTV walk (false), and the model `inspect` names.
fn check_spinner(test: &str, exe: &Path, args: &[&str], env: &[(&str, &str)], expect_static: bool, expect_model: &str) {
    let _serial = one_at_a_time();
    let w = c_writer(exe, args, env);
    let access = access_of(w.pid);
    assert_eq!(access.is_static(), expect_static, "{test}: expected static TLS = {expect_static}, discovery resolved {access}");
    let inspect = json_of("inspect", w.pid, 0);
    let model = inspect["writers"][0]["model"].as_str();
    assert_eq!(model, Some(expect_model), "{test}: `thread-ctx inspect` classified the writer as {model:?}: {inspect:#}");
    let before = monotonic_ns();
    let by_name = |n: &str| w.published.iter().zip(&w.names).find(|(_, name)| *name == n).map(|(p, _)| p).unwrap();
    let (valid, cleared, null) = (by_name("sp-valid"), by_name("sp-cleared"), by_name("sp-null"));
    let spinning = [valid.tid as u32, cleared.tid as u32, null.tid as u32];
    let rec = record_until(w.pid, RecordReach::tls(access), HZ, CAP, |samples| {
        spinning.iter().all(|&tid| samples.iter().filter(|s| s.tid == tid).count() >= MIN_SAMPLES_PER_THREAD)
    });
    let after = monotonic_ns();
    let spin = spin_range(exe, &valid.extra[0]);
    // ptrace's view of the same threads: only sp-valid reads as valid, with the same record.
    assert_dump_matches(&json_of("dump", w.pid, 0), std::slice::from_ref(valid));

    let mut per_thread = [0usize; 3];
    let mut stacks_in_spin = 0;
    for s in &rec.samples {
        assert!(
            (before..=after).contains(&s.time_ns),
            "{test}: {} has a timestamp outside the CLOCK_MONOTONIC window [{before}, {after}] of the run",
            describe(s)
        );
        assert_eq!(s.pid as i32, w.pid, "{test}: {} is from another process", describe(s));
        assert_ne!(s.state, CtxState::Torn, "{test}: {} is torn, but the writer never changes its records", describe(s));
        if s.tid as i64 == valid.tid {
            per_thread[0] += 1;
            let expected = (CtxState::Valid, valid.trace_id.clone(), valid.span_id.clone(), valid.flags as u8);
            let h = s.header.unwrap_or_else(|| panic!("{test}: {} has no header", describe(s)));
            assert_eq!(
                (s.state, hex(&h.trace_id), hex(&h.span_id), h.flags),
                expected,
                "{test}: {} on sp-valid: expected (state, trace, span, flags) {expected:?}",
                describe(s)
            );
            assert_eq!(s.attrs, b"\x00\x08/spin/ok", "{test}: {} on sp-valid: wrong attrs-data", describe(s));
            assert_eq!(format!("{:#x}", s.record_addr), valid.record_address, "{test}: {} read another record", describe(s));
            if s.user_stack.as_ref().is_ok_and(|ips| ips.first().is_some_and(|ip| (spin.0..spin.1).contains(ip))) {
                stacks_in_spin += 1;
            }
        } else if s.tid as i64 == cleared.tid {
            per_thread[1] += 1;
            assert_eq!(s.state, CtxState::Invalid, "{test}: {} on sp-cleared: expected valid = 0 (not_valid)", describe(s));
            assert_eq!(s.header.map(|h| h.valid), Some(0), "{test}: {} on sp-cleared: expected valid byte 0", describe(s));
        } else if s.tid as i64 == null.tid {
            per_thread[2] += 1;
            assert!(
                matches!(s.state, CtxState::NullRecord | CtxState::NoSlot),
                "{test}: {} on sp-null: expected null_record or no_tls_block",
                describe(s)
            );
        } else {
            assert!(s.span().is_none(), "{test}: {} on an unexpected thread carries a span", describe(s));
        }
    }
    for (n, name) in per_thread.iter().zip(["sp-valid", "sp-cleared", "sp-null"]) {
        assert!(
            *n >= MIN_SAMPLES_PER_THREAD,
            "{test}: expected >= {MIN_SAMPLES_PER_THREAD} samples of spinning thread {name} at {HZ} Hz within {CAP:?}, saw {n} \
             (all: {}; counters {:?})",
            rec.samples.len(),
            rec.counters
        );
    }
    assert!(
        stacks_in_spin * 10 >= per_thread[0] * 9,
        "{test}: expected >= 90% of sp-valid's {} samples to have a user stack whose first frame is in spin() {spin:#x?}, saw {stacks_in_spin}",
        per_thread[0]
    );
    // Nothing lost, so the kernel's per-state counts are exactly the delivered samples'.
    assert_eq!(rec.counters.dropped, 0, "{test}: ring buffer dropped samples at {HZ} Hz");
    for state in CtxState::ALL {
        let delivered = rec.samples.iter().filter(|s| s.state == state).count() as u64;
        assert_eq!(
            rec.counters.get(state),
            delivered,
            "{test}: kernel counted {} {} samples, {delivered} delivered",
            rec.counters.get(state),
            state.name()
        );
    }
    eprintln!("{test}: {} samples, per thread {per_thread:?}, {stacks_in_spin} stacks in spin(), access {access}", rec.samples.len());
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn tlsdesc_in_static_tls() {
    let test = "tlsdesc_in_static_tls";
    if ebpf_or_skip(test) {
        let b = spinners();
        check_spinner(test, &b.spinner_dl, &["--dlopen", b.lib_tlsdesc.to_str().unwrap()], &[], true, "tlsdesc");
    }
}

#[test]
fn tlsdesc_in_dynamic_tls_dtv_walk() {
    let test = "tlsdesc_in_dynamic_tls_dtv_walk";
    if ebpf_or_skip(test) {
        let b = spinners();
        check_spinner(test, &b.spinner_dl, &["--dlopen", b.lib_tlsdesc.to_str().unwrap()], &[FORCE_DYNAMIC_TLS], false, "tlsdesc");
    }
}

#[test]
fn initial_exec_in_a_startup_library() {
    let test = "initial_exec_in_a_startup_library";
    if ebpf_or_skip(test) {
        check_spinner(test, &spinners().spinner_ie, &[], &[], true, "initial_exec");
    }
}

#[test]
fn local_exec_in_the_executable() {
    let test = "local_exec_in_the_executable";
    if ebpf_or_skip(test) {
        check_spinner(test, &spinners().spinner_le, &[], &[], true, "local_exec");
    }
}
