//! Sampler errors: each says what failed and what the user can do about it.

use std::io;
use thread_ctx_discovery::error::ErrorKind;

pub const PRIVILEGE_HINT: &str =
    "eBPF needs root (or the CAP_BPF and CAP_PERFMON capabilities, and CAP_SYS_PTRACE to read other users' processes): run thread-ctx with sudo";

#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    #[error("{PRIVILEGE_HINT} ({what})")]
    NeedsPrivilege { what: String },

    #[error("the eBPF sampler supports x86-64 only (it reads task->thread.fsbase); this is {0}")]
    UnsupportedArch(&'static str),

    #[error("listing online CPUs: {0}")]
    Cpus(io::Error),

    #[error("opening a cpu-clock perf event on CPU {cpu} at {hz} Hz: {source}{hint}")]
    PerfEvent { cpu: u32, hz: u32, source: io::Error, hint: &'static str },

    #[error("{stage} the BPF sampler program: {reason}{log}")]
    Bpf { stage: &'static str, reason: String, log: String },

    #[error("reading the sampler's {map} map: {reason}")]
    Map { map: &'static str, reason: String },

    #[error("tracking process {pid} (at most {max} processes at once): {reason}")]
    Track { pid: u32, max: usize, reason: String },
}

impl SamplerError {
    /// What the error means for the caller: eBPF refused for want of privilege, or else.
    pub fn kind(&self) -> ErrorKind {
        match self {
            SamplerError::NeedsPrivilege { .. } => ErrorKind::NoPermission,
            _ => ErrorKind::Other,
        }
    }
}
