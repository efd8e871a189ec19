//! Loads the BPF sampler for one target process, attaches it to a cpu-clock
//! event on every online CPU (and, for off-CPU time, the sched_switch program
//! to the scheduler) and delivers decoded events from their ring buffers.

use super::abi::{SamplerConfig, CtxState, COUNTER_COUNT, COUNTER_DROPPED, STACK_MAP_DEPTH};
use super::error::SamplerError;
use super::perf_event::{online_cpus, open_cpu_clock};
use super::sample::{EventKind, Sample};
use crate::access::TlsAccess;
use libbpf_rs::{Link, MapCore, MapFlags, Object, ObjectBuilder, PrintLevel, RingBufferBuilder};
use std::cell::{Cell, RefCell};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sampler.bpf.o"));
static OFF_CPU_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/off_cpu.bpf.o"));
const PROGRAM: &str = "sample_thread_ctx";
const OFF_CPU_PROGRAM: &str = "off_cpu_switch";
/// Stack map sizes. The kernel preallocates every entry (127 frames, ~1 KiB),
/// and a stack hashing to a taken bucket is lost (-EEXIST, counted by `record`),
/// so the CPU map is as large as bcc's profiler uses by default (~17 MB).
pub const CPU_STACK_MAP_ENTRIES: u32 = 16384;
/// Off-CPU stacks are few (the places where threads block): ~4 MB.
pub const OFF_CPU_STACK_MAP_ENTRIES: u32 = 4096;
const POLL_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy)]
pub struct SamplerOptions {
    /// Target process (tgid in the initial PID namespace).
    pub pid: u32,
    /// How the target's threads reach their otel_thread_ctx_v1 slot (from discovery).
    pub access: TlsAccess,
    /// Samples per second per CPU.
    pub hz: u32,
    /// Capture the user stack id of each sample (frame pointers).
    pub user_stacks: bool,
}

/// What `record`'s profile outputs add to plain sampling.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProfileOptions {
    /// Capture kernel stacks too.
    pub kernel_stacks: bool,
    /// Also trace sched_switch: off-CPU intervals of the target's threads.
    pub off_cpu: bool,
}

/// The loaded sched_switch program. Field order is drop order: detach, then unload.
struct OffCpu {
    _link: Link,
    object: Object,
}

/// Totals kept by the BPF program itself, independent of ring-buffer delivery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Samples of the target's threads, by what they found (`CtxState as usize`).
    pub per_state: [u64; CtxState::ALL.len()],
    /// Samples lost because the ring buffer was full.
    pub dropped: u64,
}

impl Counters {
    pub fn get(&self, s: CtxState) -> u64 {
        self.per_state[s as usize]
    }
    pub fn total(&self) -> u64 {
        self.per_state.iter().sum()
    }
}

/// Run-time statistics of the BPF program (kernel.bpf_stats_enabled or `enable_run_time_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramStats {
    pub run_time_ns: u64,
    pub run_cnt: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    Deadline,
    Stopped,
    TargetExited,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOutcome {
    pub end: RunEnd,
    /// Ring-buffer events that did not decode (ABI mismatch; should stay 0).
    pub undecodable: u64,
}

/// A loaded and attached sampler. Dropping it detaches and unloads everything.
pub struct Sampler {
    // Field order is drop order: detach the links, close the events, then unload.
    _links: Vec<Link>,
    _perf_events: Vec<OwnedFd>,
    off_cpu: Option<OffCpu>,
    object: Object,
    stats: Option<OwnedFd>,
    pid: u32,
    cpus: usize,
}

impl Sampler {
    pub fn start(opts: SamplerOptions) -> Result<Sampler, SamplerError> {
        Self::start_with(opts, ProfileOptions::default())
    }

    pub fn start_with(opts: SamplerOptions, extra: ProfileOptions) -> Result<Sampler, SamplerError> {
        if !cfg!(target_arch = "x86_64") {
            return Err(SamplerError::UnsupportedArch(std::env::consts::ARCH));
        }
        check_privileges()?;
        capture_libbpf_log();
        let mut config = SamplerConfig::new(opts.pid, opts.access, opts.user_stacks);
        config.capture_kernel_stack = extra.kernel_stacks as u32;
        // An unused stack map still costs its preallocation: shrink it to one entry.
        let stack_entries = |n: u32| if opts.user_stacks || extra.kernel_stacks { n } else { 1 };
        let object = load(OBJECT, config, stack_entries(CPU_STACK_MAP_ENTRIES))?;
        let off_cpu = if extra.off_cpu {
            let object = load(OFF_CPU_OBJECT, config, stack_entries(OFF_CPU_STACK_MAP_ENTRIES))?;
            let link = program(&object, OFF_CPU_PROGRAM)?
                .attach()
                .map_err(|e| bpf_error("attaching the sched_switch tracepoint of", e.to_string(), Some(take_libbpf_log())))?;
            Some(OffCpu { _link: link, object })
        } else {
            None
        };
        let cpus = online_cpus().map_err(SamplerError::Cpus)?;
        let prog = program(&object, PROGRAM)?;
        let mut links = Vec::with_capacity(cpus.len());
        let mut perf_events = Vec::with_capacity(cpus.len());
        for &cpu in &cpus {
            let fd = open_cpu_clock(cpu, opts.hz).map_err(|source| perf_event_error(cpu, opts.hz, source))?;
            let link = prog.attach_perf_event(fd.as_raw_fd()).map_err(|e| bpf_error("attaching", e.to_string(), None))?;
            links.push(link);
            perf_events.push(fd);
        }
        Ok(Sampler { _links: links, _perf_events: perf_events, off_cpu, object, stats: None, pid: opts.pid, cpus: cpus.len() })
    }

    /// Number of CPUs sampled.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// Has the kernel account the program's run time while this sampler lives
    /// (BPF_ENABLE_STATS: the same numbers kernel.bpf_stats_enabled=1 gives, without the global sysctl).
    pub fn enable_run_time_stats(&mut self) -> Result<(), SamplerError> {
        // SAFETY: plain syscall wrapper; returns a new descriptor or -errno.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            return Err(bpf_error("enabling run-time stats for", std::io::Error::from_raw_os_error(-fd).to_string(), None));
        }
        // SAFETY: fresh descriptor owned by us.
        self.stats = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(())
    }

    /// Delivers samples to `on_sample` until `deadline`, until `stop()` says so, or until the target exits.
    pub fn run(
        &self,
        deadline: Instant,
        stop: &dyn Fn() -> bool,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<RunOutcome, SamplerError> {
        let undecodable = Cell::new(0u64);
        // Both ring buffers feed one sink; libbpf calls the callbacks one at a time.
        let sink = RefCell::new(on_sample);
        let deliver = |data: &[u8]| {
            match Sample::decode(data) {
                Ok(s) => (sink.borrow_mut())(s),
                Err(_) => undecodable.set(undecodable.get() + 1),
            }
            0
        };
        let events = self.map("events")?;
        let off_cpu_events = self.off_cpu.as_ref().map(|o| map_of(&o.object, "events")).transpose()?;
        let mut builder = RingBufferBuilder::new();
        builder.add(&events, deliver).map_err(|e| bpf_error("polling", e.to_string(), None))?;
        if let Some(m) = &off_cpu_events {
            builder.add(m, deliver).map_err(|e| bpf_error("polling", e.to_string(), None))?;
        }
        let ring = builder.build().map_err(|e| bpf_error("polling", e.to_string(), None))?;
        let end = loop {
            if Instant::now() >= deadline {
                break RunEnd::Deadline;
            }
            if stop() {
                break RunEnd::Stopped;
            }
            if !process_exists(self.pid) {
                break RunEnd::TargetExited;
            }
            let wait = POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now()));
            // EINTR (e.g. Ctrl-C) is not an error: the loop re-checks stop().
            if let Err(e) = ring.poll(wait) {
                if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                    return Err(bpf_error("polling", e.to_string(), None));
                }
            }
            // The BPF side wakes us only when the ring fills up: drain what came in meanwhile.
            ring.consume().map_err(|e| bpf_error("draining", e.to_string(), None))?;
        };
        ring.consume().map_err(|e| bpf_error("draining", e.to_string(), None))?;
        Ok(RunOutcome { end, undecodable: undecodable.get() })
    }

    /// Sums the per-CPU counters of the CPU sampling program.
    pub fn counters(&self) -> Result<Counters, SamplerError> {
        counters_of(&self.object)
    }

    /// The off-CPU program's counters (per state: what the record read at switch-out found).
    pub fn off_cpu_counters(&self) -> Result<Option<Counters>, SamplerError> {
        self.off_cpu.as_ref().map(|o| counters_of(&o.object)).transpose()
    }

    /// Instruction pointers of a captured user stack, innermost first.
    pub fn user_stack(&self, id: u32) -> Result<Option<Vec<u64>>, SamplerError> {
        stack_of(&self.object, id)
    }

    /// A stack id of an event, resolved in the stack map of the program that sent it.
    pub fn stack(&self, kind: EventKind, id: u32) -> Result<Option<Vec<u64>>, SamplerError> {
        match (kind, &self.off_cpu) {
            (EventKind::Cpu, _) => stack_of(&self.object, id),
            (EventKind::OffCpu, Some(o)) => stack_of(&o.object, id),
            (EventKind::OffCpu, None) => Ok(None),
        }
    }

    /// The program's accumulated run time and run count, as `bpftool prog show` reports them.
    pub fn program_stats(&self) -> Result<ProgramStats, SamplerError> {
        stats_of(&self.object, PROGRAM)
    }

    /// Likewise for the sched_switch program (one run per context switch on the machine).
    pub fn off_cpu_program_stats(&self) -> Result<Option<ProgramStats>, SamplerError> {
        self.off_cpu.as_ref().map(|o| stats_of(&o.object, OFF_CPU_PROGRAM)).transpose()
    }


    fn map(&self, name: &'static str) -> Result<libbpf_rs::Map<'_>, SamplerError> {
        map_of(&self.object, name)
    }
}

fn map_of<'a>(object: &'a Object, name: &'static str) -> Result<libbpf_rs::Map<'a>, SamplerError> {
    object.maps().find(|m| m.name() == name).ok_or_else(|| SamplerError::Map { map: name, reason: "not in the BPF object".into() })
}

fn program<'a>(object: &'a Object, name: &str) -> Result<libbpf_rs::ProgramMut<'a>, SamplerError> {
    object
        .progs_mut()
        .find(|p| p.name() == name)
        .ok_or_else(|| bpf_error("finding", format!("no program {name} in the object"), None))
}

fn counters_of(object: &Object) -> Result<Counters, SamplerError> {
    let map = map_of(object, "counters")?;
    let mut c = Counters::default();
    for index in 0..COUNTER_COUNT {
        let per_cpu = map
            .lookup_percpu(&index.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| SamplerError::Map { map: "counters", reason: e.to_string() })?
            .unwrap_or_default();
        let sum: u64 = per_cpu.iter().map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap())).sum();
        if index == COUNTER_DROPPED {
            c.dropped = sum;
        } else {
            c.per_state[index as usize] = sum;
        }
    }
    Ok(c)
}

/// Instruction pointers of a stack in `object`'s stack map, innermost first.
fn stack_of(object: &Object, id: u32) -> Result<Option<Vec<u64>>, SamplerError> {
    let map = map_of(object, "stacks")?;
    let value = map
        .lookup(&id.to_ne_bytes(), MapFlags::ANY)
        .map_err(|e| SamplerError::Map { map: "stacks", reason: e.to_string() })?;
    Ok(value.map(|v| {
        v.chunks_exact(8)
            .take(STACK_MAP_DEPTH)
            .map(|w| u64::from_ne_bytes(w.try_into().unwrap()))
            .take_while(|&ip| ip != 0)
            .collect()
    }))
}

fn stats_of(object: &Object, name: &str) -> Result<ProgramStats, SamplerError> {
    let prog = object.progs().find(|p| p.name() == name).expect("program present after load");
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a properly sized, zeroed bpf_prog_info; len tells the kernel its size.
    let ret = unsafe {
        libbpf_sys::bpf_obj_get_info_by_fd(prog.as_fd().as_raw_fd(), (&mut info as *mut libbpf_sys::bpf_prog_info).cast(), &mut len)
    };
    if ret != 0 {
        return Err(bpf_error("querying", std::io::Error::last_os_error().to_string(), None));
    }
    Ok(ProgramStats { run_time_ns: info.run_time_ns, run_cnt: info.run_cnt })
}

fn load(object: &'static [u8], config: SamplerConfig, stack_entries: u32) -> Result<Object, SamplerError> {
    if object.is_empty() {
        return Err(SamplerError::UnsupportedArch(std::env::consts::ARCH));
    }
    let mut builder = ObjectBuilder::default();
    let mut open = builder.open_memory(object).map_err(|e| bpf_error("opening", e.to_string(), None))?;
    if let Some(mut stacks) = open.maps_mut().find(|m| m.name() == "stacks") {
        stacks.set_max_entries(stack_entries).map_err(|e| bpf_error("sizing the stack map of", e.to_string(), None))?;
    }
    {
        let mut rodata = open
            .maps_mut()
            .find(|m| m.name().to_string_lossy().ends_with(".rodata"))
            .ok_or_else(|| bpf_error("configuring", "no .rodata map in the object".into(), None))?;
        rodata
            .set_initial_value(config.as_bytes())
            .map_err(|e| bpf_error("configuring", e.to_string(), None))?;
    }
    open.load().map_err(|e| {
        if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
            SamplerError::NeedsPrivilege { what: format!("loading the BPF program: {e}") }
        } else {
            bpf_error("loading", e.to_string(), Some(take_libbpf_log()))
        }
    })
}

/// Root, or CAP_BPF + CAP_PERFMON (kernel 5.8+), or CAP_SYS_ADMIN.
fn check_privileges() -> Result<(), SamplerError> {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |cap: u32| eff & (1 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    Err(SamplerError::NeedsPrivilege { what: format!("running as uid {euid} with effective capabilities {eff:#x}") })
}

fn process_exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks existence/permission.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 || *libc::__errno_location() != libc::ESRCH }
}

fn perf_event_error(cpu: u32, hz: u32, source: std::io::Error) -> SamplerError {
    match source.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            SamplerError::NeedsPrivilege { what: format!("perf_event_open on CPU {cpu}: {source}") }
        }
        Some(libc::EINVAL) => SamplerError::PerfEvent {
            cpu,
            hz,
            source,
            hint: " (is --hz above the sysctl kernel.perf_event_max_sample_rate?)",
        },
        _ => SamplerError::PerfEvent { cpu, hz, source, hint: "" },
    }
}

fn bpf_error(stage: &'static str, reason: String, log: Option<String>) -> SamplerError {
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
