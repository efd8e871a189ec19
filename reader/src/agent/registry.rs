//! Which processes the agent knows, shared by the sampling loop and its
//! workers: tracked, about to be (found by discovery, not yet taken by the
//! loop), refused (publish but cannot be sampled) and stuck (a read of them
//! blocked: never touched again). The lock is only held to copy or change an
//! entry, never across a read of a target.

use crate::discovery::host_scan::ProcessKey;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

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
    stopping: AtomicBool,
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

    /// Workers stop at their next chance.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }
}
