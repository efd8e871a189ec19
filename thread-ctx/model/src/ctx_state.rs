//! What one sample found when it read its thread's record (`enum ctx_state` of the sampler's
//! bpf/sampler_abi.h): a sample carries it, and the summary says why a sample has no span by it.

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
