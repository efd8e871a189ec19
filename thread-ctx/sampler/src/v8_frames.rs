//! Which node processes get their JS frames read, and what the BPF walk and
//! the namer need of each: the V8 layout of the mapped object holding V8 (the
//! `node` executable, or a `libnode.so`), read from its `v8dbg_*` symbols and
//! checked by thread-ctx-v8 once per object (by build id), and where the
//! process runs that object's embedded builtins (node's text, and the copy V8
//! may map next to its generated code), which tells interpreted frames from
//! generated code.
//!
//! A process whose object has no symbols, or a layout that fails its check, is
//! sampled as before (its user stack by `bpf_get_stack`, its JS frames named
//! from V8's perf map and jitdump); the reason is kept, to be said once.

use super::alloc_probe::site::{v8_objects, ObjectKey};
use std::collections::HashMap;
use std::sync::Arc;
use thread_ctx_discovery::build_id::build_id;
use thread_ctx_discovery::maps::{read_maps, Mapping};
use thread_ctx_v8::symbols::{BytecodeSizes, VaddrRange};
use thread_ctx_v8::{Layout, LayoutError, PcRegion, PostmortemSymbols};

use super::bpf_sampler::{ExitFrameWalk, V8Walk};

/// Objects remembered; past this the cache starts over (bounded memory on a host with churn).
const MAX_CACHED: usize = 64;
/// Largest object read for its symbols (node is ~100 MB).
const MAX_OBJECT_BYTES: u64 = 1 << 30;

/// What one object holding V8 says about it.
#[derive(Debug)]
pub struct V8Object {
    pub layout: Layout,
    pub bytecode_sizes: Option<BytecodeSizes>,
    /// Link-time addresses of every embedded builtin, and of the bytecode handlers among them.
    pub builtins: VaddrRange,
    pub handlers: Option<VaddrRange>,
    /// Where each thread keeps its isolate, from its thread pointer (the object is the executable).
    pub current_isolate_tp_offset: Option<i64>,
    /// (file offset, link-time address, bytes) of its loadable segments.
    segments: Vec<(u64, u64, u64)>,
}

/// One process's V8: its object's layout and where it runs the object's builtins.
#[derive(Debug, Clone)]
pub struct V8Process {
    pub object: Arc<V8Object>,
    /// The object's path as the process maps it.
    pub path: String,
    /// Runtime ranges of the embedded builtins, and of the bytecode handlers (up to two each).
    pub builtins: Vec<(u64, u64)>,
    pub handlers: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum V8FramesError {
    #[error("process {pid}: {reason}")]
    Process { pid: u32, reason: String },
    #[error("process {pid} maps no node executable or libnode")]
    NoV8 { pid: u32 },
    /// The object's symbols are missing or disagree with every layout this reader knows.
    #[error("process {pid}: {reason}")]
    Layout { pid: u32, reason: String },
}

/// Layouts by object, and why objects have none (asked once, said once).
#[derive(Default)]
pub struct V8Sites {
    by_object: HashMap<ObjectKey, Result<Arc<V8Object>, ObjectError>>,
}

/// Why an object's JS frames cannot be read.
#[derive(Debug, Clone)]
enum ObjectError {
    /// Nothing in it says V8: no `v8dbg_*` or `Builtins_*` symbols, and not named node or
    /// libnode (a process publishing thread contexts from another runtime).
    NotV8,
    /// A node without the symbols, or a layout that fails its check: said once, then the
    /// perf map and jitdump name its JS frames.
    Unusable(String),
}

impl V8Sites {
    pub fn new() -> Self {
        Self::default()
    }

    /// The V8 of process `pid`, when its frames can be read.
    pub fn process(&mut self, pid: u32) -> Result<V8Process, V8FramesError> {
        let maps = read_maps(pid as i32).map_err(|e| V8FramesError::Process { pid, reason: e.to_string() })?;
        let exe =
            std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| V8FramesError::Process { pid, reason: format!("/proc/{pid}/exe: {e}") })?;
        let exe = exe.to_string_lossy();
        let exe = exe.strip_suffix(" (deleted)").unwrap_or(&exe);
        let candidates = v8_objects(&maps, exe);
        let Some(m) = candidates.first() else { return Err(V8FramesError::NoV8 { pid }) };
        let key = match build_id(pid as i32, m) {
            Some(id) => ObjectKey::BuildId(id),
            None => ObjectKey::File { dev: m.dev.clone(), inode: m.inode },
        };
        if self.by_object.len() >= MAX_CACHED && !self.by_object.contains_key(&key) {
            self.by_object.clear();
        }
        // map_files reaches deleted files and other mount namespaces, but needs CAP_SYS_ADMIN or
        // CAP_CHECKPOINT_RESTORE: the path through the process's root is the fallback.
        let via_map_files = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
        let via_root = format!("/proc/{pid}/root{}", m.path());
        let read_path = if std::fs::File::open(&via_map_files).is_ok() { via_map_files } else { via_root };
        let object = self.by_object.entry(key).or_insert_with(|| read_object(&read_path, m.path())).clone();
        let object = object.map_err(|e| match e {
            ObjectError::NotV8 => V8FramesError::NoV8 { pid },
            ObjectError::Unusable(reason) => V8FramesError::Layout { pid, reason },
        })?;
        let same_file: Vec<&Mapping> = maps.iter().filter(|x| x.perms.contains('x') && x.dev == m.dev && x.inode == m.inode).collect();
        let builtins = runtime_ranges(&object, &same_file, object.builtins);
        let handlers = object.handlers.map(|h| runtime_ranges(&object, &same_file, h)).unwrap_or_default();
        Ok(V8Process { object, path: m.path().to_string(), builtins, handlers })
    }
}

/// Reads the object at `path` (`display` in messages) and checks its layout.
fn read_object(path: &str, display: &str) -> Result<Arc<V8Object>, ObjectError> {
    let unusable = |reason: String| ObjectError::Unusable(reason);
    let file = std::fs::File::open(path).map_err(|e| unusable(format!("{display}: {e}")))?;
    let meta = file.metadata().map_err(|e| unusable(format!("{display}: {e}")))?;
    if !meta.is_file() || meta.len() > MAX_OBJECT_BYTES {
        return Err(unusable(format!("{display}: not a regular file of at most {MAX_OBJECT_BYTES} bytes")));
    }
    // SAFETY: a read-only private mapping of a regular file; it may change under us (a
    // replaced binary), which the ELF reader sees as bytes, never as memory unsafety of ours
    // beyond a SIGBUS on truncation, which node's loader would hit first.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| unusable(format!("{display}: {e}")))?;
    let symbols = PostmortemSymbols::read(&map[..], display).map_err(|e| unusable(format!("{display}: not a readable ELF object ({e})")))?;
    let layout = match Layout::checked(&symbols) {
        Ok(layout) => layout,
        Err(LayoutError::NoSymbols { .. }) if symbols.builtins.is_none() && !named_like_node(display) => return Err(ObjectError::NotV8),
        Err(e) => return Err(unusable(e.to_string())),
    };
    let slots = [layout.fp_context, layout.fp_function, layout.fp_bytecode_array, layout.fp_bytecode_offset];
    if slots != V8Walk::FRAME_SLOTS {
        return Err(unusable(format!(
            "{display}: {} keeps JS frame slots at {slots:?}, the sampler reads {:?}",
            layout.version,
            V8Walk::FRAME_SLOTS
        )));
    }
    let builtins =
        symbols.builtins.ok_or_else(|| unusable(format!("{display}: no Builtins_* symbols: cannot tell interpreted frames from builtins")))?;
    Ok(Arc::new(V8Object {
        layout,
        bytecode_sizes: symbols.bytecode_sizes,
        builtins,
        handlers: symbols.bytecode_handlers,
        current_isolate_tp_offset: symbols.current_isolate_tp_offset,
        segments: symbols.segments,
    }))
}

/// A file named `node*` or `libnode.so*`: a node whose symbols were stripped is still node.
fn named_like_node(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|base| base.starts_with("node") || base.starts_with("libnode.so"))
}

/// Where the process runs `range` (link-time addresses of the object): each executable
/// mapping of the object covering part of it, at most two (node's text and V8's copy).
fn runtime_ranges(object: &V8Object, maps: &[&Mapping], range: VaddrRange) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for m in maps {
        let Some(v0) = object.vaddr_of_offset(m.offset) else { continue };
        let v1 = v0 + (m.end - m.start);
        let (lo, hi) = (v0.max(range.start), v1.min(range.end));
        if lo < hi && out.len() < 2 {
            out.push((m.start + (lo - v0), m.start + (hi - v0)));
        }
    }
    out
}

impl V8Object {
    fn vaddr_of_offset(&self, offset: u64) -> Option<u64> {
        self.segments.iter().find(|(o, _, n)| offset >= *o && offset - o < *n).map(|(o, v, _)| v + (offset - o))
    }
}

impl V8Process {
    /// What the BPF walk of this process needs.
    pub fn walk(&self) -> V8Walk {
        let mut builtins = [(0, 0); 2];
        for (i, r) in self.builtins.iter().take(2).enumerate() {
            builtins[i] = *r;
        }
        let layout = &self.object.layout;
        let exit = match (self.object.current_isolate_tp_offset, layout.isolate) {
            (Some(isolate_tp_offset), Some(isolate)) => {
                Some(ExitFrameWalk { isolate_tp_offset, c_entry_fp: isolate.c_entry_fp, exit_frame_types: layout.frame_types.exit_mask() })
            }
            _ => None,
        };
        V8Walk { js_function_shared: layout.js_function_shared as u32, builtins, exit }
    }

    /// Where `pc` is, for naming: generated code (an anonymous executable mapping of `maps`),
    /// a bytecode handler, another builtin, or native code.
    pub fn region(&self, maps: &[Mapping], pc: u64) -> PcRegion {
        let inside = |ranges: &[(u64, u64)]| ranges.iter().any(|&(s, e)| s <= pc && pc < e);
        if inside(&self.handlers) {
            return PcRegion::BytecodeHandler;
        }
        if inside(&self.builtins) {
            return PcRegion::Builtin;
        }
        match maps.iter().find(|m| m.contains(pc)) {
            Some(m) if m.perms.contains('x') && !m.is_file_backed() && m.name.is_empty() => PcRegion::Jit { floor: m.start },
            _ => PcRegion::Native,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_without_v8_says_so() {
        let mut sites = V8Sites::new();
        assert!(matches!(sites.process(std::process::id()), Err(V8FramesError::NoV8 { .. })));
    }

    #[test]
    fn a_stripped_node_is_still_node() {
        assert!(named_like_node("/usr/bin/node") && named_like_node("/opt/lib/libnode.so.127") && named_like_node("nodejs"));
        assert!(!named_like_node("/usr/bin/python3") && !named_like_node("/opt/node/bin/writer"));
    }
}
