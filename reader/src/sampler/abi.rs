//! Rust mirrors of bpf/sampler_abi.h: the .rodata config the loader fills in
//! and the event the BPF program sends. Sizes are asserted on both sides.

use crate::access::TlsAccess;

pub const HEADER_SIZE: usize = 28;
pub const ATTRS_MAX: usize = 612;
pub const STACK_MAP_DEPTH: usize = 127;

const TLS_ACCESS_STATIC: u32 = 1;
const TLS_ACCESS_DTV: u32 = 2;

/// `struct sampler_config` (.rodata of the BPF object).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SamplerConfig {
    pub target_tgid: u32,
    pub access_kind: u32,
    pub tp_offset: i64,
    pub dtv_offset: u64,
    pub dtv_entry_size: u64,
    pub module_id: u64,
    pub tls_offset: u64,
    pub capture_user_stack: u32,
    pub capture_kernel_stack: u32,
}
const _: () = assert!(std::mem::size_of::<SamplerConfig>() == 56);

impl SamplerConfig {
    pub fn new(target_tgid: u32, access: TlsAccess, capture_user_stack: bool) -> Self {
        let mut c = SamplerConfig { target_tgid, capture_user_stack: capture_user_stack as u32, ..Default::default() };
        match access {
            TlsAccess::Static { tp_offset } => {
                c.access_kind = TLS_ACCESS_STATIC;
                c.tp_offset = tp_offset;
            }
            TlsAccess::Dtv { dtv_offset, dtv_entry_size, module_id, offset } => {
                c.access_kind = TLS_ACCESS_DTV;
                c.dtv_offset = dtv_offset;
                c.dtv_entry_size = dtv_entry_size;
                c.module_id = module_id;
                c.tls_offset = offset;
            }
        }
        c
    }

    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: repr(C), plain integers, no padding (56 = sum of the field sizes).
        unsafe { std::slice::from_raw_parts((self as *const Self).cast::<u8>(), std::mem::size_of::<Self>()) }
    }
}

/// `enum ctx_state`: what one sample found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CtxState {
    NoSlot = 0,
    SlotFault = 1,
    NullRecord = 2,
    RecordFault = 3,
    Invalid = 4,
    Valid = 5,
    Torn = 6,
    Oversize = 7,
}

impl CtxState {
    pub const ALL: [CtxState; 8] = [
        CtxState::NoSlot,
        CtxState::SlotFault,
        CtxState::NullRecord,
        CtxState::RecordFault,
        CtxState::Invalid,
        CtxState::Valid,
        CtxState::Torn,
        CtxState::Oversize,
    ];

    pub fn from_raw(v: u8) -> Option<Self> {
        Self::ALL.get(v as usize).copied()
    }

    /// Stable name used in JSON output and the summary.
    pub fn name(self) -> &'static str {
        match self {
            CtxState::NoSlot => "no_tls_block",
            CtxState::SlotFault => "tls_slot_fault",
            CtxState::NullRecord => "null_record",
            CtxState::RecordFault => "record_fault",
            CtxState::Invalid => "not_valid",
            CtxState::Valid => "valid",
            CtxState::Torn => "torn",
            CtxState::Oversize => "attrs_oversize",
        }
    }

    /// The BPF program copied the header (the record was reachable).
    pub fn has_header(self) -> bool {
        matches!(self, CtxState::Invalid | CtxState::Valid | CtxState::Torn | CtxState::Oversize)
    }
}

/// Index of the drop counter in the `counters` map, after one counter per state.
pub const COUNTER_DROPPED: u32 = CtxState::ALL.len() as u32;
pub const COUNTER_COUNT: u32 = COUNTER_DROPPED + 1;

/// `enum event_kind`.
pub const EVENT_CPU_SAMPLE: u8 = 0;
pub const EVENT_OFF_CPU: u8 = 1;
/// `sample_event.flags`: an off-CPU event of a thread switched out while runnable.
pub const EVENT_FLAG_PREEMPTED: u16 = 1;

/// `struct sample_event`, as it arrives from the ring buffer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawEvent {
    pub time_ns: u64,
    pub record_addr: u64,
    pub pid: u32,
    pub tid: u32,
    pub user_stack_id: i32,
    pub kernel_stack_id: i32,
    pub cpu: u32,
    pub kind: u8,
    pub state: u8,
    pub flags: u16,
    pub duration_ns: u64,
    pub header: [u8; HEADER_SIZE],
    pub attrs: [u8; ATTRS_MAX],
}
pub const RAW_EVENT_SIZE: usize = 688;
const _: () = assert!(std::mem::size_of::<RawEvent>() == RAW_EVENT_SIZE);

impl RawEvent {
    /// Copies an event out of ring-buffer bytes; None when the size is not the ABI's.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != RAW_EVENT_SIZE {
            return None;
        }
        // SAFETY: length checked; RawEvent is plain old data valid for any bit pattern.
        Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<RawEvent>()) })
    }
}
