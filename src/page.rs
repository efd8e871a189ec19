//! The per-thread page that holds the record: private, anonymous, pinned, wiped on fork.
//!
//! Pinned (`mlock`) because an eBPF program sampling in interrupt context cannot fault a page in;
//! `MADV_WIPEONFORK` so a child created by fork() without exec sees zeroes (no context) instead of
//! its parent's span. Both are best effort: a refusal is recorded and reported by threadInfo().

use memmap2::MmapMut;
use std::io;

pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

enum Backing {
    /// Our own anonymous mapping (the normal case).
    Mapped(MmapMut),
    /// A page-aligned page inside an ArrayBuffer that V8 allocated (runtimes that refuse external
    /// array buffers). Its memory belongs to V8; we only lock and advise it.
    Borrowed(*mut u8),
}

pub struct Page {
    backing: Backing,
    len: usize,
    /// mlock's error, when the page could not be pinned.
    pub pin_error: Option<String>,
    /// madvise(MADV_WIPEONFORK)'s error, when fork children would inherit the record.
    pub wipe_error: Option<String>,
}

impl Page {
    pub fn map() -> io::Result<Page> {
        let len = page_size();
        let mut map = MmapMut::map_anon(len)?;
        let ptr = map.as_mut_ptr();
        Ok(Self::harden(Backing::Mapped(map), ptr, len))
    }

    /// # Safety
    /// `ptr` must be page aligned, point to `page_size()` bytes that stay allocated until this
    /// value is dropped, and be written only by the calling thread.
    pub unsafe fn borrow(ptr: *mut u8) -> Page {
        Self::harden(Backing::Borrowed(ptr), ptr, page_size())
    }

    fn harden(backing: Backing, ptr: *mut u8, len: usize) -> Page {
        // SAFETY: ptr..ptr+len is a page we own (mapped) or were lent (borrowed).
        let wipe_error =
            unsafe { errno_of(libc::madvise(ptr.cast(), len, libc::MADV_WIPEONFORK)) }.map(|e| format!("madvise(MADV_WIPEONFORK) failed: {e}"));
        // SAFETY: as above.
        let pin_error = unsafe { errno_of(libc::mlock(ptr.cast(), len)) }.map(|e| {
            format!("mlock failed: {e} (raise RLIMIT_MEMLOCK or grant CAP_IPC_LOCK; the record stays unpinned and a sampler may miss it while it is paged out)")
        });
        Page { backing, len, pin_error, wipe_error }
    }

    pub fn as_ptr(&self) -> *mut u8 {
        match &self.backing {
            Backing::Mapped(m) => m.as_ptr() as *mut u8,
            Backing::Borrowed(p) => *p,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn pinned(&self) -> bool {
        self.pin_error.is_none()
    }

    pub fn is_mapped(&self) -> bool {
        matches!(self.backing, Backing::Mapped(_))
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        if let Backing::Borrowed(p) = self.backing {
            // Give V8 its memory back as we found it; a mapping of our own is simply unmapped.
            // SAFETY: the same range we locked and advised.
            unsafe {
                libc::munlock(p.cast(), self.len);
                libc::madvise(p.cast(), self.len, libc::MADV_KEEPONFORK);
            }
        }
    }
}

fn errno_of(rc: libc::c_int) -> Option<io::Error> {
    (rc != 0).then(io::Error::last_os_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Record, SpanContext, OFF_VALID};

    #[test]
    fn mapped_page_is_pinned_and_aligned() {
        let page = Page::map().unwrap();
        assert_eq!(page.as_ptr() as usize % page_size(), 0);
        assert!(page.wipe_error.is_none(), "{:?}", page.wipe_error);
        // Root or RLIMIT_MEMLOCK > 0 both allow one page; report rather than assume.
        if let Some(e) = &page.pin_error {
            eprintln!("note: page not pinned here: {e}");
        }
    }

    /// A child created by fork() without exec must see no context in its copy of the page.
    #[test]
    fn fork_child_sees_valid_zero() {
        let page = Page::map().unwrap();
        // SAFETY: the page is page_size() >= MAX_RECORD_LEN bytes, owned by this test.
        let rec = unsafe { Record::from_raw(page.as_ptr()) };
        rec.publish(&SpanContext { trace_id: [7; 16], span_id: [9; 8], flags: 1 });
        assert_eq!(rec.valid(), 1);
        // SAFETY: the child only reads memory and calls _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: the child's copy of the page is mapped (wiped, not unmapped) and 28 <= its size.
            let bytes = unsafe { std::slice::from_raw_parts(page.as_ptr(), 28) };
            let code = if bytes[OFF_VALID] == 0 && bytes.iter().all(|&b| b == 0) { 0 } else { 1 };
            // SAFETY: _exit has no preconditions (no destructors run in the forked child).
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: valid out pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "child did not exit normally: {status}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "the forked child saw its parent's record (valid != 0)");
        assert_eq!(rec.valid(), 1, "the parent's record must be untouched by the fork");
    }
}
