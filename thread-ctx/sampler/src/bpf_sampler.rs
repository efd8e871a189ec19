//! The loaded sampler: one cpu-clock perf event per online CPU drives the
//! CPU program for every tracked process (the `targets` map, changed at run
//! time), the sched_switch program adds off-CPU intervals when asked, and one
//! bounded ring buffer carries their events to [`Sampler::poll`].

use super::ctx_state::{
    Counters, CtxState, COUNTER_ALLOC_DROPPED, COUNTER_ALLOC_OTHER, COUNTER_ALLOC_VALID, COUNTER_COUNT, COUNTER_CPU_DROPPED, COUNTER_CPU_SAMPLE_NS,
    COUNTER_OFF_CPU_DROPPED, COUNTER_OFF_CPU_NS, COUNTER_OFF_CPU_SAMPLES,
};
use super::error::SamplerError;
use super::event::{Event, EVENT_SIZE};
use super::perf_event::{online_cpus, open_cpu_clock};
use super::skel::{types, OpenSamplerSkel, SamplerSkel, SamplerSkelBuilder};
use libbpf_rs::libbpf_sys;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject, PrintLevel, RingBuffer, RingBufferBuilder};
use std::cell::RefCell;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::Mutex;
use std::time::Duration;
use thread_ctx_discovery::tls_access::TlsAccess;
use thread_ctx_discovery::RecordReach;

/// Processes tracked at once (`MAX_TARGETS` in bpf/ctx_reader.bpf.h).
pub const MAX_TARGETS: usize = 8192;
/// Switched-out threads remembered at once for off-CPU intervals (each holds one event).
pub const OFF_CPU_THREADS: u32 = 4096;
/// Ring buffer bounds: enough for this many seconds of samples on every CPU
/// at full rate between two drains, within [MIN, MAX] bytes.
const RING_SECONDS: f64 = 1.0;
const RING_MIN_BYTES: u64 = 1 << 21;
const RING_MAX_BYTES: u64 = 1 << 26;

#[derive(Debug, Clone, Copy)]
pub struct SamplerOptions {
    /// Samples per second per CPU.
    pub hz: u32,
    /// Capture each sample's user stack (frame pointers).
    pub user_stacks: bool,
    /// Capture kernel stacks too.
    pub kernel_stacks: bool,
    /// Also trace sched_switch: off-CPU intervals of tracked threads.
    pub off_cpu: bool,
    /// Allocation samples: the pipeline attaches the allocation uprobe to each tracked
    /// process's `node` (V8's sampling heap profiler must run in it: the package's `allocations`).
    pub alloc: bool,
}

impl SamplerOptions {
    /// Nanoseconds one CPU sample stands for.
    pub fn cpu_period_ns(&self) -> u64 {
        1_000_000_000 / self.hz.max(1) as u64
    }
}

/// Run-time statistics of a BPF program (kernel.bpf_stats_enabled or `enable_run_time_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProgramStats {
    pub run_time_ns: u64,
    pub run_cnt: u64,
}

/// A loaded and attached sampler. Dropping it detaches and unloads everything.
pub struct Sampler {
    // Field order is drop order: stop polling, detach (closing the perf events), unload, free.
    ring: RingBuffer<'static>,
    received: Rc<RefCell<Received>>,
    /// Each per-CPU link owns its perf event: libbpf closes it on detach.
    links: Vec<Link>,
    off_cpu_attached: bool,
    pub(crate) skel: ManuallyDrop<SamplerSkel<'static>>,
    /// Storage the skeleton borrows for its whole life (freed in Drop, after it).
    object: *mut MaybeUninit<OpenObject>,
    stats: Option<OwnedFd>,
    cpus: usize,
    ring_bytes: u64,
}

#[derive(Default)]
struct Received {
    events: Vec<Event>,
    undecodable: u64,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.links.clear();
        // SAFETY: the skeleton is dropped exactly once, here, before the storage it borrows;
        // `object` came from Box::into_raw in `start` and nothing else refers to it afterwards.
        unsafe {
            ManuallyDrop::drop(&mut self.skel);
            drop(Box::from_raw(self.object));
        }
    }
}

impl Sampler {
    /// Loads the programs and attaches them to every online CPU. Nothing is
    /// sampled until a process is [`track`](Sampler::track)ed.
    pub fn start(opts: SamplerOptions) -> Result<Sampler, SamplerError> {
        if !cfg!(target_arch = "x86_64") {
            return Err(SamplerError::UnsupportedArch(std::env::consts::ARCH));
        }
        check_privileges()?;
        capture_libbpf_log();
        let cpus = online_cpus().map_err(SamplerError::Cpus)?;
        let object = Box::into_raw(Box::new(MaybeUninit::<OpenObject>::uninit()));
        // SAFETY: `object` lives until Drop frees it, after the skeleton that borrows it.
        let storage: &'static mut MaybeUninit<OpenObject> = unsafe { &mut *object };
        let ring_bytes = ring_size(cpus.len(), opts.hz);
        let skel = match open_and_load(storage, opts, ring_bytes) {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: nothing borrows the storage any more (open_and_load dropped what it made).
                drop(unsafe { Box::from_raw(object) });
                return Err(e);
            }
        };
        let received: Rc<RefCell<Received>> = Rc::default();
        let sink = Rc::clone(&received);
        let mut builder = RingBufferBuilder::new();
        let added = builder.add(&skel.maps.events, move |data: &[u8]| {
            let mut r = sink.borrow_mut();
            match Event::decode(data) {
                Ok(e) => r.events.push(e),
                Err(_) => r.undecodable += 1,
            }
            0
        });
        let ring = match added.map(|_| ()).and_then(|_| builder.build()) {
            Ok(r) => r,
            Err(e) => {
                drop(skel);
                // SAFETY: the skeleton that borrowed the storage is gone.
                drop(unsafe { Box::from_raw(object) });
                return Err(bpf_error("polling", e.to_string(), None));
            }
        };
        let mut sampler = Sampler {
            ring,
            received,
            links: Vec::with_capacity(cpus.len() + 1),
            off_cpu_attached: false,
            skel: ManuallyDrop::new(skel),
            object,
            stats: None,
            cpus: cpus.len(),
            ring_bytes,
        };
        if opts.off_cpu {
            let link = sampler
                .skel
                .progs
                .off_cpu_switch
                .attach()
                .map_err(|e| bpf_error("attaching the sched_switch tracepoint of", e.to_string(), Some(take_libbpf_log())))?;
            sampler.links.push(link);
            sampler.off_cpu_attached = true;
        }
        for &cpu in &cpus {
            let fd = open_cpu_clock(cpu, opts.hz).map_err(|source| perf_event_error(cpu, opts.hz, source))?;
            let link =
                sampler.skel.progs.sample_thread_ctx.attach_perf_event(fd.as_raw_fd()).map_err(|e| bpf_error("attaching", e.to_string(), None))?;
            sampler.links.push(link);
            // The link closes it when detached: owning it here too would close it twice (and,
            // with other threads opening files, could close one of theirs).
            let _ = fd.into_raw_fd();
        }
        Ok(sampler)
    }

    /// Number of CPUs sampled.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// Size of the ring buffer in bytes (what bounds the events in flight).
    pub fn ring_bytes(&self) -> u64 {
        self.ring_bytes
    }

    /// Starts sampling process `pid` (a tgid in the initial PID namespace);
    /// its threads' records are read through `access`, or not at all (stacks only) with None.
    pub fn track(&self, pid: u32, access: Option<TlsAccess>) -> Result<(), SamplerError> {
        self.track_reach(pid, access.map(RecordReach::tls))
    }

    /// [`track`](Sampler::track) for any writer: the TLS slot and, for a
    /// `nodejs_v1_dev` writer, the layout of its async-context frame walk.
    pub fn track_reach(&self, pid: u32, reach: Option<RecordReach>) -> Result<(), SamplerError> {
        self.track_process(pid, reach, None)
    }

    /// [`track_reach`](Sampler::track_reach), with the V8 frame walk for a node process
    /// whose layout is known (its JS frames are then read with its user stack).
    pub fn track_process(&self, pid: u32, reach: Option<RecordReach>, v8: Option<&V8Walk>) -> Result<(), SamplerError> {
        let mut t = target(reach);
        if let Some(v8) = v8 {
            v8.encode(&mut t.v8);
        }
        // SAFETY: `types::target` is plain integers; viewing it as bytes is sound.
        let value = unsafe { std::slice::from_raw_parts((&t as *const types::target).cast::<u8>(), std::mem::size_of_val(&t)) };
        self.skel.maps.targets.update(&pid.to_ne_bytes(), value, MapFlags::ANY).map_err(|e| SamplerError::Track {
            pid,
            max: MAX_TARGETS,
            reason: e.to_string(),
        })
    }

    /// Stops sampling `pid` (events already in the ring buffer still arrive).
    pub fn untrack(&self, pid: u32) -> Result<(), SamplerError> {
        match self.skel.maps.targets.delete(&pid.to_ne_bytes()) {
            Err(e) if e.kind() != libbpf_rs::ErrorKind::NotFound => Err(SamplerError::Map { map: "targets", reason: e.to_string() }),
            _ => Ok(()),
        }
    }

    /// Waits up to `timeout` for the ring buffer, then drains it into `out`.
    /// Returns events that did not decode (an ABI mismatch: should stay 0).
    /// An interrupted wait (a signal) is not an error: it just returns early.
    pub fn poll(&self, timeout: Duration, out: &mut Vec<Event>) -> Result<u64, SamplerError> {
        if let Err(e) = self.ring.poll(timeout) {
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                return Err(bpf_error("polling", e.to_string(), None));
            }
        }
        // The programs wake us only when the ring fills up: drain what came in meanwhile.
        self.ring.consume().map_err(|e| bpf_error("draining", e.to_string(), None))?;
        let mut r = self.received.borrow_mut();
        out.append(&mut r.events);
        Ok(std::mem::take(&mut r.undecodable))
    }

    /// Sums the per-CPU counters of the programs.
    pub fn counters(&self) -> Result<Counters, SamplerError> {
        let map = &self.skel.maps.counters;
        let mut c = Counters::default();
        for index in 0..COUNTER_COUNT {
            let per_cpu = map
                .lookup_percpu(&index.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| SamplerError::Map { map: "counters", reason: e.to_string() })?
                .unwrap_or_default();
            let sum: u64 = per_cpu.iter().map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap())).sum();
            match index {
                COUNTER_CPU_DROPPED => c.dropped = sum,
                COUNTER_OFF_CPU_DROPPED => c.off_cpu_dropped = sum,
                COUNTER_OFF_CPU_SAMPLES => c.off_cpu_sent = sum,
                COUNTER_ALLOC_VALID | COUNTER_ALLOC_OTHER => c.alloc_sent += sum,
                COUNTER_ALLOC_DROPPED => c.alloc_dropped = sum,
                COUNTER_CPU_SAMPLE_NS => c.cpu_sample_ns = sum,
                COUNTER_OFF_CPU_NS => c.off_cpu_ns = sum,
                i if (i as usize) < CtxState::ALL.len() => c.per_state[i as usize] = sum,
                _ => {}
            }
        }
        Ok(c)
    }

    /// Has the kernel account the programs' run time while this sampler lives
    /// (BPF_ENABLE_STATS: the same numbers kernel.bpf_stats_enabled=1 gives, without the global sysctl).
    pub fn enable_run_time_stats(&mut self) -> Result<(), SamplerError> {
        // SAFETY: plain syscall wrapper; returns a new descriptor or -errno.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            return Err(bpf_error("enabling run-time stats for", std::io::Error::from_raw_os_error(-fd).to_string(), None));
        }
        // SAFETY: fresh descriptor owned by us.
        self.stats = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        // And have the CPU program time its runs on tracked threads (Counters::cpu_sample_ns).
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.time_samples = 1;
        }
        Ok(())
    }

    /// The CPU program's accumulated run time and run count, as `bpftool prog show` reports them.
    pub fn program_stats(&self) -> Result<ProgramStats, SamplerError> {
        stats_of(self.skel.progs.sample_thread_ctx.as_fd().as_raw_fd())
    }

    /// Likewise for the sched_switch program (one run per context switch on the machine).
    pub fn off_cpu_program_stats(&self) -> Result<Option<ProgramStats>, SamplerError> {
        if !self.off_cpu_attached {
            return Ok(None);
        }
        stats_of(self.skel.progs.off_cpu_switch.as_fd().as_raw_fd()).map(Some)
    }
}

/// What the BPF program needs to read a node process's JS frames (`struct v8_target`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct V8Walk {
    /// Byte offset of the SharedFunctionInfo in a JSFunction.
    pub js_function_shared: u32,
    /// Where the embedded builtins run in the process: node's text, and the copy V8 may map
    /// next to its code (empty ranges when absent).
    pub builtins: [(u64, u64); 2],
    /// Where a walk that finds no JS frame goes on (the thread's last exit from JS), when known.
    pub exit: Option<ExitFrameWalk>,
}

/// How the BPF walk finds a thread's last exit from JS (thread-ctx-v8's `IsolateLayout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitFrameWalk {
    /// Where the thread's `Isolate*` is from its thread pointer.
    pub isolate_tp_offset: i64,
    /// Byte offset of the isolate's `c_entry_fp`.
    pub c_entry_fp: u64,
    /// Exit frame types (bit n: type n), which the frame's marker must name.
    pub exit_frame_types: u64,
}

impl V8Walk {
    /// The frame slots the BPF walk reads (`V8_FP_*` in bpf/sampler_abi.h), from the frame pointer:
    /// context, function, bytecode array, bytecode offset. A layout with others cannot be walked.
    pub const FRAME_SLOTS: [i64; 4] = [-8, -16, -32, -40];

    fn encode(&self, v: &mut types::v8_target) {
        v.enabled = 1;
        v.js_function_shared = self.js_function_shared;
        for (i, (start, end)) in self.builtins.iter().enumerate() {
            v.builtins_start[i] = *start;
            v.builtins_end[i] = *end;
        }
        if let Some(exit) = self.exit {
            v.isolate_tp_offset = exit.isolate_tp_offset;
            v.c_entry_fp = exit.c_entry_fp;
            v.exit_frame_types = exit.exit_frame_types;
        }
    }
}

fn target(reach: Option<RecordReach>) -> types::target {
    const TLS_ACCESS_STATIC: u32 = 1;
    const TLS_ACCESS_DTV: u32 = 2;
    let mut t = types::target::default();
    if let Some(layout) = reach.and_then(|r| r.nodejs) {
        super::nodejs_target::encode(&mut t, &layout);
    }
    match reach.map(|r| r.access) {
        None => {} // TLS_ACCESS_NONE
        Some(TlsAccess::Static { tp_offset }) => {
            t.access_kind = TLS_ACCESS_STATIC;
            t.tp_offset = tp_offset;
        }
        Some(TlsAccess::Dtv { dtv_offset, dtv_entry_size, module_id, offset }) => {
            t.access_kind = TLS_ACCESS_DTV;
            t.dtv_offset = dtv_offset;
            t.dtv_entry_size = dtv_entry_size;
            t.module_id = module_id;
            t.tls_offset = offset;
        }
    }
    t
}

/// Power-of-two bytes for RING_SECONDS of events from every CPU at `hz`.
fn ring_size(cpus: usize, hz: u32) -> u64 {
    let want = (cpus.max(1) as f64 * hz as f64 * EVENT_SIZE as f64 * RING_SECONDS) as u64;
    want.clamp(RING_MIN_BYTES, RING_MAX_BYTES).next_power_of_two()
}

fn open_and_load(storage: &'static mut MaybeUninit<OpenObject>, opts: SamplerOptions, ring_bytes: u64) -> Result<SamplerSkel<'static>, SamplerError> {
    let mut open: OpenSamplerSkel<'static> =
        SamplerSkelBuilder::default().open(storage).map_err(|e| bpf_error("opening", e.to_string(), Some(take_libbpf_log())))?;
    let cfg = &mut open.maps.rodata_data.as_deref_mut().ok_or_else(|| bpf_error("configuring", "no .rodata in the object".into(), None))?.cfg;
    cfg.capture_user_stack = opts.user_stacks as u32;
    cfg.capture_kernel_stack = opts.kernel_stacks as u32;
    cfg.wakeup_bytes = ring_bytes / 4;
    let sizing = |e: libbpf_rs::Error| bpf_error("sizing the maps of", e.to_string(), None);
    open.maps.events.set_max_entries(ring_bytes as u32).map_err(sizing)?;
    // Unused maps still cost their preallocation: shrink them to one entry.
    if !opts.off_cpu {
        open.maps.switched_out.set_max_entries(1).map_err(sizing)?;
        open.progs.off_cpu_switch.set_autoload(false);
    } else {
        open.maps.switched_out.set_max_entries(OFF_CPU_THREADS).map_err(sizing)?;
    }
    if !opts.alloc {
        open.progs.alloc_sample.set_autoload(false);
    }
    open.load().map_err(|e| {
        // Privileges were checked before: EACCES with them is the verifier refusing the program.
        let privileged = check_privileges().is_ok();
        if e.kind() == libbpf_rs::ErrorKind::PermissionDenied && !privileged {
            SamplerError::NeedsPrivilege { what: format!("loading the BPF program: {e}") }
        } else {
            bpf_error("loading", e.to_string(), Some(take_libbpf_log()))
        }
    })
}

pub(crate) fn stats_of(fd: i32) -> Result<ProgramStats, SamplerError> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a properly sized, zeroed bpf_prog_info; len tells the kernel its size.
    let ret = unsafe { libbpf_sys::bpf_obj_get_info_by_fd(fd, (&mut info as *mut libbpf_sys::bpf_prog_info).cast(), &mut len) };
    if ret != 0 {
        return Err(bpf_error("querying", std::io::Error::last_os_error().to_string(), None));
    }
    Ok(ProgramStats { run_time_ns: info.run_time_ns, run_cnt: info.run_cnt })
}

/// Root, or CAP_BPF + CAP_PERFMON (kernel 5.8+), or CAP_SYS_ADMIN.
fn check_privileges() -> Result<(), SamplerError> {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|v| u64::from_str_radix(v.trim(), 16).ok()).unwrap_or(0);
    let has = |cap: u32| eff & (1 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    Err(SamplerError::NeedsPrivilege { what: format!("running as uid {euid} with effective capabilities {eff:#x}") })
}

fn perf_event_error(cpu: u32, hz: u32, source: std::io::Error) -> SamplerError {
    match source.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => SamplerError::NeedsPrivilege { what: format!("perf_event_open on CPU {cpu}: {source}") },
        Some(libc::EINVAL) => SamplerError::PerfEvent { cpu, hz, source, hint: " (is --hz above the sysctl kernel.perf_event_max_sample_rate?)" },
        _ => SamplerError::PerfEvent { cpu, hz, source, hint: "" },
    }
}

pub(crate) fn bpf_error(stage: &'static str, reason: String, log: Option<String>) -> SamplerError {
    let log = log.filter(|l| !l.is_empty()).map(|l| format!("\nlibbpf said:\n{l}")).unwrap_or_default();
    SamplerError::Bpf { stage, reason, log }
}

// libbpf's messages (verifier log included) are kept, not printed, and shown when loading fails.
static LIBBPF_LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
const LIBBPF_LOG_LINES: usize = 60;

fn capture_libbpf_log() {
    fn keep(_level: PrintLevel, msg: String) {
        let mut log = LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner());
        log.push(msg.trim_end().to_string());
        let excess = log.len().saturating_sub(LIBBPF_LOG_LINES);
        log.drain(..excess);
    }
    libbpf_rs::set_print(Some((PrintLevel::Info, keep)));
}

fn take_libbpf_log() -> String {
    std::mem::take(&mut *LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner())).join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_is_a_bounded_power_of_two() {
        assert_eq!(ring_size(2, 49), RING_MIN_BYTES);
        assert_eq!(ring_size(2, 999), 1 << 24); // 2 x 999 x 5,192 bytes: a second of the largest events
        let big = ring_size(256, 999);
        assert!(big.is_power_of_two() && big <= RING_MAX_BYTES, "{big}");
    }
}
