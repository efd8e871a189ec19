//! Watching the worker threads that touch target processes.
//!
//! Reading another process can block without bound: `/proc/PID/maps` and
//! `process_vm_readv` wait for the target's memory map lock (held by a thread
//! stuck in a page fault on a hung file system, or on a page the target
//! guards with userfaultfd), and a file the target controls can be a FIFO or
//! sit on a dead mount. No timeout exists for those system calls, so the
//! agent never makes them on its sampling thread: workers do, one process at
//! a time, announcing which ([`Heartbeat::busy`]). The sampling loop checks
//! the heartbeat every poll; a worker busy with one process past the limit
//! while its thread gets no CPU time is stuck in the kernel: the process is
//! skipped for good, the worker is retired (it exits if the call ever
//! returns) and a new one takes over.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thread_ctx_discovery::host_scan::ProcessKey;

/// A worker busy this long on one process while making CPU progress (a huge
/// object to parse on a slow machine) is stuck all the same.
const CPU_BOUND_FACTOR: u32 = 6;

#[derive(Debug, Clone, Copy)]
struct Busy {
    key: ProcessKey,
    what: &'static str,
    since: Instant,
    cpu_ns: Option<u64>,
}

#[derive(Default)]
struct Inner {
    busy: Mutex<Option<Busy>>,
    /// The worker thread's CPU-time clock (pthread_getcpuclockid), once it runs.
    clock: AtomicI32,
    has_clock: AtomicBool,
    retired: AtomicBool,
}

/// What a stuck worker was doing.
#[derive(Debug, Clone, Copy)]
pub struct Stuck {
    pub key: ProcessKey,
    pub what: &'static str,
    pub for_: Duration,
}

/// Shared by one worker thread and the loop that watches it.
#[derive(Clone, Default)]
pub struct Heartbeat {
    inner: Arc<Inner>,
}

/// Puts the busy mark back as it was (none, or an enclosing one) when the work ends.
pub struct BusyGuard {
    beat: Heartbeat,
    previous: Option<Busy>,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        *self.beat.inner.busy.lock().unwrap_or_else(|e| e.into_inner()) = self.previous;
    }
}

impl Heartbeat {
    pub fn new() -> Heartbeat {
        Heartbeat::default()
    }

    /// Called once on the worker thread: remembers its CPU-time clock.
    pub fn bind_current_thread(&self) {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: pthread_self is always valid; the out pointer is valid.
        if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0 {
            self.inner.clock.store(clock, Ordering::Relaxed);
            self.inner.has_clock.store(true, Ordering::Release);
        }
    }

    /// Marks the worker busy with `key` (doing `what`) until the guard drops.
    pub fn busy(&self, key: ProcessKey, what: &'static str) -> BusyGuard {
        let b = Busy { key, what, since: Instant::now(), cpu_ns: self.cpu_ns() };
        let previous = self.inner.busy.lock().unwrap_or_else(|e| e.into_inner()).replace(b);
        BusyGuard { beat: self.clone(), previous }
    }

    /// The watcher gave up on this worker: it must stop at its next chance and send nothing.
    pub fn retired(&self) -> bool {
        self.inner.retired.load(Ordering::Relaxed)
    }

    pub fn retire(&self) {
        self.inner.retired.store(true, Ordering::Relaxed);
    }

    /// The worker's thread CPU time, ns.
    fn cpu_ns(&self) -> Option<u64> {
        if !self.inner.has_clock.load(Ordering::Acquire) {
            return None;
        }
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a clock id from pthread_getcpuclockid and a valid out pointer; fails
        // (EINVAL) once the thread is gone, which reads as no progress.
        let ok = unsafe { libc::clock_gettime(self.inner.clock.load(Ordering::Relaxed), &mut ts) } == 0;
        ok.then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// The process the worker has been stuck on, if it has been busy with it
    /// for `limit` while its thread got under 2 % of a CPU (blocked in the
    /// kernel, not starved of CPU on a busy host), or for `CPU_BOUND_FACTOR`
    /// times the limit in any case.
    pub fn stuck(&self, limit: Duration) -> Option<Stuck> {
        let busy = (*self.inner.busy.lock().unwrap_or_else(|e| e.into_inner()))?;
        let elapsed = busy.since.elapsed();
        if elapsed < limit {
            return None;
        }
        let progress = match (busy.cpu_ns, self.cpu_ns()) {
            (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
            _ => Duration::ZERO,
        };
        (progress < elapsed / 50 || elapsed >= limit * CPU_BOUND_FACTOR).then_some(Stuck { key: busy.key, what: busy.what, for_: elapsed })
    }
}

/// A worker thread the sampling loop watches, and how often it was replaced.
pub struct Supervised {
    pub beat: Heartbeat,
    pub restarts: usize,
    /// Given up on after too many stuck reads.
    pub dead: bool,
}

/// Workers replaced after a stuck read, at most; each stuck one is a thread
/// blocked in the kernel for as long as its target keeps it there.
pub const MAX_WORKER_RESTARTS: usize = 16;

impl Supervised {
    pub fn new(beat: Heartbeat) -> Supervised {
        Supervised { beat, restarts: 0, dead: false }
    }

    /// The process the worker is stuck on, if it is: the worker is retired then.
    pub fn check(&mut self, limit: Duration) -> Option<Stuck> {
        if self.dead {
            return None;
        }
        let stuck = self.beat.stuck(limit)?;
        self.beat.retire();
        Some(stuck)
    }

    /// Starts a new worker with `spawn`, unless too many were replaced; Err says what is lost.
    pub fn respawn(
        &mut self,
        thread: &'static str,
        without: &'static str,
        spawn: impl FnOnce() -> std::io::Result<Heartbeat>,
    ) -> Result<(), RespawnError> {
        let outcome = if self.restarts >= MAX_WORKER_RESTARTS {
            Err(RespawnError::TooMany { thread, without })
        } else {
            spawn().map_err(|cause| RespawnError::Spawn { thread, cause, without })
        };
        match outcome {
            Ok(beat) => {
                self.beat = beat;
                self.restarts += 1;
                Ok(())
            }
            Err(e) => {
                self.dead = true;
                Err(e)
            }
        }
    }
}

/// Why a blocked worker was not replaced, and what is lost without it.
#[derive(Debug, thiserror::Error)]
pub enum RespawnError {
    #[error("{thread}: {MAX_WORKER_RESTARTS} processes blocked it; no longer restarted ({without})")]
    TooMany { thread: &'static str, without: &'static str },
    #[error("{thread}: cannot restart: {cause} ({without})")]
    Spawn { thread: &'static str, cause: std::io::Error, without: &'static str },
}

/// The note for a process skipped because a worker blocked on it.
pub fn stuck_note(stuck: &Stuck, service: &str, thread: &str) -> String {
    format!(
        "process {}{service}: skipped: {thread} blocked for {:.0}s while {} (the target holds the read: a hung file system, \
         a FIFO, memory it guards with userfaultfd); it is not read again",
        stuck.key.pid,
        stuck.for_.as_secs_f64(),
        stuck.what
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ProcessKey {
        ProcessKey::of(std::process::id()).unwrap()
    }

    #[test]
    fn a_worker_blocked_past_the_limit_is_stuck_and_a_busy_one_is_not_yet() {
        let limit = Duration::from_millis(200);
        // Blocked: sleeps (no CPU) while busy.
        let beat = Heartbeat::new();
        let b = beat.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            b.bind_current_thread();
            let _g = b.busy(key(), "sleeping");
            let _ = rx.recv();
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(beat.stuck(limit).is_none(), "not before the limit");
        std::thread::sleep(limit);
        let s = beat.stuck(limit).expect("stuck past the limit");
        assert_eq!((s.key, s.what), (key(), "sleeping"));
        tx.send(()).unwrap();

        // Spinning: makes CPU progress, so it is only stuck past CPU_BOUND_FACTOR x the limit.
        let beat = Heartbeat::new();
        let b = beat.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        std::thread::spawn(move || {
            b.bind_current_thread();
            let _g = b.busy(key(), "spinning");
            while !s2.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        std::thread::sleep(limit + Duration::from_millis(100));
        assert!(beat.stuck(limit).is_none(), "a worker making progress is given more time");
        stop.store(true, Ordering::Relaxed);
    }

    #[test]
    fn an_idle_worker_is_never_stuck() {
        let beat = Heartbeat::new();
        beat.bind_current_thread();
        drop(beat.busy(key(), "done quickly"));
        assert!(beat.stuck(Duration::ZERO).is_none());
    }
}
