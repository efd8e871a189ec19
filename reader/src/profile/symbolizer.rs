//! Names the addresses of one process's stacks: native frames from the ELF
//! symbols of the mapped objects (through [`NativeSymbols`], which symbolizers
//! of many processes share: each object is opened and parsed once), JS frames
//! from V8's jitdump (`--perf-prof`: down to the line) or else its perf map
//! (`--perf-basic-prof*`: the function), kernel frames from kallsyms. Every
//! lookup address is cached.

use super::frame::Frame;
use super::jitdump::{self, JitDumpFile};
use super::native_symbols::{NativeSymbols, ObjectId};
use super::perf_map::{self, PerfMap};
use super::source_map::SourceMaps;
use crate::discovery::maps::{read_maps, Mapping};
use anyhow::{bail, Context, Result};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Processes found running V8 whose JS frames could not be named (no jitdump, no perf map),
/// each counted once, over every symbolizer of this program: the agent's status line shows it.
static PROCESSES_WITH_UNNAMED_JS: AtomicU64 = AtomicU64::new(0);

/// How many processes (over this program's life) had JS frames nothing could name.
pub fn processes_with_unnamed_js() -> u64 {
    PROCESSES_WITH_UNNAMED_JS.load(Ordering::Relaxed)
}

/// Named addresses kept (~100 bytes each).
const MAX_CACHED_ADDRESSES: usize = 500_000;

/// A perf map last written this long before its process started is another process's: pids are
/// reused and V8 never deletes its map. The margin covers the start time's clock tick and a clock
/// step; a pid reused within it, by a process that writes no map of its own, goes unnoticed.
const STALE_PERF_MAP_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

/// What became of the V8 perf map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerfMapStatus {
    Loaded {
        path: PathBuf,
        functions: usize,
    },
    Missing {
        path: PathBuf,
    },
    /// Last written before the process started: left by an earlier process with the same pid.
    Stale {
        path: PathBuf,
    },
    Unreadable {
        path: PathBuf,
        error: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Space {
    User,
    Kernel,
}

pub struct Symbolizer {
    pid: i32,
    natives: Rc<RefCell<NativeSymbols>>,
    /// The object of each file mapping looked at, by (start, inode).
    objects: HashMap<(u64, u64), Option<ObjectId>>,
    maps: Vec<Mapping>,
    perf_map_path: PathBuf,
    perf_map: Option<PerfMap>,
    perf_map_len: Option<u64>,
    perf_map_error: Option<String>,
    /// The file at `perf_map_path` predates the process (see [`STALE_PERF_MAP_MARGIN`]).
    perf_map_stale: bool,
    /// When the process started, on the wall clock (None if it could not be read: no file is stale then).
    started_at: Option<std::time::SystemTime>,
    /// V8's jitdump, once the process maps one.
    jitdump: Option<JitDumpFile>,
    jitdump_error: Option<String>,
    cache: HashMap<(Space, u64), Frame>,
    /// Source maps of the process's scripts: JS frames named by their original source.
    source_maps: SourceMaps,
    /// Distinct addresses named in baseline (Sparkplug) code: their frames carry the function's line.
    baseline_addresses: u64,
    /// The once-per-process notes already given ([`Symbolizer::process_notes_once`]).
    unnamed_js_noted: Cell<bool>,
    baseline_noted: Cell<bool>,
}

/// Non-leaf frames are return addresses, one past the call: look up the
/// byte before so a call ending a function names the caller, not its neighbour.
fn lookup_addr(addr: u64, depth: usize) -> u64 {
    if depth == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

impl Symbolizer {
    /// A symbolizer with native symbols of its own (one process).
    pub fn new(pid: i32) -> Result<Self> {
        Self::sharing(pid, Rc::new(RefCell::new(NativeSymbols::new())))
    }

    /// A symbolizer whose native symbols are shared with other processes' symbolizers.
    pub fn sharing(pid: i32, natives: Rc<RefCell<NativeSymbols>>) -> Result<Self> {
        if pid <= 0 {
            bail!("pid {pid}: expected a positive process id");
        }
        let maps = read_maps(pid).with_context(|| format!("symbolizing process {pid}"))?;
        let mut s = Symbolizer {
            pid,
            natives,
            objects: HashMap::new(),
            maps,
            perf_map_path: perf_map::path_for(pid),
            perf_map: None,
            perf_map_len: None,
            perf_map_error: None,
            perf_map_stale: false,
            started_at: crate::discovery::host_scan::started_at(pid as u32),
            jitdump: None,
            jitdump_error: None,
            cache: HashMap::new(),
            source_maps: SourceMaps::default(),
            baseline_addresses: 0,
            unnamed_js_noted: Cell::new(false),
            baseline_noted: Cell::new(false),
        };
        s.reload_jit_names();
        Ok(s)
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The process's mappings as last read (pprof writes them out).
    pub fn mappings(&self) -> &[Mapping] {
        &self.maps
    }

    pub fn perf_map_status(&self) -> PerfMapStatus {
        let path = self.perf_map_path.clone();
        match (&self.perf_map, &self.perf_map_error) {
            (Some(m), _) => PerfMapStatus::Loaded { path, functions: m.len() },
            (None, Some(e)) => PerfMapStatus::Unreadable { path, error: e.clone() },
            (None, None) if self.perf_map_stale => PerfMapStatus::Stale { path },
            (None, None) => PerfMapStatus::Missing { path },
        }
    }

    /// The process runs V8 (node, or an embedder linking libnode): its JS
    /// frames can only be named from a perf map.
    pub fn runs_v8(&self) -> bool {
        self.maps.iter().any(|m| {
            let base = m.path().rsplit('/').next().unwrap_or("");
            m.is_file_backed() && (base.starts_with("node") || base.starts_with("libnode"))
        })
    }

    /// The jitdump being read (`node --perf-prof`), and how many code objects it names.
    pub fn jitdump_status(&self) -> Option<(&std::path::Path, usize)> {
        self.jitdump.as_ref().map(|j| (j.path(), j.dump.len()))
    }

    /// Sentences for the user about the jitdump: why it stopped being read, or could not be.
    pub fn jitdump_notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.jitdump_error.iter().map(|e| format!("V8 jitdump of process {}: {e}", self.pid)).collect();
        if let Some(j) = &self.jitdump {
            if let Some(why) = &j.dump.stopped {
                notes.push(format!("V8 jitdump {} of process {}: reading stopped: {why}", j.path().display(), self.pid));
            }
        }
        notes
    }

    /// A sentence for the user when JS frames cannot be named, else None.
    pub fn perf_map_note(&self) -> Option<String> {
        if self.jitdump.is_some() {
            return None;
        }
        let no_map = |why: String| {
            format!(
                "no V8 jitdump or perf map for process {} (no jit-*.dump mapped, {why}): JS frames stay unnamed ([anon:jit]); \
                 start node with --perf-prof --perf-basic-prof-only-functions (JS frames down to the line), \
                 or --perf-basic-prof-only-functions alone (functions), and --interpreted-frames-native-stack \
                 to name interpreted frames too",
                self.pid
            )
        };
        match self.perf_map_status() {
            PerfMapStatus::Loaded { .. } => None,
            PerfMapStatus::Missing { path } => Some(no_map(format!("no {}", path.display()))),
            PerfMapStatus::Stale { path } => {
                Some(no_map(format!("{} ignored: last written before the process started, by an earlier process with the same pid", path.display())))
            }
            PerfMapStatus::Unreadable { path, error } => {
                Some(format!("V8 perf map {} of process {} is unreadable ({error}): JS frames stay unnamed", path.display(), self.pid))
            }
        }
    }

    /// Sentences about this process that hold for its life, each given once
    /// (the agent shows them once per process, not once per window): its JS
    /// frames stay unnamed (counted in [`processes_with_unnamed_js`]), or
    /// some ran in baseline code and carry their function's line only.
    pub fn process_notes_once(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.runs_v8() && !self.unnamed_js_noted.get() {
            if let Some(note) = self.perf_map_note() {
                self.unnamed_js_noted.set(true);
                PROCESSES_WITH_UNNAMED_JS.fetch_add(1, Ordering::Relaxed);
                notes.push(note);
            }
        }
        if !self.baseline_noted.get() {
            if let Some(note) = self.baseline_note() {
                self.baseline_noted.set(true);
                notes.push(note);
            }
        }
        notes
    }

    /// Sentences about source maps that could not be used.
    pub fn source_map_notes(&self) -> Vec<String> {
        self.source_maps.all_notes()
    }

    /// A sentence when some JS frames ran in baseline (Sparkplug) code, whose lines V8 does not give.
    pub fn baseline_note(&self) -> Option<String> {
        (self.baseline_addresses > 0).then(|| {
            format!(
                "process {}: JS frames in V8's baseline (Sparkplug) code show their function's line, not the sampled line: \
                 V8's jitdump keys that tier's positions by bytecode offset, not by instruction \
                 ({} addresses; optimized code has exact lines, see docs/source-lines.md)",
                self.pid, self.baseline_addresses
            )
        })
    }

    /// Reads what V8 added to its jitdump and perf map since the last look.
    fn reload_jit_names(&mut self) {
        if self.jitdump.is_none() {
            self.jitdump = jitdump::path_for(self.pid, &self.maps).map(JitDumpFile::new);
        }
        if let Some(j) = self.jitdump.as_mut() {
            self.jitdump_error = j.refresh().err().map(|e| format!("{}: {e}", j.path().display()));
        }
        self.reload_perf_map_if_grown();
    }

    /// Re-reads the perf map when it grew (V8 appends as it compiles).
    fn reload_perf_map_if_grown(&mut self) {
        // Not followed: a symlink planted as the map is refused by the open below, and reported.
        let len = match std::fs::symlink_metadata(&self.perf_map_path) {
            Ok(m) => {
                // Checked at every look: V8 truncates a stale map when it opens its own.
                let written = m.modified().ok();
                self.perf_map_stale = matches!((written, self.started_at), (Some(w), Some(s)) if w + STALE_PERF_MAP_MARGIN < s);
                if self.perf_map_stale {
                    return;
                }
                m.len()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.perf_map_error = Some(e.to_string());
                return;
            }
        };
        if self.perf_map_len == Some(len) {
            return;
        }
        match PerfMap::from_target_file(self.pid, &self.perf_map_path) {
            Ok(m) => {
                self.perf_map = Some(m);
                self.perf_map_len = Some(len);
                self.perf_map_error = None;
            }
            Err(e) => self.perf_map_error = Some(e.to_string()),
        }
    }

    /// Names a user stack (leaf first).
    pub fn user_frames(&mut self, stack: &[u64]) -> Vec<Frame> {
        self.prefetch_user(stack.iter().enumerate().map(|(d, a)| lookup_addr(*a, d)).collect());
        stack.iter().enumerate().map(|(d, a)| self.cache[&(Space::User, lookup_addr(*a, d))].clone()).collect()
    }

    /// Names a kernel stack (leaf first).
    pub fn kernel_frames(&mut self, stack: &[u64]) -> Vec<Frame> {
        self.prefetch_kernel(stack.iter().enumerate().map(|(d, a)| lookup_addr(*a, d)).collect());
        stack.iter().enumerate().map(|(d, a)| self.cache[&(Space::Kernel, lookup_addr(*a, d))].clone()).collect()
    }

    /// Resolves, in one blazesym call per object, every stack address not yet
    /// cached: call once with all samples before naming them one by one.
    pub fn prefetch(&mut self, user_stacks: &[&[u64]], kernel_stacks: &[&[u64]]) {
        // A long-running agent names addresses forever (JIT code moves): start over past the bound.
        if self.cache.len() > MAX_CACHED_ADDRESSES {
            self.cache.clear();
        }
        let lookups = |stacks: &[&[u64]]| -> Vec<u64> { stacks.iter().flat_map(|s| s.iter().enumerate().map(|(d, a)| lookup_addr(*a, d))).collect() };
        self.prefetch_user(lookups(user_stacks));
        self.prefetch_kernel(lookups(kernel_stacks));
    }

    fn uncached(&self, space: Space, mut addrs: Vec<u64>) -> Vec<u64> {
        addrs.retain(|a| !self.cache.contains_key(&(space, *a)));
        addrs.sort_unstable();
        addrs.dedup();
        addrs
    }

    fn prefetch_user(&mut self, addrs: Vec<u64>) {
        let addrs = self.uncached(Space::User, addrs);
        if addrs.is_empty() {
            return;
        }
        if let Ok(m) = read_maps(self.pid) {
            self.maps = m; // libraries dlopen'ed since the last look
        }
        let names = self.native_names(&addrs);
        let mut reloaded = false;
        for (addr, name) in addrs.into_iter().zip(names) {
            let frame = match name {
                Some((name, object)) => Frame::native(&name, Some(&object)),
                None => {
                    if !reloaded && self.in_anonymous_code(addr) {
                        self.reload_jit_names();
                        reloaded = true;
                    }
                    let mut frame = self.js_or_unknown(addr);
                    self.source_maps.apply(self.pid, &mut frame);
                    frame
                }
            };
            self.cache.insert((Space::User, addr), frame);
        }
    }

    fn in_anonymous_code(&self, addr: u64) -> bool {
        self.maps.iter().any(|m| m.contains(addr) && !m.is_file_backed())
    }

    fn js_or_unknown(&mut self, addr: u64) -> Frame {
        if let Some((f, pos)) = self.jitdump.as_ref().and_then(|j| j.dump.lookup(addr)) {
            if jitdump::positions_of_tier(f.tier) == jitdump::TierPositions::Bytecode {
                self.baseline_addresses += 1;
            }
            return Frame { pos, ..Frame::js(&f.name, f.script.as_deref(), f.line, f.column) };
        }
        if let Some(f) = self.perf_map.as_ref().and_then(|m| m.lookup(addr)) {
            return Frame::js(&f.name, f.script.as_deref(), f.line, f.column);
        }
        match self.maps.iter().find(|m| m.contains(addr)) {
            Some(m) if m.is_file_backed() => {
                let base = m.path().rsplit('/').next().unwrap_or(m.path());
                Frame::unknown(format!("[{base}]"), Some(m.path().to_string()))
            }
            Some(m) if m.name.is_empty() => Frame::unknown("[anon:jit]".into(), None),
            Some(m) => Frame::unknown(m.name.clone(), None),
            None => Frame::unknown("[unmapped]".into(), None),
        }
    }

    /// ELF symbol and object path of each address (None: not in a file mapping, or no symbol).
    fn native_names(&mut self, addrs: &[u64]) -> Vec<Option<(String, String)>> {
        let mut by_object: HashMap<ObjectId, (String, Vec<(usize, u64)>)> = HashMap::new();
        for (i, &addr) in addrs.iter().enumerate() {
            let Some(m) = self.maps.iter().find(|m| m.contains(addr) && m.is_file_backed()) else { continue };
            let natives = &self.natives;
            let pid = self.pid;
            let object = *self.objects.entry((m.start, m.inode)).or_insert_with(|| natives.borrow_mut().object(pid, m));
            if let Some(id) = object {
                let e = by_object.entry(id).or_insert_with(|| (m.path().to_string(), Vec::new()));
                e.1.push((i, addr - m.start + m.offset));
            }
        }
        let mut names = vec![None; addrs.len()];
        let mut natives = self.natives.borrow_mut();
        for (id, (path, wanted)) in by_object {
            let offsets: Vec<u64> = wanted.iter().map(|w| w.1).collect();
            for ((i, _), name) in wanted.into_iter().zip(natives.names(id, &offsets)) {
                names[i] = name.map(|n| (n, path.clone()));
            }
        }
        names
    }

    fn prefetch_kernel(&mut self, addrs: Vec<u64>) {
        let addrs = self.uncached(Space::Kernel, addrs);
        if addrs.is_empty() {
            return;
        }
        let frames = self.natives.borrow_mut().kernel_frames(&addrs);
        for (addr, frame) in addrs.into_iter().zip(frames) {
            self.cache.insert((Space::Kernel, addr), frame);
        }
    }
}

impl Drop for Symbolizer {
    fn drop(&mut self) {
        self.natives.borrow_mut().release(self.pid);
    }
}
