//! ELF and kernel symbols shared by the symbolizers of every process: an
//! object that many processes map (every Node service maps the same `node`,
//! ~100 MB with ~5 MB of symbol tables) is opened and parsed once, not once
//! per process.
//!
//! An object is one file as the kernel sees it: device, inode, size and
//! modification time (a binary rewritten in place is another object). We hold
//! it open ourselves, found through `/proc/PID/map_files` (which reaches
//! deleted files and other mount namespaces), and hand blazesym its
//! `/proc/self/fd/N` path: its file cache then keys the parsed symbols by that
//! file, however many processes map it, and blazesym never reads a target's
//! /proc itself. Names are cached per function found (object, file offsets of
//! its start and end): any address inside a function already named is named
//! without a lookup, so the cache grows with the functions sampled (a few
//! thousand in a busy `node`), not with every distinct return address in them
//! (which keep appearing for as long as V8's compilers run). An object is
//! closed and its symbols dropped once no process that maps it is tracked.

use super::frame::Frame;
use super::symbol_pages::{drop_resident_pages, MappedFile};
use blazesym::symbolize::source::{Elf, Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer as Blaze};
use foldhash::{HashMap, HashMapExt, HashSet};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use thread_ctx_discovery::maps::Mapping;
use thread_ctx_discovery::target_file;

/// Functions kept (~150 bytes each with their names: 7 MiB at most); past this the cache starts
/// over. The soak benchmark's services sample ~3,000 distinct functions of `node` (docs/benchmarks.md).
const MAX_CACHED_FUNCTIONS: usize = 50_000;
/// Objects held open at once; past this, objects of new processes stay unnamed
/// (a bound on file descriptors on a host with churn).
const MAX_OBJECTS: usize = 2048;

/// A function of an object, as file offsets: `start..end` (blazesym's symbol at `start`).
struct Function {
    start: u64,
    end: u64,
    name: Option<String>,
}

impl Function {
    /// The function blazesym found for file offset `offset`. A symbol without a size names
    /// this offset only: blazesym stretches it to the next symbol, which only it knows.
    fn found(offset: u64, sym: Option<blazesym::symbolize::Sym<'_>>) -> Function {
        let Some(sym) = sym else { return Function::unnamed(offset) };
        let start = offset.saturating_sub(sym.offset as u64);
        let end = sym.size.map_or(offset + 1, |size| start.saturating_add(size as u64));
        let (start, end) = if start <= offset && offset < end { (start, end) } else { (offset, offset + 1) };
        Function { start, end, name: Some(sym.name.into_owned()) }
    }

    fn unnamed(offset: u64) -> Function {
        Function { start: offset, end: offset + 1, name: None }
    }

    /// Heap bytes of its name (what `NativeSymbols::name_bytes` adds up).
    fn name_bytes(&self) -> usize {
        self.name.as_ref().map_or(0, String::capacity)
    }
}

/// One object: a file as the kernel identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileIdentity {
    dev: u64,
    inode: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileIdentity {
    fn of(meta: &std::fs::Metadata) -> FileIdentity {
        FileIdentity {
            dev: meta.dev(),
            inode: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
        }
    }
}

/// Which object a mapping is, for [`NativeSymbols::names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId(u64);

struct Object {
    /// Held open so the object stays readable after the process unmaps or deletes it.
    _file: File,
    /// `/proc/self/fd/N` of `_file`: what blazesym opens and caches by.
    path: PathBuf,
    id: ObjectId,
    /// Processes whose symbolizers use it.
    users: HashSet<i32>,
}

pub struct NativeSymbols {
    blaze: Blaze,
    objects: HashMap<FileIdentity, Object>,
    /// Functions found, by (object, file offset of their start); an offset with no symbol, or a
    /// symbol of unknown size, is kept as a function one byte long.
    functions: BTreeMap<(ObjectId, u64), Function>,
    next_id: u64,
    /// Heap bytes of the names held in `functions` (their text).
    name_bytes: usize,
    /// Names dropped from the cache (it starts over past its bound).
    pub names_evicted: u64,
}

impl Default for NativeSymbols {
    fn default() -> Self {
        Self::new()
    }
}

impl NativeSymbols {
    pub fn new() -> NativeSymbols {
        NativeSymbols { blaze: Blaze::new(), objects: HashMap::new(), functions: BTreeMap::new(), next_id: 0, name_bytes: 0, names_evicted: 0 }
    }

    /// Objects held open now.
    pub fn objects_open(&self) -> usize {
        self.objects.len()
    }

    /// Gives back the resident pages of every open object's symbol tables (after a window: see
    /// [`super::symbol_pages`]); the bytes advised.
    pub fn drop_resident_pages(&self) -> u64 {
        let files: Vec<MappedFile> = self.objects.keys().map(|f| MappedFile { dev: f.dev, inode: f.inode, size: f.size }).collect();
        drop_resident_pages(&files)
    }

    /// Functions cached now, and the bytes of their names.
    pub fn functions_cached(&self) -> (usize, usize) {
        (self.functions.len(), self.name_bytes)
    }

    /// The cached function of object `id` that holds file offset `offset`.
    fn cached(&self, id: ObjectId, offset: u64) -> Option<&Function> {
        let ((object, _), f) = self.functions.range(..=(id, offset)).next_back()?;
        (*object == id && offset < f.end).then_some(f)
    }

    /// The object behind file mapping `m` of process `pid`, opened on first
    /// use by any process; None when it cannot be opened (gone, no
    /// permission, not a regular file).
    pub fn object(&mut self, pid: i32, m: &Mapping) -> Option<ObjectId> {
        if !m.is_file_backed() {
            return None;
        }
        // map_files reaches deleted files and other mount namespaces; the path is the fallback.
        // Opened as a file the target controls: non-blocking, regular files only.
        let via_map_files = PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end));
        let via_root = PathBuf::from(format!("/proc/{pid}/root{}", m.path()));
        let file = [via_map_files, via_root].into_iter().find_map(|p| target_file::open(pid, &p).ok())?;
        let meta = file.metadata().ok()?;
        if meta.ino() != m.inode {
            return None; // not the file the process maps (replaced since)
        }
        let identity = FileIdentity::of(&meta);
        if let Some(o) = self.objects.get_mut(&identity) {
            o.users.insert(pid);
            return Some(o.id);
        }
        if self.objects.len() >= MAX_OBJECTS {
            return None;
        }
        let id = ObjectId(self.next_id);
        self.next_id += 1;
        let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        self.objects.insert(identity, Object { _file: file, path, id, users: [pid].into_iter().collect() });
        Some(id)
    }

    /// ELF symbol names at `offsets` (file offsets) of object `id`, None where there is none.
    pub fn names(&mut self, id: ObjectId, offsets: &[u64]) -> Vec<Option<String>> {
        if self.functions.len() > MAX_CACHED_FUNCTIONS {
            self.names_evicted += self.functions.len() as u64;
            self.functions.clear();
            self.name_bytes = 0;
        }
        let missing: Vec<u64> = {
            let mut m: Vec<u64> = offsets.iter().copied().filter(|&o| self.cached(id, o).is_none()).collect();
            m.sort_unstable();
            m.dedup();
            m
        };
        if !missing.is_empty() {
            let resolved: Vec<Function> = match self.objects.values().find(|o| o.id == id) {
                Some(o) => {
                    let mut elf = Elf::new(&o.path);
                    elf.debug_syms = false;
                    match self.blaze.symbolize(&Source::Elf(elf), Input::FileOffset(&missing)) {
                        Ok(v) => missing.iter().zip(v).map(|(&offset, s)| Function::found(offset, s.into_sym())).collect(),
                        Err(_) => missing.iter().map(|&o| Function::unnamed(o)).collect(),
                    }
                }
                None => missing.iter().map(|&o| Function::unnamed(o)).collect(),
            };
            for f in resolved {
                self.name_bytes += f.name_bytes();
                if let Some(old) = self.functions.insert((id, f.start), f) {
                    self.name_bytes -= old.name_bytes();
                }
            }
        }
        offsets.iter().map(|&o| self.cached(id, o).and_then(|f| f.name.clone())).collect()
    }

    /// Kernel frames for `addrs` (kallsyms, parsed once).
    pub fn kernel_frames(&mut self, addrs: &[u64]) -> Vec<Frame> {
        let src = Source::Kernel(Kernel::default());
        let names: Vec<Option<String>> = match self.blaze.symbolize(&src, Input::AbsAddr(addrs)) {
            Ok(v) => v
                .into_iter()
                .map(|s| match s {
                    Symbolized::Sym(s) => Some(s.name.into_owned()),
                    Symbolized::Unknown(_) => None,
                })
                .collect(),
            Err(_) => vec![None; addrs.len()],
        };
        names.iter().map(|name| Frame::kernel(name.as_deref().unwrap_or("[kernel]"))).collect()
    }

    /// Process `pid` is no longer symbolized: objects no other process uses are closed.
    pub fn release(&mut self, pid: i32) {
        let mut unused = Vec::new();
        for (identity, o) in self.objects.iter_mut() {
            if o.users.remove(&pid) && o.users.is_empty() {
                unused.push(identity.clone());
            }
        }
        for identity in unused {
            if let Some(o) = self.objects.remove(&identity) {
                let _ = self.blaze.evict(&blazesym::symbolize::evict::Elf::new(&o.path).into());
                let mut freed = 0;
                self.functions.retain(|(id, _), f| {
                    let keep = *id != o.id;
                    if !keep {
                        freed += f.name_bytes();
                    }
                    keep
                });
                self.name_bytes -= freed;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};
    use thread_ctx_discovery::maps::read_maps;

    fn text_mapping(pid: i32) -> Mapping {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        // The child may still be exec'ing: wait until its maps show the new program.
        for _ in 0..200 {
            if let Some(m) = read_maps(pid).unwrap().into_iter().find(|m| m.path() == exe.to_str().unwrap() && m.perms.contains('x')) {
                return m;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("no text mapping of {} in process {pid}", exe.display());
    }

    struct Sleeper(Child);
    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn an_object_mapped_by_two_processes_is_opened_once_and_closed_with_its_last_user() {
        let a = Sleeper(Command::new("sleep").arg("30").spawn().unwrap());
        let b = Sleeper(Command::new("sleep").arg("30").spawn().unwrap());
        let (pa, pb) = (a.0.id() as i32, b.0.id() as i32);
        let (ma, mb) = (text_mapping(pa), text_mapping(pb));
        let mut n = NativeSymbols::new();
        let ia = n.object(pa, &ma).expect("sleep's text opens");
        let ib = n.object(pb, &mb).expect("sleep's text opens");
        assert_eq!(ia, ib, "the same file in two processes is one object");
        assert_eq!(n.objects_open(), 1);
        n.release(pa);
        assert_eq!(n.objects_open(), 1, "still used by the other process");
        n.release(pb);
        assert_eq!(n.objects_open(), 0);
    }

    #[test]
    fn names_come_from_the_objects_symbols() {
        let me = std::process::id() as i32;
        let text = text_mapping(me);
        let mut n = NativeSymbols::new();
        let id = n.object(me, &text).unwrap();
        // This very function is in the object: its file offset has its name.
        let addr = names_come_from_the_objects_symbols as fn() as usize as u64;
        let names = n.names(id, &[addr - text.start + text.offset]);
        assert!(names[0].as_deref().is_some_and(|s| s.contains("names_come_from_the_objects_symbols")), "{names:?}");
    }

    #[test]
    fn an_address_inside_a_function_already_named_is_named_from_the_cache_as_blazesym_would() {
        let me = std::process::id() as i32;
        let text = text_mapping(me);
        let mut n = NativeSymbols::new();
        let id = n.object(me, &text).unwrap();
        let entry = an_address_inside_a_function_already_named_is_named_from_the_cache_as_blazesym_would as fn() as usize as u64;
        let at = entry - text.start + text.offset;
        let first = n.names(id, &[at]);
        assert!(first[0].as_deref().is_some_and(|s| s.contains("named_from_the_cache")), "{first:?}");
        assert_eq!(n.functions_cached().0, 1);
        let inside = n.names(id, &[at + 1, at + 7]);
        assert_eq!(n.functions_cached().0, 1, "no second entry: the function's range answered");
        assert_eq!(inside, vec![first[0].clone(); 2]);
        let mut fresh = NativeSymbols::new();
        let fresh_id = fresh.object(me, &text).unwrap();
        assert_eq!(fresh.names(fresh_id, &[at + 7]), vec![first[0].clone()], "what a lookup of its own gives");
    }
}
