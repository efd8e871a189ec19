//! The allocation program of a loaded [`Sampler`]: attached per object that
//! holds V8 ([`ProbeSite`]), not per process, so every tracked process mapping
//! that `node` is covered by one uprobe (the program ignores untracked ones);
//! its run time and counters.

use super::ProbeSite;
use crate::bpf_sampler::{bpf_error, stats_of, ProgramStats, Sampler};
use crate::ctx_state::{COUNTER_ALLOC_DROPPED, COUNTER_ALLOC_OTHER, COUNTER_ALLOC_VALID};
use crate::error::SamplerError;
use libbpf_rs::{Link, MapCore, MapFlags};
use std::os::fd::{AsFd, AsRawFd};

/// Allocation samples the BPF program counted itself, independent of delivery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocCounters {
    /// Sent with the thread's valid record.
    pub valid: u64,
    /// Sent without one (no span published, or the record was unreachable).
    pub other: u64,
    /// Lost because the ring buffer was full.
    pub dropped: u64,
}

impl Sampler {
    /// Attaches the allocation program at `site`, for every process that maps the same file.
    /// Dropping the link detaches it.
    pub fn attach_alloc_probe(&self, site: &ProbeSite) -> Result<Link, SamplerError> {
        self.skel.progs.alloc_sample.attach_uprobe(false, -1, &site.attach_path, site.offset.file_offset as usize).map_err(|e| {
            bpf_error("attaching the allocation uprobe of", format!("{} at file offset {:#x}: {e}", site.path, site.offset.file_offset), None)
        })
    }

    /// The allocation program's accumulated run time and run count (runs of untracked processes included).
    pub fn alloc_program_stats(&self) -> Result<ProgramStats, SamplerError> {
        stats_of(self.skel.progs.alloc_sample.as_fd().as_raw_fd())
    }

    /// Sums the allocation program's per-CPU counters.
    pub fn alloc_counters(&self) -> Result<AllocCounters, SamplerError> {
        let sum = |index: u32| -> Result<u64, SamplerError> {
            let per_cpu = self
                .skel
                .maps
                .counters
                .lookup_percpu(&index.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| SamplerError::Map { map: "counters", reason: e.to_string() })?
                .unwrap_or_default();
            Ok(per_cpu.iter().map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap())).sum())
        };
        Ok(AllocCounters { valid: sum(COUNTER_ALLOC_VALID)?, other: sum(COUNTER_ALLOC_OTHER)?, dropped: sum(COUNTER_ALLOC_DROPPED)? })
    }
}
