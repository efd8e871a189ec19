//! One record page per OS thread, shared by every Node-API environment on that thread and kept in
//! the hidden C thread-local, so the addon needs no Rust `thread_local!`.
//!
//! The state is a leaked `Box` owned by its thread. It is reached only through [`with_current`],
//! whose borrow ends with the call, and freed only by [`release`] on the same thread (from the
//! environment cleanup hook), so no reference to it can outlive it.

use std::cell::Cell;

use crate::page::Page;
use crate::record::Record;
use crate::tls;

pub struct ThreadState {
    pub page: Page,
    /// Node-API environments on this thread using the page (normally 1).
    refs: Cell<usize>,
}

impl ThreadState {
    pub fn record(&self) -> Record {
        // SAFETY: the page is at least MAX_RECORD_LEN bytes and written only by this thread.
        unsafe { Record::from_raw(self.page.as_ptr()) }
    }
}

fn state_ptr() -> *mut ThreadState {
    // SAFETY: the slot is a thread-local of the calling thread; it holds null or a pointer that
    // `install` leaked.
    unsafe { *tls::state_slot() as *mut ThreadState }
}

/// Runs `f` with this thread's state, if it has one.
pub fn with_current<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    // SAFETY: null or a live leaked Box of this thread; only `release`, which `f` does not call,
    // frees it, so it outlives the borrow.
    unsafe { state_ptr().as_ref() }.map(f)
}

/// Registers `page` as this thread's record page and points `otel_thread_ctx_v1` at it.
/// Fails (returning the page) when the thread already has one.
pub fn install(page: Page) -> Result<(), Page> {
    if !state_ptr().is_null() {
        return Err(page);
    }
    let state = Box::new(ThreadState { page, refs: Cell::new(1) });
    state.record().detach();
    let record = state.page.as_ptr();
    // SAFETY: both slots are thread-locals of the calling thread.
    unsafe {
        *tls::state_slot() = Box::into_raw(state).cast();
        // Set once; never swapped while the thread lives (OTEP 4947 update style 2).
        *tls::record_slot() = record;
    }
    Ok(())
}

/// One more environment on this thread uses the existing page; false when there is none.
pub fn retain() -> bool {
    with_current(|s| s.refs.set(s.refs.get() + 1)).is_some()
}

/// Drops one environment's use; the last one tears down: valid = 0, TLS pointer NULL, unmap.
pub fn release() {
    let last = with_current(|s| {
        s.refs.set(s.refs.get() - 1);
        if s.refs.get() == 0 {
            s.record().detach();
        }
        s.refs.get() == 0
    });
    if last != Some(true) {
        return;
    }
    // SAFETY: slots of the calling thread; the pointer came from Box::into_raw in `install` and no
    // borrow of it is live (with_current's has ended).
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
            assert!(install(page).is_ok(), "a fresh thread has no state");
            // SAFETY: reads this thread's own slot.
            let slot = || unsafe { *tls::record_slot() };
            assert_eq!(slot(), addr);
            assert!(install(Page::map().unwrap()).is_err(), "a second page on one thread must be refused");
            assert!(retain());
            release();
            assert_eq!(slot(), addr, "still one user left");
            release();
            assert!(slot().is_null());
            assert!(with_current(|_| ()).is_none());
            assert!(!retain());
        })
        .join()
        .unwrap();
    }
}
