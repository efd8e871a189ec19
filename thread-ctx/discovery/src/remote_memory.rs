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

/// Reads per `process_vm_readv` call at most (the kernel's IOV_MAX).
pub const MAX_IOVECS: usize = 1024;
/// Calls started again after a failed range, per [`RemoteMemory::read_many`].
pub const MAX_RESTARTS: usize = 16;

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

    /// Fills each buffer from its address with as few system calls as the kernel allows (one
    /// per [`MAX_IOVECS`] reads while none fails). Each read succeeds or fails on its own: the
    /// kernel stops at the first remote range it cannot read, which fails, and the reads after it
    /// are tried again in the next call, at most [`MAX_RESTARTS`] times per batch (the rest fail).
    pub fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<bool> {
        let mut ok = vec![false; reads.len()];
        let mut next = 0;
        let mut restarts = 0;
        while next < reads.len() && restarts <= MAX_RESTARTS {
            let end = (next + MAX_IOVECS).min(reads.len());
            let chunk = &mut reads[next..end];
            let local: Vec<libc::iovec> = chunk.iter_mut().map(|(_, b)| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() }).collect();
            let remote: Vec<libc::iovec> = chunk.iter().map(|(a, b)| libc::iovec { iov_base: *a as *mut libc::c_void, iov_len: b.len() }).collect();
            // SAFETY: each local iovec is one of our buffers with its own length; the counts are the vectors' lengths (≤ IOV_MAX).
            let n = unsafe { libc::process_vm_readv(self.pid, local.as_ptr(), local.len() as u64, remote.as_ptr(), remote.len() as u64, 0) };
            let copied = if n < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EFAULT) => 0, // the first range faulted: it fails, the rest go on
                    _ => return ok,          // the process is gone or refused: every read fails
                }
            } else {
                n as usize
            };
            // The reads wholly copied succeeded; the one the copy stopped in failed.
            let mut done = 0usize;
            let mut i = 0;
            while i < chunk.len() && done + chunk[i].1.len() <= copied {
                done += chunk[i].1.len();
                ok[next + i] = true;
                i += 1;
            }
            if i == chunk.len() {
                next += i;
                continue;
            }
            next += i + 1;
            restarts += 1;
        }
        ok
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_reads_at_once_fail_one_by_one() {
        let data: Vec<u64> = (0..512).collect();
        let base = data.as_ptr() as u64;
        let mem = RemoteMemory::new(std::process::id() as i32);
        let (mut a, mut b, mut c, mut d) = ([0u8; 8], [0u8; 16], [0u8; 8], [0u8; 8]);
        let mut reads: Vec<(u64, &mut [u8])> = vec![(base + 8, &mut a), (8, &mut b), (base + 16 * 8, &mut c), (base + 511 * 8, &mut d)];
        assert_eq!(mem.read_many(&mut reads), vec![true, false, true, true], "the unmapped read fails alone");
        assert_eq!((u64::from_ne_bytes(a), u64::from_ne_bytes(c), u64::from_ne_bytes(d)), (1, 16, 511));
        let mut firsts: Vec<[u8; 8]> = vec![[0u8; 8]; MAX_IOVECS + 3];
        let mut reads: Vec<(u64, &mut [u8])> = firsts.iter_mut().enumerate().map(|(i, f)| (base + 8 * (i as u64 % 512), &mut f[..])).collect();
        assert!(mem.read_many(&mut reads).iter().all(|&ok| ok), "more reads than one call takes");
        assert_eq!(u64::from_ne_bytes(firsts[MAX_IOVECS + 2]), ((MAX_IOVECS + 2) % 512) as u64);
        let gone = RemoteMemory::new(i32::MAX);
        let mut reads: Vec<(u64, &mut [u8])> = vec![(base, &mut a)];
        assert_eq!(gone.read_many(&mut reads), vec![false]);
    }
}
