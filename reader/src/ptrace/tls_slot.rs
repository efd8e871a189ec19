//! Per-thread step: thread pointer + `TlsAccess` -> address of the thread's
//! `otel_thread_ctx_v1` slot, walking glibc's dynamic thread vector when needed.

use crate::discovery::tls_access::TlsAccess;
use crate::error::Result;
use crate::discovery::remote_memory::RemoteMemory;

/// glibc's marker for a DTV entry whose block was never allocated in this thread.
const TLS_DTV_UNALLOCATED: u64 = u64::MAX;

/// Where a thread's slot is, or why the thread has none (not an error: a thread
/// that never touched a dynamically loaded module's TLS has no block for it yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    At(u64),
    Absent(String),
}

pub fn slot_address(access: &TlsAccess, tp: u64, mem: &RemoteMemory) -> Result<Slot> {
    match *access {
        TlsAccess::Static { tp_offset } => Ok(Slot::At(tp.wrapping_add_signed(tp_offset))),
        TlsAccess::Dtv { dtv_offset, dtv_entry_size, module_id, offset } => {
            let dtv = mem.read_u64(tp + dtv_offset, "thread control block dtv pointer")?;
            if dtv == 0 {
                return Ok(Slot::Absent("thread has no DTV".into()));
            }
            // glibc keeps the DTV's slot count in the entry before dtv[0] (the generation).
            let len = mem.read_u64(dtv - dtv_entry_size, "DTV length")?;
            if module_id > len {
                return Ok(Slot::Absent(format!("DTV has {len} slots, module {module_id} not present yet")));
            }
            let block = mem.read_u64(dtv + module_id * dtv_entry_size, "DTV entry")?;
            if block == 0 || block == TLS_DTV_UNALLOCATED {
                return Ok(Slot::Absent(format!("TLS block of module {module_id} not allocated in this thread")));
            }
            Ok(Slot::At(block.wrapping_add(offset)))
        }
    }
}
