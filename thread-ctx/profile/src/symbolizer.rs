//! Names the addresses of one process's stacks: native frames from the ELF
//! symbols of the mapped objects (through [`NativeSymbols`], which symbolizers
//! of many processes share: each object is opened and parsed once, and each
//! (object, file offset) named once), JS frames from V8's jitdump
//! (`--perf-prof`: down to the line) or else its perf map
//! (`--perf-basic-prof*`: the function), kernel frames from kallsyms.
//!
//! Names are given per window: an address is named once per window (JIT code
//! moves, so a name is not kept past the window it was found in), and the
//! window's frames are handed to its profile ([`Symbolizer::take_frames`]).
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
    /// This window's names: (space, lookup address) -> index in `frames`.
    named: HashMap<(Space, u64), usize>,
    frames: Vec<Frame>,
    frame_ids: HashMap<Frame, usize>,
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
    /// This window's JS frames: key -> indexes in `frames`, innermost first.
    js_named: HashMap<JsKey, Vec<usize>>,
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
            frames: Vec::new(),
            frame_ids: HashMap::new(),
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
            for (addr, frame) in kernel.into_iter().zip(frames) {
                let i = self.intern(frame);
                self.named.insert((Space::Kernel, addr), i);
            }
        }
    }

    /// Names JS frames not named yet in this window.
    pub fn name_js(&mut self, keys: &[JsKey]) {
        let mut seen = HashSet::new();
        let new: Vec<JsKey> = keys.iter().filter(|k| !self.js_named.contains_key(k) && seen.insert(**k)).copied().collect();
        let named = match self.js.as_mut() {
            Some(js) if !new.is_empty() => js.name_batch(&new, &self.maps),
            _ => Vec::new(),
        };
        let mut named = named.into_iter();
        for key in new {
            let indexes = self.js_indexes_of(&key, named.next().unwrap_or(Err(NOT_NAMED_BY_HEAP)));
            self.js_named.insert(key, indexes);
        }
    }

    /// Why the heap did not name the JS frame `key` this window (None: it did, or it was not named yet).
    pub fn why_unnamed(&self, key: &JsKey) -> Option<&'static str> {
        self.js_why.get(key).copied()
    }

    /// The indexes in this window's frames of a JS frame (innermost first), naming it now if it was not yet.
    pub fn js_frame_indexes(&mut self, key: &JsKey) -> &[usize] {
        if !self.js_named.contains_key(key) {
            let indexes = self.js_indexes(key);
            self.js_named.insert(*key, indexes);
        }
        &self.js_named[key]
    }

    fn js_indexes(&mut self, key: &JsKey) -> Vec<usize> {
        let named = match self.js.as_mut() {
            Some(js) => js.name(key, &self.maps),
            None => Err(NOT_NAMED_BY_HEAP),
        };
        self.js_indexes_of(key, named)
    }

    /// The indexes of `key`'s frames as the heap named them, or of its pc's name (`named` Err:
    /// why the heap did not, kept for [`Symbolizer::why_unnamed`]).
    fn js_indexes_of(&mut self, key: &JsKey, named: std::result::Result<JsNamed, &'static str>) -> Vec<usize> {
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

    fn unnamed(&self, space: Space, addrs: &[u64]) -> Vec<u64> {
        let mut v: Vec<u64> = addrs.iter().copied().filter(|a| !self.named.contains_key(&(space, *a))).collect();
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

    /// This window's frames (indexed as [`Symbolizer::frame_index`] said); the next window names anew.
    pub fn take_frames(&mut self) -> Vec<Frame> {
        self.perf_map.next_window();
        self.named.clear();
        self.js_named.clear();
        self.js_why.clear();
        if let Some(js) = self.js.as_mut() {
            js.next_batch();
        }
        self.frame_ids.clear();
        self.source_maps.new_window();
        std::mem::take(&mut self.frames)
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
