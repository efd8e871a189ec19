//! Reads another process's memory with process_vm_readv (no ptrace stop needed
//! for the read itself; callers stop the thread when the data must be consistent).

use crate::error::{Error, Result};
use std::io;

/// Memory of a target process as the TLS resolvers read it: every read
/// either fills its buffer or fails. A trait so that the resolvers (which
/// follow pointers the target chose) can be fuzzed over a memory image.
pub trait TargetMemory {
    /// Fills `buf` from `addr`; `what` names the read in errors.
    fn read(&self, addr: u64, buf: &mut [u8], what: &str) -> Result<()>;

    fn read_u64(&self, addr: u64, what: &str) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b, what)?;
        Ok(u64::from_ne_bytes(b))
    }
}

#[derive(Debug, Clone, Copy)]
pub struct RemoteMemory {
    pub pid: i32,
}

impl RemoteMemory {
    pub fn new(pid: i32) -> Self {
        RemoteMemory { pid }
    }

    /// Fills `buf` from `addr`; a short read is an error (EFAULT), never partial data.
    pub fn read(&self, addr: u64, buf: &mut [u8], what: &str) -> Result<()> {
        let len = buf.len();
        let fail = |cause| Error::RemoteRead { pid: self.pid, addr, len, what: what.into(), cause };
        if buf.is_empty() {
            return Ok(());
        }
        let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: buf.len() };
        // SAFETY: both iovecs describe valid lengths; the local one is our own buffer.
        let n = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            return Err(fail(io::Error::last_os_error()));
        }
        if n as usize != buf.len() {
            return Err(fail(io::Error::from_raw_os_error(libc::EFAULT)));
        }
        Ok(())
    }

    pub fn read_u64(&self, addr: u64, what: &str) -> Result<u64> {
        TargetMemory::read_u64(self, addr, what)
    }

    /// Callers bound `len` (it must never be a size the target chose unchecked).
    pub fn read_vec(&self, addr: u64, len: usize, what: &str) -> Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.read(addr, &mut v, what)?;
        Ok(v)
    }
}

impl TargetMemory for RemoteMemory {
    fn read(&self, addr: u64, buf: &mut [u8], what: &str) -> Result<()> {
        RemoteMemory::read(self, addr, buf, what)
    }
}
