//! Per-thread step: thread pointer + `TlsAccess` -> address of the thread's
//! `otel_thread_ctx_v1` slot, walking glibc's dynamic thread vector when needed.

use crate::error::{Error, Result};
use crate::remote_memory::TargetMemory;
use crate::tls_access::TlsAccess;

/// glibc's marker for a DTV entry whose block was never allocated in this thread.
const TLS_DTV_UNALLOCATED: u64 = u64::MAX;

/// Where a thread's slot is, or why the thread has none (not an error: a thread
/// that never touched a dynamically loaded module's TLS has no block for it yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    At(u64),
    Absent(String),
}

/// The thread pointer, the DTV pointer, its length and its entries are all the
/// target's: address arithmetic on them is checked, never wrapped into a read
/// somewhere else.
pub fn slot_address(access: &TlsAccess, tp: u64, mem: &impl TargetMemory) -> Result<Slot> {
    match *access {
        TlsAccess::Static { tp_offset } => Ok(Slot::At(tp.wrapping_add_signed(tp_offset))),
        TlsAccess::Dtv { dtv_offset, dtv_entry_size, module_id, offset } => {
            let wraps =
                |what: &str| Error::Resolve { path: format!("thread pointer {tp:#x}"), reason: format!("{what} wraps around the address space") };
            let at = tp.checked_add(dtv_offset).ok_or_else(|| wraps("the DTV pointer's address"))?;
            let dtv = mem.read_u64(at, "thread control block dtv pointer")?;
            if dtv == 0 {
                return Ok(Slot::Absent("thread has no DTV".into()));
            }
            // glibc keeps the DTV's slot count in the entry before dtv[0] (the generation).
            let len_at = dtv.checked_sub(dtv_entry_size).ok_or_else(|| wraps("the DTV length's address"))?;
            let len = mem.read_u64(len_at, "DTV length")?;
            if module_id > len {
                return Ok(Slot::Absent(format!("DTV has {len} slots, module {module_id} not present yet")));
            }
            let entry = module_id.checked_mul(dtv_entry_size).and_then(|o| dtv.checked_add(o));
            let block = mem.read_u64(entry.ok_or_else(|| wraps("the DTV entry's address"))?, "DTV entry")?;
            if block == 0 || block == TLS_DTV_UNALLOCATED {
                return Ok(Slot::Absent(format!("TLS block of module {module_id} not allocated in this thread")));
            }
            Ok(Slot::At(block.wrapping_add(offset)))
        }
    }
}
