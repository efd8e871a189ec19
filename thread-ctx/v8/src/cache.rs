//! A bounded cache of what was read from a target's heap, keyed by an object's
//! address. The garbage collector moves objects and reuses addresses, so an
//! entry is never trusted on its address alone: each keeps a fingerprint (the
//! words of the object it was read from) that the caller reads again and
//! compares before using it ([`BoundedCache::get_valid`]).
//!
//! Ordered by key, so that a range (a code object's instructions) is found by
//! any address inside it ([`BoundedCache::key_at_or_below`]).
//!
//! An entry checked once in a batch (one round of naming: every frame the agent names at once,
//! while the heap is what it is then) is trusted for the rest of that batch
//! ([`BoundedCache::next_batch`]): a frame's function, script and code are looked up by many
//! frames of a batch, and each check is a read of the target's memory (a system call).
//!
//! Bounded in entries and bytes: past either bound the least recently used
//! quarter is dropped (counted), so a process that keeps compiling new code
//! keeps the cache at its bound, not growing.

use std::collections::BTreeMap;

#[derive(Debug)]
struct Entry<V> {
    value: V,
    fingerprint: Vec<u64>,
    bytes: usize,
    used: u64,
    /// The batch in which it was last checked (or read).
    checked: u64,
}

#[derive(Debug)]
pub struct BoundedCache<V> {
    entries: BTreeMap<u64, Entry<V>>,
    max_entries: usize,
    max_bytes: usize,
    bytes: usize,
    tick: u64,
    batch: u64,
    pub hits: u64,
    pub misses: u64,
    /// Entries found at their address but no longer matching their object (moved or freed by GC).
    pub stale: u64,
    pub evicted: u64,
}

/// Entry count and bytes, for status lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheSize {
    pub entries: usize,
    pub bytes: usize,
}

impl<V> BoundedCache<V> {
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        BoundedCache { entries: BTreeMap::new(), max_entries, max_bytes, bytes: 0, tick: 0, batch: 0, hits: 0, misses: 0, stale: 0, evicted: 0 }
    }

    /// The entry at `key`, not yet checked (to choose which entry to check).
    pub fn peek(&self, key: u64) -> Option<&V> {
        self.entries.get(&key).map(|e| &e.value)
    }

    /// Starts a new batch: every entry is checked again at its first use in it.
    pub fn next_batch(&mut self) {
        self.batch += 1;
    }

    /// The entry at `key` if it was checked (or read) in this batch already: trusted without
    /// reading its object again.
    pub fn fresh(&mut self, key: u64) -> Option<&V> {
        self.tick += 1;
        let (batch, tick) = (self.batch, self.tick);
        let e = self.entries.get_mut(&key).filter(|e| e.checked == batch)?;
        self.hits += 1;
        e.used = tick;
        Some(&e.value)
    }

    /// The entry at `key` if `still` (given it and its fingerprint) says the
    /// object is still the one it was read from, asked once per batch; dropped
    /// (and counted) if not.
    pub fn get_valid(&mut self, key: u64, still: impl FnOnce(&V, &[u64]) -> bool) -> Option<&V> {
        self.tick += 1;
        let batch = self.batch;
        let valid = match self.entries.get(&key) {
            None => {
                self.misses += 1;
                return None;
            }
            Some(e) => e.checked == batch || still(&e.value, &e.fingerprint),
        };
        if !valid {
            self.stale += 1;
            self.remove(key);
            return None;
        }
        self.hits += 1;
        let e = self.entries.get_mut(&key)?;
        e.used = self.tick;
        e.checked = batch;
        Some(&e.value)
    }

    /// The greatest key not above `at` (the entry whose range may hold `at`).
    pub fn key_at_or_below(&self, at: u64) -> Option<u64> {
        self.entries.range(..=at).next_back().map(|(k, _)| *k)
    }

    pub fn insert(&mut self, key: u64, value: V, fingerprint: Vec<u64>, bytes: usize) {
        self.tick += 1;
        self.remove(key);
        self.bytes += bytes;
        self.entries.insert(key, Entry { value, fingerprint, bytes, used: self.tick, checked: self.batch });
        if self.entries.len() > self.max_entries || self.bytes > self.max_bytes {
            self.evict();
        }
    }

    pub fn remove(&mut self, key: u64) {
        if let Some(e) = self.entries.remove(&key) {
            self.bytes -= e.bytes;
        }
    }

    /// Drops the least recently used quarter (at least one entry, and until under the byte bound).
    fn evict(&mut self) {
        let mut by_use: Vec<(u64, u64)> = self.entries.iter().map(|(k, e)| (e.used, *k)).collect();
        by_use.sort_unstable();
        let quarter = (self.entries.len() / 4).max(1);
        for (i, (_, key)) in by_use.into_iter().enumerate() {
            if i >= quarter && self.entries.len() <= self.max_entries && self.bytes <= self.max_bytes {
                break;
            }
            self.remove(key);
            self.evicted += 1;
        }
    }

    /// New bounds (a share of a budget that other caches share too); past them, entries go now.
    pub fn set_bounds(&mut self, max_entries: usize, max_bytes: usize) {
        (self.max_entries, self.max_bytes) = (max_entries.max(1), max_bytes);
        if self.entries.len() > self.max_entries || self.bytes > self.max_bytes {
            self.evict();
        }
    }

    pub fn size(&self) -> CacheSize {
        CacheSize { entries: self.entries.len(), bytes: self.bytes }
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_entries_are_dropped_and_bounds_hold() {
        let mut c: BoundedCache<&str> = BoundedCache::new(8, 1000);
        c.insert(0x10, "handler", vec![1, 2], 10);
        c.next_batch();
        assert_eq!(c.get_valid(0x10, |_, f| f == [1, 2]), Some(&"handler"));
        assert_eq!(c.get_valid(0x10, |_, _| unreachable!("checked once per batch")), Some(&"handler"));
        assert_eq!(c.fresh(0x10), Some(&"handler"), "checked in this batch");
        c.next_batch();
        assert_eq!(c.fresh(0x10), None, "a new batch checks again");
        assert_eq!(c.get_valid(0x10, |_, f| f == [1, 3]), None, "the object at 0x10 changed");
        assert_eq!((c.stale, c.size().entries), (1, 0));
        for k in 0..100 {
            c.insert(k, "x", vec![], 10);
            assert!(c.size().entries <= 8);
        }
        c.insert(1000, "big", vec![], 990);
        assert!(c.size().bytes <= 1000, "{:?}", c.size());
        assert!(c.evicted > 90);
    }

    #[test]
    fn lower_bounds_evict_at_once_and_hold() {
        let mut c: BoundedCache<u64> = BoundedCache::new(100, 10_000);
        for k in 0..100 {
            c.insert(k, k, vec![], 100);
        }
        c.set_bounds(10, 10_000);
        assert!(c.size().entries <= 10, "{:?}", c.size());
        c.set_bounds(100, 500);
        assert!(c.size().bytes <= 500, "{:?}", c.size());
        for k in 100..200 {
            c.insert(k, k, vec![], 100);
            assert!(c.size().bytes <= 500);
        }
    }
}
