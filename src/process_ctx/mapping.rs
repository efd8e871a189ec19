//! The process's one `OTEL_CTX` mapping: where OTEP 4719 readers find the process context by name
//! in /proc/PID/maps (`/memfd:OTEL_CTX (deleted)`, or `[anon:OTEL_CTX]` where the kernel names
//! anonymous mappings).

use std::io;
use std::ptr;

use crate::page::page_size;

/// MFD_NOEXEC_SEAL (Linux 6.3+): newer kernels log a warning for memfds created without it.
const MFD_NOEXEC_SEAL: libc::c_uint = 0x0008;
const PR_SET_VMA: libc::c_int = 0x5356_4d41;
const PR_SET_VMA_ANON_NAME: libc::c_ulong = 0;
const NAME: &std::ffi::CStr = c"OTEL_CTX";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// A private mapping of a memfd named OTEL_CTX (the fd is closed right after mmap).
    Memfd,
    /// memfd_create was refused: a plain anonymous mapping, named only if the kernel can.
    Anonymous,
}

impl Backing {
    pub fn as_str(self) -> &'static str {
        match self {
            Backing::Memfd => "memfd",
            Backing::Anonymous => "anonymous",
        }
    }
}

pub struct Mapping {
    ptr: *mut u8,
    len: usize,
    pub backing: Backing,
    /// Why the memfd could not be used, when the mapping is anonymous.
    pub memfd_error: Option<String>,
    /// Why prctl(PR_SET_VMA_ANON_NAME) failed (EINVAL without CONFIG_ANON_VMA_NAME), else None.
    pub anon_name_error: Option<String>,
    /// Why madvise(MADV_DONTFORK) failed, else None.
    pub dontfork_error: Option<String>,
}

// SAFETY: the mapping is plain memory; all writes go through the process-wide Mutex.
unsafe impl Send for Mapping {}

impl Mapping {
    pub fn create() -> io::Result<Mapping> {
        let len = page_size();
        let (ptr, backing, memfd_error) = match map_memfd(len) {
            Ok(p) => (p, Backing::Memfd, None),
            Err(e) => (map_anonymous(len)?, Backing::Anonymous, Some(format!("memfd_create/mmap failed: {e}"))),
        };
        // SAFETY: ptr..ptr+len is the mapping just created.
        let dontfork_error =
            unsafe { errno_of(libc::madvise(ptr.cast(), len, libc::MADV_DONTFORK)) }.map(|e| format!("madvise(MADV_DONTFORK) failed: {e}"));
        // SAFETY: as above; the name is a NUL-terminated static string.
        let anon_name_error =
            unsafe { errno_of(libc::prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, ptr as libc::c_ulong, len as libc::c_ulong, NAME.as_ptr())) }
                .map(|e| format!("prctl(PR_SET_VMA_ANON_NAME) failed: {e}"));
        Ok(Mapping { ptr, len, backing, memfd_error, anon_name_error, dontfork_error })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn map_memfd(len: usize) -> io::Result<*mut u8> {
    // SAFETY: plain syscalls on a fd we own; the fd is closed on every path.
    unsafe {
        let mut fd = libc::memfd_create(NAME.as_ptr(), libc::MFD_CLOEXEC | MFD_NOEXEC_SEAL);
        if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            fd = libc::memfd_create(NAME.as_ptr(), libc::MFD_CLOEXEC); // kernels before 6.3
        }
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let result = if libc::ftruncate(fd, len as libc::off_t) != 0 {
            Err(io::Error::last_os_error())
        } else {
            let p = libc::mmap(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE, fd, 0);
            if p == libc::MAP_FAILED {
                Err(io::Error::last_os_error())
            } else {
                Ok(p.cast::<u8>())
            }
        };
        libc::close(fd);
        result
    }
}

fn map_anonymous(len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh anonymous mapping.
    let p = unsafe { libc::mmap(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

fn errno_of(rc: libc::c_int) -> Option<io::Error> {
    (rc != 0).then(io::Error::last_os_error)
}
