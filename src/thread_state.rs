//! One record page per OS thread, shared by every Node-API environment on that thread and kept in
//! the hidden C thread-local, so the addon needs no Rust `thread_local!`.

use crate::page::Page;
use crate::record::Record;
use crate::tls;

pub struct ThreadState {
    pub page: Page,
    /// Node-API environments on this thread using the page (normally 1).
    refs: usize,
}

impl ThreadState {
    pub fn record(&self) -> Record {
        // SAFETY: the page is at least MAX_RECORD_LEN bytes and owned by this thread.
        unsafe { Record::from_raw(self.page.as_ptr()) }
    }
}

/// This thread's state, if it has one.
pub fn current() -> Option<&'static mut ThreadState> {
    // SAFETY: the slot holds null or a leaked Box<ThreadState> owned by this thread.
    unsafe { (*tls::state_slot() as *mut ThreadState).as_mut() }
}

/// Registers `page` as this thread's record page and points `otel_thread_ctx_v1` at it.
/// Fails (returning the page) when the thread already has one.
pub fn install(page: Page) -> Result<&'static mut ThreadState, Page> {
    if current().is_some() {
        return Err(page);
    }
    let state = Box::leak(Box::new(ThreadState { page, refs: 1 }));
    state.record().clear();
    // SAFETY: both slots belong to the calling thread.
    unsafe {
        *tls::state_slot() = (state as *mut ThreadState).cast();
        // Set once; never swapped while the thread lives (OTEP 4947 update style 2).
        *tls::record_slot() = state.page.as_ptr();
    }
    Ok(state)
}

/// One more environment on this thread uses the existing page.
pub fn retain() -> Option<&'static mut ThreadState> {
    let s = current()?;
    s.refs += 1;
    Some(s)
}

/// Drops one environment's use; the last one tears down: valid = 0, TLS pointer NULL, unmap.
pub fn release() {
    let Some(s) = current() else { return };
    s.refs -= 1;
    if s.refs > 0 {
        return;
    }
    s.record().clear();
    // SAFETY: slots of the calling thread; the Box was leaked by `install`.
    unsafe {
        *tls::record_slot() = std::ptr::null_mut();
        let raw = std::mem::replace(&mut *tls::state_slot(), std::ptr::null_mut());
        drop(Box::from_raw(raw as *mut ThreadState));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_points_tls_at_page_and_release_clears_it() {
        std::thread::spawn(|| {
            let page = Page::map().unwrap();
            let addr = page.as_ptr();
            let s = install(page).ok().expect("fresh thread has no state");
            assert_eq!(unsafe { *tls::record_slot() }, addr);
            assert!(install(Page::map().unwrap()).is_err(), "a second page on one thread must be refused");
            assert!(retain().is_some());
            release();
            assert_eq!(unsafe { *tls::record_slot() }, addr, "still one user left");
            let _ = s;
            release();
            assert!(unsafe { *tls::record_slot() }.is_null());
            assert!(current().is_none());
        })
        .join()
        .unwrap();
    }
}
