//! How a reader reaches one thread's `otel_thread_ctx_v1` slot, given that
//! thread's thread pointer (x86-64: fs_base). Produced by discovery, consumed by
//! the ptrace reader and handed down to the eBPF sampler.

/// Resolved access to the TLS slot that holds the record pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsAccess {
    /// Static TLS: slot address = tp + tp_offset (tp_offset is negative on x86-64 variant II).
    Static { tp_offset: i64 },
    /// Dynamic TLS: slot address = *(*(tp + dtv_offset) + module_id * dtv_entry_size) + offset.
    /// glibc x86-64: dtv_offset 8, dtv_entry_size 16.
    Dtv { dtv_offset: u64, dtv_entry_size: u64, module_id: u64, offset: u64 },
}
