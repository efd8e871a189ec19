//! How a reader reaches one thread's `otel_thread_ctx_v1` slot, given that
//! thread's thread pointer (x86-64: fs_base). Produced by discovery, consumed by
//! the ptrace reader and handed down to the eBPF sampler.

/// glibc x86-64: `tcbhead_t.dtv` is the second word of the TCB the thread pointer points at.
pub const GLIBC_X86_64_DTV_OFFSET: u64 = 8;
/// glibc: `sizeof(dtv_t)` on 64-bit targets (a {pointer, to_free} pair).
pub const GLIBC_DTV_ENTRY_SIZE: u64 = 16;

/// Resolved access to the TLS slot that holds the record pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsAccess {
    /// Static TLS: slot address = tp + tp_offset (tp_offset is negative on x86-64 variant II).
    Static { tp_offset: i64 },
    /// Dynamic TLS: slot address = *(*(tp + dtv_offset) + module_id * dtv_entry_size) + offset.
    /// glibc x86-64: dtv_offset 8, dtv_entry_size 16.
    Dtv { dtv_offset: u64, dtv_entry_size: u64, module_id: u64, offset: u64 },
}

impl TlsAccess {
    /// A DTV walk with glibc x86-64's layout.
    pub fn glibc_dtv(module_id: u64, offset: u64) -> Self {
        TlsAccess::Dtv { dtv_offset: GLIBC_X86_64_DTV_OFFSET, dtv_entry_size: GLIBC_DTV_ENTRY_SIZE, module_id, offset }
    }

    pub fn is_static(&self) -> bool {
        matches!(self, TlsAccess::Static { .. })
    }
}

impl std::fmt::Display for TlsAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsAccess::Static { tp_offset } => write!(f, "static TLS, slot = tp {tp_offset:+}"),
            TlsAccess::Dtv { dtv_offset, dtv_entry_size, module_id, offset } => {
                write!(f, "dynamic TLS (DTV walk), slot = *(*(tp + {dtv_offset}) + {module_id} * {dtv_entry_size}) + {offset:#x}")
            }
        }
    }
}
