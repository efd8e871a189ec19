//! What parsed source maps may hold: each distinct map is parsed once for
//! the whole program (keyed by its file's identity, so the same file behind
//! 16 scripts, or behind several processes, is one parse shared by `Arc`),
//! and the heap of the maps alive is bounded per process ([`PROCESS_SHARE`],
//! charged in `SourceMaps` (in `source_map.rs`)) and over the program
//! ([`GLOBAL_BUDGET`], here). A map is kept by the processes that use it: the
//! store holds it weakly, so it is freed with the last of them.
//!
//! The numbers: the agent ran at ~111 MiB RSS with 20 services and must stay
//! under the DaemonSet's 256 MiB limit; a map is read whole before it is
//! measured (at most `MAX_MAP_BYTES` (in `source_map.rs`), 32 MiB), so
//! 111 + 96 + 32 leaves ~17 MiB of slack. 48 MiB of tokens is ~1.8M segments,
//! a ~10 MiB `mappings` string: tsc's map of a 20 MB bundle.

use crate::source_map_parse::mib;
use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

/// Parsed map bytes one process's frames may use.
pub const PROCESS_SHARE: u64 = 48 << 20;
/// Parsed map bytes alive over the whole program.
pub const GLOBAL_BUDGET: u64 = 96 << 20;
/// Time one process may spend reading and parsing maps in one window; past it its other scripts
/// wait for a later window. A 10 MiB map reads and parses in ~150 ms on this project's 2-vCPU CI
/// machine, so a process with a few ordinary maps never reaches it, and a hostile one costs every
/// other process at most this (plus the one load under way) per window.
pub const MAP_TIME_SHARE: Duration = Duration::from_millis(500);
/// Map identities remembered (alive or refused); past this the refused ones are forgotten.
const MAX_KNOWN: usize = 16 << 10;

static MAPS_OVER_SHARE: AtomicU64 = AtomicU64::new(0);
static WINDOWS_PAST_TIME_SHARE: AtomicU64 = AtomicU64::new(0);

/// Maps refused for their parsed size (per process that wanted one), over the program's life.
pub fn maps_over_share() -> u64 {
    MAPS_OVER_SHARE.load(Ordering::Relaxed)
}

/// Windows in which a process's map loading was cut off at [`MAP_TIME_SHARE`], over the program's life.
pub fn windows_past_time_share() -> u64 {
    WINDOWS_PAST_TIME_SHARE.load(Ordering::Relaxed)
}

pub(crate) fn count_over_share() {
    MAPS_OVER_SHARE.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn count_past_time_share() {
    WINDOWS_PAST_TIME_SHARE.fetch_add(1, Ordering::Relaxed);
}

/// A file as the kernel knows it: a change to it (size, mtime) is a new file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: i64,
    pub mtime_ns: i64,
}

impl FileId {
    pub fn of(meta: &Metadata) -> FileId {
        FileId { dev: meta.dev(), ino: meta.ino(), size: meta.size(), mtime: meta.mtime(), mtime_ns: meta.mtime_nsec() }
    }
}

/// Where a map's bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MapKey {
    /// A map file.
    File(FileId),
    /// The inline (`data:` URL) map of this script file.
    InlineIn(FileId),
}

/// The maps parsed, shared by every process's `SourceMaps` (in `source_map.rs`).
pub struct MapStore<T> {
    known: HashMap<MapKey, Known<T>>,
    budget: u64,
}

struct Known<T> {
    /// Dangling for a map refused or no longer used.
    map: Weak<T>,
    bytes: u64,
}

impl<T> MapStore<T> {
    pub fn new(budget: u64) -> MapStore<T> {
        MapStore { known: HashMap::new(), budget }
    }

    /// The parsed map of `key` when some process still uses it, and its bytes.
    pub fn get(&self, key: &MapKey) -> Option<(Arc<T>, u64)> {
        let k = self.known.get(key)?;
        Some((k.map.upgrade()?, k.bytes))
    }

    /// What a parse of `key` took or would take, when it was tried before.
    pub fn known_bytes(&self, key: &MapKey) -> Option<u64> {
        self.known.get(key).map(|k| k.bytes)
    }

    /// Parsed bytes of the maps alive now.
    pub fn held(&self) -> u64 {
        self.known.values().filter(|k| k.map.strong_count() > 0).map(|k| k.bytes).sum()
    }

    /// What is left of the program's budget.
    pub fn left(&self) -> u64 {
        self.budget.saturating_sub(self.held())
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Remembers a parse that some process now holds.
    pub fn insert(&mut self, key: MapKey, map: &Arc<T>, bytes: u64) {
        self.make_room();
        self.known.insert(key, Known { map: Arc::downgrade(map), bytes });
    }

    /// Remembers what a refused map would take: the next script naming it is refused unread.
    pub fn refused(&mut self, key: MapKey, bytes: u64) {
        self.make_room();
        self.known.insert(key, Known { map: Weak::new(), bytes });
    }

    fn make_room(&mut self) {
        if self.known.len() >= MAX_KNOWN {
            self.known.retain(|_, k| k.map.strong_count() > 0);
        }
    }
}

/// The program's store of parsed maps (the agent's worker and `record` alike).
pub fn global() -> &'static Mutex<MapStore<sourcemap::DecodedMap>> {
    static STORE: OnceLock<Mutex<MapStore<sourcemap::DecodedMap>>> = OnceLock::new();
    STORE.get_or_init(|| Mutex::new(MapStore::new(GLOBAL_BUDGET)))
}

/// One process's charge against [`PROCESS_SHARE`]: each distinct map it uses counts once.
#[derive(Debug)]
pub struct Share {
    limit: u64,
    charged: HashMap<MapKey, u64>,
    bytes: u64,
}

impl Share {
    pub fn new(limit: u64) -> Share {
        Share { limit, charged: HashMap::new(), bytes: 0 }
    }

    pub fn left(&self) -> u64 {
        self.limit.saturating_sub(self.bytes)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Counts `key` against the share (once); false, and nothing counted, when it does not fit.
    pub fn charge(&mut self, key: MapKey, bytes: u64) -> bool {
        if self.charged.contains_key(&key) {
            return true;
        }
        if bytes > self.left() {
            return false;
        }
        self.charged.insert(key, bytes);
        self.bytes += bytes;
        true
    }

    /// The process let go of the map `key`.
    pub fn uncharge(&mut self, key: MapKey) {
        self.bytes -= self.charged.remove(&key).unwrap_or(0);
    }

    /// The process let go of every map (its cache started over).
    pub fn clear(&mut self) {
        self.charged.clear();
        self.bytes = 0;
    }
}

/// Why a map was not applied for its size: which bound it met.
pub fn over_share_reason(estimate: u64, process_left: u64, global_left: u64) -> String {
    let (left, whose) = if process_left <= global_left { (process_left, "this process's") } else { (global_left, "the program's") };
    format!(
        "parsed it would take ~{} MiB, more than the {} MiB left of {whose} share ({} MiB a process, {} MiB in all)",
        mib(estimate),
        mib(left),
        PROCESS_SHARE >> 20,
        GLOBAL_BUDGET >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ino: u64) -> MapKey {
        MapKey::File(FileId { dev: 1, ino, size: 10, mtime: 0, mtime_ns: 0 })
    }

    #[test]
    fn a_map_is_held_while_someone_uses_it_and_freed_with_the_last() {
        let mut store: MapStore<Vec<u8>> = MapStore::new(100);
        let map = Arc::new(vec![0u8; 4]);
        store.insert(key(1), &map, 60);
        assert_eq!((store.held(), store.left()), (60, 40));
        let again = store.get(&key(1)).expect("shared while alive").0;
        assert!(Arc::ptr_eq(&map, &again), "one parse behind two users");
        drop((map, again));
        assert_eq!((store.held(), store.left()), (0, 100), "freed with its last user");
        assert!(store.get(&key(1)).is_none());
        assert_eq!(store.known_bytes(&key(1)), Some(60), "its size is still known");
        store.refused(key(2), 500);
        assert_eq!((store.held(), store.known_bytes(&key(2))), (0, Some(500)), "a refusal holds nothing");
    }

    #[test]
    fn a_share_counts_each_map_once_and_refuses_what_does_not_fit() {
        let mut share = Share::new(100);
        assert!(share.charge(key(1), 60));
        assert!(share.charge(key(1), 60), "the same map again: no new charge");
        assert_eq!(share.left(), 40);
        assert!(!share.charge(key(2), 41), "over what is left");
        assert_eq!(share.left(), 40, "a refusal charges nothing");
        assert!(share.charge(key(3), 40), "exactly what is left fits");
        share.uncharge(key(3));
        share.uncharge(key(3));
        assert_eq!(share.left(), 40, "let go of once");
        share.clear();
        assert_eq!(share.left(), 100);
    }

    #[test]
    fn the_reason_names_the_tighter_bound() {
        assert!(over_share_reason(200 << 20, 10 << 20, 50 << 20).contains("10.0 MiB left of this process's share"));
        assert!(over_share_reason(200 << 20, 40 << 20, 5 << 20).contains("5.0 MiB left of the program's share"));
    }
}
