//! Which processes the agent knows, shared by the sampling loop and its
//! workers: tracked, about to be (found by discovery, not yet taken by the
//! loop), refused (publish but cannot be sampled) and stuck (a read of them
//! blocked: never touched again). The lock is only held to copy or change an
//! entry, never across a read of a target.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::Instant;
use thread_ctx_discovery::host_scan::ProcessKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Pending,
    Tracked,
    Refused,
    Stuck,
}

#[derive(Default)]
pub struct Registry {
    processes: Mutex<HashMap<u32, (ProcessKey, State)>>,
    /// Set once by [`Registry::stop`]; workers sleep on `stopped` between scans rather than
    /// waking to poll the flag.
    stopping: Mutex<bool>,
    stopped: Condvar,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, (ProcessKey, State)>> {
        self.processes.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set(&self, key: ProcessKey, state: State) {
        self.lock().insert(key.pid, (key, state));
    }

    pub fn remove(&self, pid: u32) {
        self.lock().remove(&pid);
    }

    /// Some entry exists for `pid`.
    pub fn knows(&self, pid: u32) -> bool {
        self.lock().contains_key(&pid)
    }

    pub fn with(&self, state: State) -> Vec<ProcessKey> {
        self.lock().values().filter(|(_, s)| *s == state).map(|(k, _)| *k).collect()
    }

    /// Drops refused and stuck processes that have exited (their pids may come back as others).
    pub fn forget_exited(&self) {
        let candidates: Vec<ProcessKey> = self.lock().values().filter(|(_, s)| matches!(s, State::Refused | State::Stuck)).map(|(k, _)| *k).collect();
        let gone: Vec<ProcessKey> = candidates.into_iter().filter(|k| !k.alive()).collect();
        let mut map = self.lock();
        for k in gone {
            if map.get(&k.pid).is_some_and(|(key, _)| *key == k) {
                map.remove(&k.pid);
            }
        }
    }

    fn stop_flag(&self) -> std::sync::MutexGuard<'_, bool> {
        self.stopping.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Workers stop at their next chance; a worker sleeping in [`Registry::sleep_until`] wakes now.
    pub fn stop(&self) {
        *self.stop_flag() = true;
        self.stopped.notify_all();
    }

    pub fn stopping(&self) -> bool {
        *self.stop_flag()
    }

    /// Sleeps until `deadline` or until [`Registry::stop`], whichever comes first: one wake-up
    /// per scan, not one per check of the flag. True when stopping.
    pub fn sleep_until(&self, deadline: Instant) -> bool {
        let mut stopping = self.stop_flag();
        while !*stopping {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            stopping = self.stopped.wait_timeout(stopping, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        *stopping
    }
}
