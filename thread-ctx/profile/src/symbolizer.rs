//! Names the addresses of one process's stacks: native frames from the ELF
//! symbols of the mapped objects (through [`NativeSymbols`], which symbolizers
//! of many processes share: each object is opened and parsed once, and each
//! (object, file offset) named once), JS frames from V8's jitdump
//! (`--perf-prof`: down to the line) or else its perf map
//! (`--perf-basic-prof*`: the function), kernel frames from kallsyms.
//!
//! Names are kept across windows ([`Symbolizer::end_window`]), bounded by
//! [`MAX_FRAMES`], so that a window names only what earlier windows did not:
//! - a native address in a file mapping, and a kernel address, for as long as
//!   the mapping holding it is the same (maps read again and changed: the
//!   names in changed mappings go);
//! - a JS frame named from the heap, for as long as every cached object it was
//!   named from (function, code, bytecode array) is still the same object, checked
//!   once a window with the other checks of its batch ([`Dependencies`]), and at
//!   most [`JS_KEPT_WINDOWS`] windows (a source map rewritten since is then seen);
//! - an address in anonymous memory (JIT code moves) and a frame the heap did not
//!   name only for the window it was named in.
//!
//! The process's maps are read again only when an address falls outside
//! every known mapping, or once they are [`MAPS_MAX_AGE`] old.

use super::aggregate::{lookup_addr, Space};
use super::frame::Frame;
use super::jitdump::{self, JitDumpFile};
use super::js_key::JsKey;
use super::js_names::{JsNamed, JsNames};
use super::native_symbols::{NativeSymbols, ObjectId};
use super::perf_map_reader::{PerfMapReader, PerfMapStatus};
use super::source_map::SourceMaps;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use thread_ctx_discovery::error::{Error, Result};
use thread_ctx_discovery::maps::{read_maps, Mapping};
use thread_ctx_sampler::{JsFrameSlots, V8FramesError, V8Process};
use thread_ctx_v8::dependencies::Dependencies;

/// Frames a process's symbolizer keeps across windows at most; past this, after a window,
/// every kept name goes (counted in [`NameCache::evicted`]) and the next window names anew.
pub const MAX_FRAMES: usize = 16 << 10;
/// Addresses and JS frames kept per kept frame at most (many addresses name one function).
const KEYS_PER_FRAME: usize = 4;
/// Windows a JS frame's name is kept at most before it is named again (a source map rewritten
/// in the meantime is then applied).
pub const JS_KEPT_WINDOWS: u64 = 6;

/// What the cross-window name cache did, running totals (the status line shows them per window).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NameCache {
    /// Naming rounds of JS frames (each one read of the target for all its checks).
    pub batches: u64,
    /// JS frames named (cache misses) and kept names used again (hits).
    pub js_named: u64,
    pub js_reused: u64,
    /// Kept JS names checked against the heap (once a window each), and those found stale
    /// (an object they were named from moved, died or was replaced).
    pub js_checked: u64,
    pub js_stale: u64,
    /// Native and kernel addresses named, and found named in an earlier window.
    pub native_named: u64,
    pub native_reused: u64,
    /// Kept names dropped: the bound reached, or their mapping changed.
    pub evicted: u64,
}

impl std::ops::AddAssign for NameCache {
    fn add_assign(&mut self, o: NameCache) {
        self.batches += o.batches;
        self.js_named += o.js_named;
        self.js_reused += o.js_reused;
        self.js_checked += o.js_checked;
        self.js_stale += o.js_stale;
        self.native_named += o.native_named;
        self.native_reused += o.native_reused;
        self.evicted += o.evicted;
    }
}

/// A JS frame's name kept across windows.
struct KeptJs {
    /// Indexes in `frames`, innermost first.
    indexes: Vec<usize>,
    /// What it was named from; empty: not named by the heap, kept for its window only.
    deps: Dependencies,
    /// The window in which it was last named or checked.
    checked: u64,
    named: u64,
}

/// Processes found running V8 whose JS frames could not be named (no jitdump, no perf map),
/// each counted once, over every symbolizer of this program: the agent's status line shows it.
static PROCESSES_WITH_UNNAMED_JS: AtomicU64 = AtomicU64::new(0);

/// How many processes (over this program's life) had JS frames nothing could name.
pub fn processes_with_unnamed_js() -> u64 {
    PROCESSES_WITH_UNNAMED_JS.load(Ordering::Relaxed)
}

/// The name of a frame in anonymous executable memory (V8's generated code) that nothing named.
pub const UNNAMED_JIT: &str = "[anon:jit]";
/// Why a JS frame of a process whose heap is not read was not named by it.
const NOT_NAMED_BY_HEAP: &str = thread_ctx_model::js_naming::why::NO_SOURCE;

/// Maps older than this are read again at the next naming (libraries loaded, code unmapped).
pub const MAPS_MAX_AGE: Duration = Duration::from_secs(10);
/// The process's maps are read at most this often when addresses fall outside them.
const MAPS_MIN_INTERVAL: Duration = Duration::from_millis(500);

pub struct Symbolizer {
    pid: i32,
    natives: Rc<RefCell<NativeSymbols>>,
    /// The object of each file mapping looked at, by (start, inode).
    objects: HashMap<(u64, u64), Option<ObjectId>>,
    maps: Vec<Mapping>,
    maps_read: Instant,
    perf_map: PerfMapReader,
    /// V8's jitdump, once the process maps one.
    jitdump: Option<JitDumpFile>,
    jitdump_error: Option<String>,
    /// Names: (space, lookup address) -> index in `frames`, kept across windows but for
    /// those in `transient`.
    named: HashMap<(Space, u64), usize>,
    /// Names of this window only (anonymous memory: JIT code moves).
    transient: Vec<(Space, u64)>,
    frames: Vec<Frame>,
    frame_ids: HashMap<Frame, usize>,
    /// Windows ended so far: a kept JS name is checked once per window.
    window: u64,
    /// What the kept names saved, running totals.
    pub cache: NameCache,
    /// [`MAX_FRAMES`], lower in tests.
    max_frames: usize,
    /// Reads of the process's maps so far.
    pub maps_reads: u64,
    /// Source maps of the process's scripts: JS frames named by their original source.
    source_maps: SourceMaps,
    /// Distinct addresses named in baseline (Sparkplug) code: their frames carry the function's line.
    baseline_addresses: u64,
    /// The once-per-process notes already given ([`Symbolizer::process_notes_once`]).
    unnamed_js_noted: Cell<bool>,
    baseline_noted: Cell<bool>,
    /// JS frames named from the process's V8 heap, when its layout is known.
    js: Option<JsNames>,
    /// Why they are not (said once), for a process that runs V8.
    js_unavailable: Option<String>,
    js_unavailable_noted: Cell<bool>,
    /// JS frames: key -> indexes in `frames`, innermost first, kept across windows.
    js_named: HashMap<JsKey, KeptJs>,
    /// Why the heap did not name a key of this window (the reader's miss, or why it was not asked).
    js_why: HashMap<JsKey, &'static str>,
}

impl Symbolizer {
    /// A symbolizer with native symbols of its own (one process).
    pub fn new(pid: i32) -> Result<Self> {
        Self::sharing(pid, Rc::new(RefCell::new(NativeSymbols::new())))
    }

    /// A symbolizer whose native symbols are shared with other processes' symbolizers.
    pub fn sharing(pid: i32, natives: Rc<RefCell<NativeSymbols>>) -> Result<Self> {
        if pid <= 0 {
            return Err(Error::Process {
                pid,
                path: format!("/proc/{pid}"),
                cause: std::io::Error::new(std::io::ErrorKind::InvalidInput, "expected a positive process id"),
            });
        }
        let maps = read_maps(pid)?;
        let mut s = Symbolizer {
            pid,
            natives,
            objects: HashMap::new(),
            maps,
            maps_read: Instant::now(),
            perf_map: PerfMapReader::new(pid, thread_ctx_discovery::host_scan::started_at(pid as u32)),
            jitdump: None,
            jitdump_error: None,
            named: HashMap::new(),
            transient: Vec::new(),
            frames: Vec::new(),
            frame_ids: HashMap::new(),
            window: 0,
            cache: NameCache::default(),
            max_frames: MAX_FRAMES,
            maps_reads: 1,
            source_maps: SourceMaps::default(),
            baseline_addresses: 0,
            unnamed_js_noted: Cell::new(false),
            baseline_noted: Cell::new(false),
            js: None,
            js_unavailable: None,
            js_unavailable_noted: Cell::new(false),
            js_named: HashMap::new(),
            js_why: HashMap::new(),
        };
        s.reload_jit_names();
        Ok(s)
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Names the process's JS frames from its V8 heap (Ok), or says once why not (Err; nothing
    /// to say for a process without V8).
    pub fn set_v8(&mut self, v8: std::result::Result<V8Process, V8FramesError>) {
        match v8 {
            Ok(p) => {
                self.js = Some(JsNames::new(self.pid, p));
                self.js_unavailable = None;
            }
            Err(V8FramesError::NoV8 { .. }) => {}
            Err(e) => self.js_unavailable = Some(e.to_string()),
        }
    }

    /// The process's JS frames are named from its V8 heap.
    pub fn names_js_from_heap(&self) -> bool {
        self.js.is_some()
    }

    /// The heap namer's counts and cache sizes, when it runs.
    pub fn js_names(&self) -> Option<&JsNames> {
        self.js.as_ref()
    }

    /// The process's mappings as last read (profiles list the executable ones).
    pub fn mappings(&self) -> &[Mapping] {
        &self.maps
    }

    pub fn perf_map_status(&self) -> PerfMapStatus {
        self.perf_map.status()
    }

    /// JS functions held now from the perf map and the jitdump.
    pub fn js_functions_cached(&self) -> usize {
        self.perf_map.map().map_or(0, |m| m.len()) + self.jitdump.as_ref().map_or(0, |j| j.dump.len())
    }

    /// JS functions dropped from the perf map to keep it bounded.
    pub fn js_names_evicted(&self) -> u64 {
        self.perf_map.evicted
    }

    /// The process runs V8 (node, or an embedder linking libnode): its JS
    /// frames can only be named from a perf map.
    pub fn runs_v8(&self) -> bool {
        self.maps.iter().any(|m| {
            let base = m.path().rsplit('/').next().unwrap_or("");
            m.is_file_backed() && (base.starts_with("node") || base.starts_with("libnode"))
        })
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

    /// Sentences about this process that hold for its life, each given once
    /// (the agent shows them once per process, not once per window): its JS
    /// frames stay unnamed (counted in [`processes_with_unnamed_js`]), or
    /// some ran in baseline code and carry their function's line only.
    pub fn process_notes_once(&self) -> Vec<String> {
        let mut notes = Vec::new();
        notes.extend(self.heap_fallback_note_once());
        notes.extend(self.source_maps.notes_once());
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

    /// Why a node process's JS frames are not named from its V8 heap (no `v8dbg_*` symbols, a
    /// layout that fails its check), the first time it is asked for, else None.
    pub fn heap_fallback_note_once(&self) -> Option<String> {
        let why = self.js_unavailable.as_ref().filter(|_| !self.js_unavailable_noted.get())?;
        self.js_unavailable_noted.set(true);
        Some(format!("{why}: falling back to the perf map and jitdump for JS frames"))
    }

    /// A sentence for the user when JS frames cannot be named, else None.
    pub fn perf_map_note(&self) -> Option<String> {
        if self.jitdump.is_some() || self.js.is_some() {
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

    /// Reads what V8 added to its jitdump and perf map since the last look.
    fn reload_jit_names(&mut self) {
        if self.jitdump.is_none() {
            self.jitdump = jitdump::path_for(self.pid, &self.maps).map(|p| JitDumpFile::new(self.pid, p));
        }
        if let Some(j) = self.jitdump.as_mut() {
            self.jitdump_error = j.refresh().err().map(|e| format!("{}: {e}", j.path().display()));
        }
        self.perf_map.refresh();
    }

    /// Names every lookup address (see [`lookup_addr`]) not named yet in this window: one
    /// blazesym call per object for the native ones, and one look at what V8 appended.
    pub fn name(&mut self, user: &[u64], kernel: &[u64]) {
        let user: Vec<u64> = self.unnamed(Space::User, user);
        let kernel: Vec<u64> = self.unnamed(Space::Kernel, kernel);
        if !user.is_empty() {
            self.name_user(&user);
        }
        if !kernel.is_empty() {
            let frames = self.natives.borrow_mut().kernel_frames(&kernel);
            self.cache.native_named += kernel.len() as u64;
            for (addr, frame) in kernel.into_iter().zip(frames) {
                let i = self.intern(frame);
                self.named.insert((Space::Kernel, addr), i);
            }
        }
    }

    /// Names JS frames not named yet, and checks once this window those named in an earlier one.
    pub fn name_js(&mut self, keys: &[JsKey]) {
        let mut seen = HashSet::new();
        let (mut new, mut recheck) = (Vec::new(), Vec::new());
        for key in keys.iter().filter(|k| seen.insert(**k)) {
            match self.js_named.get(key) {
                Some(kept) if kept.checked == self.window => {}
                Some(_) => recheck.push(*key),
                None => new.push(*key),
            }
        }
        self.name_js_keys(new, recheck);
    }

    /// Names `new` and checks `recheck` (kept from an earlier window) in one batch; those
    /// found stale are named again.
    fn name_js_keys(&mut self, new: Vec<JsKey>, recheck: Vec<JsKey>) {
        if new.is_empty() && recheck.is_empty() {
            return;
        }
        let Some(js) = self.js.as_mut() else {
            for key in new {
                let indexes = self.js_indexes_of(&key, Err(NOT_NAMED_BY_HEAP), Dependencies::default());
                self.keep_js(key, indexes, Dependencies::default());
            }
            return;
        };
        let kept: Vec<&Dependencies> = recheck.iter().map(|k| &self.js_named[k].deps).collect();
        let (checks, named) = js.name_and_check(&new, &kept, &self.maps);
        self.cache.batches += 1;
        self.cache.js_checked += recheck.len() as u64;
        let mut stale = Vec::new();
        for (key, still) in recheck.into_iter().zip(checks) {
            if still {
                self.cache.js_reused += 1;
                if let Some(k) = self.js_named.get_mut(&key) {
                    k.checked = self.window;
                }
            } else {
                self.cache.js_stale += 1;
                self.js_named.remove(&key);
                stale.push(key);
            }
        }
        for (key, (named, deps)) in new.into_iter().zip(named) {
            self.cache.js_named += 1;
            let indexes = self.js_indexes_of(&key, named, Dependencies::default());
            self.keep_js(key, indexes, deps);
        }
        if !stale.is_empty() {
            self.name_js_keys(stale, Vec::new());
        }
    }

    /// Keeps a JS frame's name; for this window only when it was not named from the heap or
    /// may lack its source map (map loading cut off this window).
    fn keep_js(&mut self, key: JsKey, indexes: Vec<usize>, mut deps: Dependencies) {
        if self.source_maps.cut_this_window() {
            deps = Dependencies::default();
        }
        self.js_named.insert(key, KeptJs { indexes, deps, checked: self.window, named: self.window });
    }

    /// Why the heap did not name the JS frame `key` this window (None: it did, or it was not named yet).
    pub fn why_unnamed(&self, key: &JsKey) -> Option<&'static str> {
        self.js_why.get(key).copied()
    }

    /// The indexes in the frames of a JS frame (innermost first), naming it now (or checking
    /// its kept name) if it was not yet this window.
    pub fn js_frame_indexes(&mut self, key: &JsKey) -> &[usize] {
        match self.js_named.get(key) {
            Some(kept) if kept.checked == self.window => {}
            Some(_) => self.name_js_keys(Vec::new(), vec![*key]),
            None => self.name_js_keys(vec![*key], Vec::new()),
        }
        &self.js_named[key].indexes
    }

    /// The indexes of `key`'s frames as the heap named them, or of its pc's name (`named` Err:
    /// why the heap did not, kept for [`Symbolizer::why_unnamed`]).
    fn js_indexes_of(&mut self, key: &JsKey, named: std::result::Result<JsNamed, &'static str>, _: Dependencies) -> Vec<usize> {
        let by_pc = |s: &mut Self, pc: u64| s.frame_index(Space::User, lookup_addr(pc, key.depth as usize));
        let named = match named {
            Ok(named) => named,
            Err(why) => {
                self.js_why.insert(*key, why);
                return vec![by_pc(self, key.pc)];
            }
        };
        let mut indexes = Vec::with_capacity(named.frames.len() + 1);
        if let Some(pc) = named.builtin_pc {
            indexes.push(by_pc(self, pc));
        }
        for mut f in named.frames {
            self.source_maps.apply(self.pid, &mut f);
            indexes.push(self.intern(f));
        }
        indexes
    }

    fn unnamed(&mut self, space: Space, addrs: &[u64]) -> Vec<u64> {
        let before = addrs.len();
        let mut v: Vec<u64> = addrs.iter().copied().filter(|a| !self.named.contains_key(&(space, *a))).collect();
        self.cache.native_reused += (before - v.len()) as u64;
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The index in this window's frames of a lookup address, naming it now if it was not yet.
    pub fn frame_index(&mut self, space: Space, lookup: u64) -> usize {
        if let Some(&i) = self.named.get(&(space, lookup)) {
            return i;
        }
        match space {
            Space::User => self.name(&[lookup], &[]),
            Space::Kernel => self.name(&[], &[lookup]),
        }
        self.named[&(space, lookup)]
    }

    pub fn frame(&self, index: usize) -> &Frame {
        &self.frames[index]
    }

    /// Ends a window: the names of this window only go, and past [`MAX_FRAMES`] every kept
    /// name goes; the rest are kept for the next window (JS ones checked again in it).
    pub fn end_window(&mut self) {
        self.perf_map.next_window();
        for k in self.transient.drain(..) {
            self.named.remove(&k);
        }
        self.js_why.clear();
        let window = self.window;
        self.js_named.retain(|_, k| !k.deps.is_empty() && window - k.named < JS_KEPT_WINDOWS);
        if let Some(js) = self.js.as_mut() {
            js.next_batch();
        }
        if self.frames.len() > self.max_frames || self.named.len() + self.js_named.len() > KEYS_PER_FRAME * self.max_frames {
            self.cache.evicted += (self.named.len() + self.js_named.len()) as u64;
            self.named.clear();
            self.js_named.clear();
            self.frames.clear();
            self.frame_ids.clear();
        }
        self.source_maps.new_window();
        self.window += 1;
    }

    /// A lower bound on the frames kept (tests).
    pub fn set_max_frames(&mut self, max: usize) {
        self.max_frames = max;
    }

    /// Names held now: frames, and the addresses and JS frames that lead to them.
    pub fn names_cached(&self) -> (usize, usize) {
        (self.frames.len(), self.named.len() + self.js_named.len())
    }

    /// Names a user stack (leaf first).
    pub fn user_frames(&mut self, stack: &[u64]) -> Vec<Frame> {
        self.stack_frames(Space::User, stack)
    }

    /// Names a user stack (leaf first) and the JS frames the sampler read of it: a JS frame may
    /// be several (the functions inlined at its pc).
    pub fn sample_frames(&mut self, stack: &[u64], js_frames: &[JsFrameSlots], leaf_words: &[u64]) -> Vec<Frame> {
        if js_frames.is_empty() {
            return self.user_frames(stack);
        }
        if let Some(js) = self.js.as_mut() {
            js.next_batch();
        }
        let mut words = Vec::new();
        JsKey::push_words(js_frames, leaf_words, &mut words);
        let keys = JsKey::from_words(&words, stack);
        let lookups: Vec<u64> = stack.iter().enumerate().map(|(d, a)| lookup_addr(*a, d)).collect();
        self.name(&lookups, &[]);
        let mut out = Vec::with_capacity(stack.len());
        for (depth, lookup) in lookups.iter().enumerate() {
            match keys.iter().find(|k| k.depth as usize == depth) {
                Some(key) => {
                    let indexes = self.js_frame_indexes(key).to_vec();
                    out.extend(indexes.into_iter().map(|i| self.frames[i].clone()));
                }
                None => out.push(self.frames[self.named[&(Space::User, *lookup)]].clone()),
            }
        }
        out
    }

    /// Names a kernel stack (leaf first).
    pub fn kernel_frames(&mut self, stack: &[u64]) -> Vec<Frame> {
        self.stack_frames(Space::Kernel, stack)
    }

    fn stack_frames(&mut self, space: Space, stack: &[u64]) -> Vec<Frame> {
        let lookups: Vec<u64> = stack.iter().enumerate().map(|(d, a)| lookup_addr(*a, d)).collect();
        match space {
            Space::User => self.name(&lookups, &[]),
            Space::Kernel => self.name(&[], &lookups),
        }
        lookups.iter().map(|a| self.frames[self.named[&(space, *a)]].clone()).collect()
    }

    fn intern(&mut self, f: Frame) -> usize {
        if let Some(&i) = self.frame_ids.get(&f) {
            return i;
        }
        self.frames.push(f.clone());
        self.frame_ids.insert(f, self.frames.len() - 1);
        self.frames.len() - 1
    }

    fn name_user(&mut self, addrs: &[u64]) {
        let outside = addrs.iter().any(|&a| !self.maps.iter().any(|m| m.contains(a)));
        let age = self.maps_read.elapsed();
        if (outside && age >= MAPS_MIN_INTERVAL) || age >= MAPS_MAX_AGE {
            if let Ok(m) = read_maps(self.pid) {
                if m != self.maps {
                    self.forget_changed(&m);
                }
                self.maps = m; // libraries dlopen'ed, code mapped since the last look
                self.maps_read = Instant::now();
                self.maps_reads += 1;
            }
        }
        if addrs.iter().any(|&a| self.in_anonymous_code(a)) {
            self.reload_jit_names();
        }
        let names = self.native_names(addrs);
        for (&addr, name) in addrs.iter().zip(names) {
            let frame = match name {
                Some((name, object)) => Frame::native(&name, Some(&object)),
                None => {
                    let mut frame = self.js_or_unknown(addr);
                    self.source_maps.apply(self.pid, &mut frame);
                    frame
                }
            };
            let i = self.intern(frame);
            self.named.insert((Space::User, addr), i);
            self.cache.native_named += 1;
            if !self.maps.iter().any(|m| m.contains(addr) && m.is_file_backed()) {
                self.transient.push((Space::User, addr));
            }
        }
    }

    /// Drops the kept names of user addresses whose mapping is not the same in `new` maps
    /// (unmapped, or another object or offset mapped there).
    fn forget_changed(&mut self, new: &[Mapping]) {
        let old = &self.maps;
        let same = |addr: u64| {
            let at = |maps: &[Mapping]| maps.iter().find(|m| m.contains(addr)).cloned();
            at(old).is_some_and(|m| Some(&m) == new.iter().find(|n| n.contains(addr)))
        };
        let before = self.named.len();
        self.named.retain(|(space, addr), _| *space == Space::Kernel || same(*addr));
        self.cache.evicted += (before - self.named.len()) as u64;
        let transient = std::mem::take(&mut self.transient);
        self.transient = transient.into_iter().filter(|k| self.named.contains_key(k)).collect();
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
        if let Some(f) = self.perf_map.map().and_then(|m| m.lookup(addr)) {
            return Frame::js(&f.name, f.script.as_deref(), f.line, f.column);
        }
        match self.maps.iter().find(|m| m.contains(addr)) {
            Some(m) if m.is_file_backed() => {
                let base = m.path().rsplit('/').next().unwrap_or(m.path());
                Frame::unknown(format!("[{base}]"), Some(m.path().to_string()))
            }
            Some(m) if m.name.is_empty() => Frame::unknown(UNNAMED_JIT.into(), None),
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
}

impl Drop for Symbolizer {
    fn drop(&mut self) {
        self.natives.borrow_mut().release(self.pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses of this test process's own code: each a native frame of a file mapping.
    fn own_code_addresses() -> Vec<u64> {
        let maps = read_maps(std::process::id() as i32).unwrap();
        let text = maps.iter().find(|m| m.is_file_backed() && m.perms.contains('x')).expect("an executable file mapping");
        (0..64).map(|i| text.start + i * ((text.end - text.start) / 64)).collect()
    }

    fn names_of(s: &mut Symbolizer, addrs: &[u64]) -> Vec<Frame> {
        addrs
            .iter()
            .map(|&a| {
                let i = s.frame_index(Space::User, a);
                s.frame(i).clone()
            })
            .collect()
    }

    #[test]
    fn native_names_are_kept_across_windows_and_bounded_with_evictions_counted() {
        let mut s = Symbolizer::new(std::process::id() as i32).unwrap();
        let addrs = own_code_addresses();
        s.name(&addrs, &[]);
        let first: Vec<Frame> = names_of(&mut s, &addrs);
        assert_eq!((s.cache.native_named, s.cache.native_reused), (64, 0));
        s.end_window();
        s.name(&addrs, &[]);
        assert_eq!((s.cache.native_named, s.cache.native_reused), (64, 64), "named once, found again in the next window");
        let again: Vec<Frame> = names_of(&mut s, &addrs);
        assert_eq!(first, again, "the same names");

        let (frames, _) = s.names_cached();
        assert!(frames >= 2, "{frames} distinct frames");
        s.set_max_frames(1);
        s.end_window();
        assert_eq!(s.names_cached(), (0, 0), "past the bound every kept name goes");
        assert_eq!(s.cache.evicted, 64, "and each is counted");
        s.name(&addrs, &[]);
        assert_eq!(s.cache.native_named, 128, "named anew after the eviction");
        let renamed: Vec<Frame> = names_of(&mut s, &addrs);
        assert_eq!(first, renamed);
    }

    #[test]
    fn a_changed_mapping_drops_the_names_kept_in_it() {
        let mut s = Symbolizer::new(std::process::id() as i32).unwrap();
        let addrs = own_code_addresses();
        s.name(&addrs, &[]);
        s.end_window();
        // The same maps, but the mapping holding the first address now maps another offset.
        let mut moved = s.maps.clone();
        let m = moved.iter_mut().find(|m| m.contains(addrs[0])).unwrap();
        m.offset += 0x1000;
        s.forget_changed(&moved);
        assert!(s.cache.evicted >= 1, "the names in the changed mapping went");
        assert!(!s.named.contains_key(&(Space::User, addrs[0])));
    }
}
