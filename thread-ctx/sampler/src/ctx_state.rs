//! What one sample found when it read its thread's record (`enum ctx_state`
//! of bpf/sampler_abi.h), and the layout of the in-kernel `counters` map.

/// Declares [`CtxState`] (its values are `enum ctx_state`'s), [`CtxState::ALL`] in value order
/// and each state's stable name, from one list.
macro_rules! ctx_states {
    ($($(#[doc = $doc:literal])* $state:ident = $value:literal => $name:literal,)*) => {
        /// `enum ctx_state`: what one sample found.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum CtxState {
            $($(#[doc = $doc])* $state = $value,)*
        }

        impl CtxState {
            /// Every state, in value order: `ALL[v]` has value `v`.
            pub const ALL: [CtxState; [$($value),*].len()] = [$(CtxState::$state),*];

            /// Stable name used in JSON output and the summary.
            pub fn name(self) -> &'static str {
                match self {
                    $(CtxState::$state => $name,)*
                }
            }
        }
    };
}

ctx_states! {
    NoSlot = 0 => "no_tls_block",
    SlotFault = 1 => "tls_slot_fault",
    NullRecord = 2 => "null_record",
    RecordFault = 3 => "record_fault",
    Invalid = 4 => "not_valid",
    Valid = 5 => "valid",
    Torn = 6 => "torn",
    Oversize = 7 => "attrs_oversize",
    /// The process is sampled for its stacks but has no resolvable writer.
    NoWriter = 8 => "no_writer",
    /// nodejs_v1_dev: no frame, no entry for the writer's ALS, an undefined
    /// store or a cleared embedder field: no context right now.
    NodeNoStore = 9 => "nodejs_no_store",
    /// nodejs_v1_dev: a read on the way to the record faulted.
    NodeFrameFault = 10 => "nodejs_frame_fault",
    /// nodejs_v1_dev: a word V8 would not put there (untagged pointer,
    /// non-Smi count while the table is rehashed, bad bucket count or index).
    NodeBadFrame = 11 => "nodejs_bad_frame",
    /// nodejs_v1_dev: the bucket chain did not end within the walk's bound.
    NodeChainTooLong = 12 => "nodejs_chain_too_long",
}

// `from_raw` indexes ALL by value: the list above must be in value order, without a gap.
const _: () = {
    let mut i = 0;
    while i < CtxState::ALL.len() {
        assert!(CtxState::ALL[i] as usize == i, "ctx_states! lists the states in value order");
        i += 1;
    }
};

impl CtxState {
    pub fn from_raw(v: u8) -> Option<Self> {
        Self::ALL.get(v as usize).copied()
    }

    /// The BPF program copied the header (the record was reachable).
    pub fn has_header(self) -> bool {
        matches!(self, CtxState::Invalid | CtxState::Valid | CtxState::Torn | CtxState::Oversize)
    }
}

/// `counters` map indices past the per-state counts of CPU samples (`enum counter_index`).
pub(crate) const COUNTER_CPU_DROPPED: u32 = CtxState::ALL.len() as u32;
pub(crate) const COUNTER_OFF_CPU_DROPPED: u32 = COUNTER_CPU_DROPPED + 1;
pub(crate) const COUNTER_OFF_CPU_SAMPLES: u32 = COUNTER_CPU_DROPPED + 2;
pub(crate) const COUNTER_ALLOC_VALID: u32 = COUNTER_CPU_DROPPED + 3;
pub(crate) const COUNTER_ALLOC_OTHER: u32 = COUNTER_CPU_DROPPED + 4;
pub(crate) const COUNTER_ALLOC_DROPPED: u32 = COUNTER_CPU_DROPPED + 5;
pub(crate) const COUNTER_CPU_SAMPLE_NS: u32 = COUNTER_CPU_DROPPED + 6;
pub(crate) const COUNTER_COUNT: u32 = COUNTER_CPU_DROPPED + 7;

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
        d
    }
}
