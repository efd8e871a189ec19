//! What one sample found when it read its thread's record (`enum ctx_state` of
//! bpf/sampler_abi.h, the data model's [`CtxState`]), and the layout of the in-kernel `counters`
//! map.

pub use thread_ctx_model::CtxState;

/// `counters` map indices past the per-state counts of CPU samples (`enum counter_index`).
pub(crate) const COUNTER_CPU_DROPPED: u32 = CtxState::ALL.len() as u32;
pub(crate) const COUNTER_OFF_CPU_DROPPED: u32 = COUNTER_CPU_DROPPED + 1;
pub(crate) const COUNTER_OFF_CPU_SAMPLES: u32 = COUNTER_CPU_DROPPED + 2;
pub(crate) const COUNTER_ALLOC_VALID: u32 = COUNTER_CPU_DROPPED + 3;
pub(crate) const COUNTER_ALLOC_OTHER: u32 = COUNTER_CPU_DROPPED + 4;
pub(crate) const COUNTER_ALLOC_DROPPED: u32 = COUNTER_CPU_DROPPED + 5;
pub(crate) const COUNTER_CPU_SAMPLE_NS: u32 = COUNTER_CPU_DROPPED + 6;
pub(crate) const COUNTER_OFF_CPU_NS: u32 = COUNTER_CPU_DROPPED + 7;
pub(crate) const COUNTER_COUNT: u32 = COUNTER_CPU_DROPPED + 8;

/// Totals kept by the BPF programs themselves, independent of ring-buffer delivery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// CPU samples of tracked threads delivered, by what they found (`CtxState as usize`).
    pub per_state: [u64; CtxState::ALL.len()],
    /// CPU samples lost because the ring buffer was full.
    pub dropped: u64,
    /// Off-CPU intervals sent, and lost because the ring buffer was full.
    pub off_cpu_sent: u64,
    pub off_cpu_dropped: u64,
    /// Allocation samples sent, and lost because the ring buffer was full.
    pub alloc_sent: u64,
    pub alloc_dropped: u64,
    /// Nanoseconds the CPU program ran for tracked threads' ticks while it was being measured
    /// ([`crate::Sampler::enable_run_time_stats`]).
    pub cpu_sample_ns: u64,
    /// Likewise for the off-CPU program on tracked threads' switches, out and in.
    pub off_cpu_ns: u64,
}

impl Counters {
    pub fn get(&self, s: CtxState) -> u64 {
        self.per_state[s as usize]
    }

    /// CPU samples delivered.
    pub fn total(&self) -> u64 {
        self.per_state.iter().sum()
    }

    /// Events of either kind lost to a full ring buffer.
    pub fn all_dropped(&self) -> u64 {
        self.dropped + self.off_cpu_dropped + self.alloc_dropped
    }

    /// What happened since `earlier` (counters only grow).
    pub fn since(&self, earlier: &Counters) -> Counters {
        let mut d = *self;
        for (v, e) in d.per_state.iter_mut().zip(earlier.per_state) {
            *v = v.saturating_sub(e);
        }
        d.dropped = d.dropped.saturating_sub(earlier.dropped);
        d.off_cpu_sent = d.off_cpu_sent.saturating_sub(earlier.off_cpu_sent);
        d.off_cpu_dropped = d.off_cpu_dropped.saturating_sub(earlier.off_cpu_dropped);
        d.alloc_sent = d.alloc_sent.saturating_sub(earlier.alloc_sent);
        d.alloc_dropped = d.alloc_dropped.saturating_sub(earlier.alloc_dropped);
        d.cpu_sample_ns = d.cpu_sample_ns.saturating_sub(earlier.cpu_sample_ns);
        d.off_cpu_ns = d.off_cpu_ns.saturating_sub(earlier.off_cpu_ns);
        d
    }
}
