//! Source maps: a JS frame whose script ends with `//# sourceMappingURL=`
//! (a file next to it, or an inline `data:` URL) is renamed to the original
//! source and line (`heavy.ts:9`), the generated position kept beside it.
//!
//! Scripts and maps are files of the target, read from its mount namespace
//! (`/proc/PID/root/...`, see [`thread_ctx_discovery::target_file`]: opened with the
//! target's file-system credentials, resolved inside the target's root, no final
//! symlink, regular files only) and bounded: the
//! reference is looked for in the script's last [`TAIL_BYTES`] (an inline map
//! may take up to [`MAX_MAP_BYTES`] more), a map larger than [`MAX_MAP_BYTES`]
//! is not read, and one that does not parse is a note, never an error. Unlike
//! the perf map, a script or map of any owner is read, if the target's user may
//! read it: a map the target names but may not read (a root-only file) is
//! refused, its frames keep their generated names, and the first refusal is said
//! once per process ([`SourceMaps::notes_once`]).
//!
//! Each script is looked at once per file identity (device, inode, size,
//! modification time), and each distinct map is parsed once for the whole
//! program however many scripts or processes name it, within parsed-size
//! budgets per process and in all ([`crate::source_map_budget`]): a map past
//! them is not applied (its frames keep their generated positions, said once
//! per process), and a process that spent its [`MAP_TIME_SHARE`] of a window
//! loading maps loads no more until the next window, so that it cannot delay
//! the other processes' windows. Whether a script changed is checked once
//! per window (at its first frame), not once per frame: a window's JS
//! addresses from one script would each open it again.

use super::frame::{Frame, FrameKind, Generated, SourcePos};
use crate::source_map_budget::{self as budget, FileId, MapKey, MapStore, Share, MAP_TIME_SHARE, PROCESS_SHARE};
use crate::source_map_parse::{self as parse, ParseError};
use sourcemap::DecodedMap;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes at the end of a script searched for the `sourceMappingURL` comment.
pub const TAIL_BYTES: u64 = 64 << 10;
/// The largest map read (a file, or an inline URL's decoded JSON); tsc's map of a 1 MB bundle is ~0.5 MB.
pub const MAX_MAP_BYTES: u64 = 32 << 20;
/// Scripts remembered (with or without a map); past this the cache starts over.
pub const MAX_CACHED_SCRIPTS: usize = 16 << 10;
/// Notes kept about maps that could not be used.
const MAX_NOTES: usize = 8;

/// Why a script's source map is not used: its frames keep the generated positions.
#[derive(Debug, thiserror::Error)]
pub enum SourceMapError {
    #[error("{0}")]
    NotAMap(ParseError),
    /// Parsed, it would not fit what is left of the process's or the program's share.
    #[error("{}: {reason}", path.display())]
    OverShare { path: PathBuf, reason: String },
    #[error("an inline map without a comma")]
    InlineWithoutComma,
    #[error("an inline map of type {0:?}")]
    InlineType(String),
    #[error("inline map: {0}")]
    InlineBase64(data_encoding::DecodeError),
    #[error("an inline map longer than {} MiB", MAX_MAP_BYTES >> 20)]
    InlineTooLong,
    #[error("an inline map of {bytes} bytes, more than the {} MiB read", MAX_MAP_BYTES >> 20)]
    InlineTooLarge { bytes: usize },
    #[error("{} has {size} bytes, more than the {} MiB read", path.display(), MAX_MAP_BYTES >> 20)]
    FileTooLarge { path: PathBuf, size: u64 },
    #[error("reading {}: {cause}", path.display())]
    Read { path: PathBuf, cause: std::io::Error },
}

impl SourceMapError {
    /// The target's own user may not read the file: the reader does not read it for it.
    fn refused(&self) -> bool {
        matches!(self, SourceMapError::Read { cause, .. } if cause.kind() == std::io::ErrorKind::PermissionDenied)
    }
}

/// One script's map, parsed.
pub struct ScriptMap {
    /// The parse, shared by every script (of any process) naming the same file.
    map: Arc<DecodedMap>,
    /// Which map it is (None: parsed outside any store).
    key: Option<MapKey>,
    /// Where relative source names resolve from: the map's directory.
    base: Option<PathBuf>,
}

impl ScriptMap {
    /// Parses map JSON, whatever its size; `base` is the directory relative sources resolve against.
    pub fn parse(json: &[u8], base: Option<PathBuf>) -> Result<ScriptMap, SourceMapError> {
        let parsed = parse::parse(json, u64::MAX).map_err(SourceMapError::NotAMap)?;
        Ok(ScriptMap { map: Arc::new(parsed.map), key: None, base })
    }

    /// The original source and position of 1-based generated `line`:`column` (column 1 when unknown).
    pub fn original(&self, line: u32, column: Option<u32>) -> Option<(String, SourcePos)> {
        let token = self.map.lookup_token(line.checked_sub(1)?, column.unwrap_or(1).saturating_sub(1))?;
        let source = token.get_source()?;
        let pos = SourcePos { line: token.get_src_line().checked_add(1)?, column: token.get_src_col().checked_add(1) };
        Some((self.source_name(source), pos))
    }

    /// A source as the map names it, made absolute against the map's directory when relative.
    fn source_name(&self, source: &str) -> String {
        if let Some(path) = source.strip_prefix("file://") {
            return percent_decoded(path);
        }
        let has_scheme =
            source.split_once(':').is_some_and(|(s, _)| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)));
        match &self.base {
            Some(base) if !has_scheme && !source.starts_with('/') => normalized(&base.join(source)).display().to_string(),
            _ => source.to_string(),
        }
    }
}

/// `a/./b/../c` as `a/c`, without touching the file system (the path is the target's, not ours).
fn normalized(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn percent_decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// A script name V8 reports as a path in the target's file system (None: `node:` internals, evals, URLs).
pub fn script_path(script: &str) -> Option<PathBuf> {
    let path = match script.strip_prefix("file://") {
        Some(p) => percent_decoded(p),
        None => script.to_string(),
    };
    path.starts_with('/').then(|| PathBuf::from(path))
}

/// What a script's tail says about its map.
#[derive(Debug, PartialEq, Eq)]
enum Reference {
    /// A map file (a path in the target's file system).
    File(PathBuf),
    /// An inline map: its decoded JSON.
    Inline(Vec<u8>),
}

/// The last `sourceMappingURL` comment of a script's tail, resolved against the script's directory.
fn reference(tail: &[u8], script: &Path) -> Result<Option<Reference>, SourceMapError> {
    let text = String::from_utf8_lossy(tail);
    let Some(url) =
        text.lines().rev().map(str::trim).find_map(|l| l.strip_prefix("//# sourceMappingURL=").or_else(|| l.strip_prefix("//@ sourceMappingURL=")))
    else {
        return Ok(None);
    };
    let url = url.trim();
    if let Some(data) = url.strip_prefix("data:") {
        let (header, payload) = data.split_once(',').ok_or(SourceMapError::InlineWithoutComma)?;
        if !header.starts_with("application/json") {
            return Err(SourceMapError::InlineType(header.to_string()));
        }
        let json = if header.ends_with(";base64") {
            let payload = payload.trim_end_matches('=').as_bytes();
            data_encoding::BASE64_NOPAD.decode(payload).map_err(SourceMapError::InlineBase64)?
        } else {
            percent_encoding::percent_decode_str(payload).collect()
        };
        return Ok(Some(Reference::Inline(json)));
    }
    if let Some(path) = url.strip_prefix("file://") {
        return Ok(Some(Reference::File(PathBuf::from(percent_decoded(path)))));
    }
    if url.contains("://") {
        return Ok(None); // served over the network: not ours to fetch
    }
    let dir = script.parent().unwrap_or(Path::new("/"));
    Ok(Some(Reference::File(normalized(&dir.join(percent_decoded(url))))))
}

/// Windows a script's look (its file opened, its map found or not) holds before it is looked at
/// again: opening every script of every process each window cost the agent more than naming
/// its frames (docs/benchmarks.md), and a rewritten script is seen within a minute of 10 s windows.
pub const LOOK_AGAIN_WINDOWS: u64 = 6;

/// The maps of one process's scripts, read on first use.
pub struct SourceMaps {
    /// By script path: the script file looked at, and its map (None: no map, or an unusable one).
    by_script: HashMap<PathBuf, (FileId, Option<Arc<ScriptMap>>)>,
    /// What each script looked at gave (None: no usable map, or no script), and the window it
    /// was looked at in: kept [`LOOK_AGAIN_WINDOWS`] windows, not opened again meanwhile.
    this_window: HashMap<PathBuf, (Option<Arc<ScriptMap>>, u64)>,
    /// Windows ended so far.
    window: u64,
    /// Parses shared with every other process, and the program's budget.
    store: &'static Mutex<MapStore<DecodedMap>>,
    /// This process's part of it.
    share: Share,
    /// Time spent loading maps in this window, and whether loading was cut off at the share.
    window_spent: Duration,
    window_cut: bool,
    /// What to tell the agent's log once about this process (a map over its share, a window past its time).
    once: std::cell::RefCell<Vec<String>>,
    said_over_share: bool,
    said_past_time: bool,
    /// Whether a map the target's user may not read was said (once per process).
    said_refused: bool,
    /// Maps that could not be used, for the user.
    pub notes: Vec<String>,
    notes_left_out: usize,
}

impl Default for SourceMaps {
    fn default() -> Self {
        SourceMaps::with_store(budget::global(), PROCESS_SHARE)
    }
}

impl SourceMaps {
    /// A process's maps, parsed into `store` and bounded by `share` bytes of it.
    pub fn with_store(store: &'static Mutex<MapStore<DecodedMap>>, share: u64) -> SourceMaps {
        SourceMaps {
            by_script: HashMap::new(),
            this_window: HashMap::new(),
            window: 0,
            store,
            share: Share::new(share),
            window_spent: Duration::ZERO,
            window_cut: false,
            once: Default::default(),
            said_over_share: false,
            said_past_time: false,
            said_refused: false,
            notes: Vec::new(),
            notes_left_out: 0,
        }
    }

    /// The map of `script` in process `pid`'s file system, when it has one that parses.
    pub fn for_script(&mut self, pid: i32, script: &Path) -> Option<Arc<ScriptMap>> {
        if let Some((known, _)) = self.this_window.get(script) {
            return known.clone();
        }
        if self.this_window.len() >= MAX_CACHED_SCRIPTS {
            self.this_window.clear();
        }
        let map = self.look_at(pid, script);
        self.this_window.insert(script.to_path_buf(), (map.clone(), self.window));
        map
    }

    /// Scripts looked at [`LOOK_AGAIN_WINDOWS`] windows ago (all of them after a window whose
    /// map loading was cut off) are looked at again (a change to one seen) from the next frame
    /// on, and the process has its time share again.
    pub fn new_window(&mut self) {
        let (window, cut) = (self.window, self.window_cut);
        self.this_window.retain(|_, (_, looked)| !cut && window - *looked + 1 < LOOK_AGAIN_WINDOWS);
        self.window += 1;
        self.window_spent = Duration::ZERO;
        self.window_cut = false;
    }

    /// Map loading was cut off this window (its time share spent): frames named now may lack
    /// their source map, so they are not kept for later windows.
    pub fn cut_this_window(&self) -> bool {
        self.window_cut
    }

    /// Lines for the agent's log, each given once per process: a map past its share, a window
    /// in which map loading was cut off.
    pub fn notes_once(&self) -> Vec<String> {
        self.once.take()
    }

    /// Parsed map bytes this process's frames use.
    pub fn share_used(&self) -> u64 {
        self.share.limit() - self.share.left()
    }

    fn look_at(&mut self, pid: i32, script: &Path) -> Option<Arc<ScriptMap>> {
        let in_root = |p: &Path| PathBuf::from(format!("/proc/{pid}/root{}", p.display()));
        let file = match thread_ctx_discovery::target_file::open_any_owner(pid, &in_root(script)) {
            Ok(file) => file,
            Err(e) => {
                // A script the target runs but the reader may not open as it (no CAP_SETUID): said once.
                if e.kind() == std::io::ErrorKind::PermissionDenied && !std::mem::replace(&mut self.said_refused, true) {
                    let note = format!("script {}: {e}; its frames keep the generated positions", script.display());
                    let printable = thread_ctx_discovery::printable::printable(&note).into_owned();
                    self.once.borrow_mut().push(format!("process {pid}: {printable} (other refused files of this process are not logged)"));
                    self.note(note);
                }
                return None;
            }
        };
        let meta = file.metadata().ok()?;
        let id = FileId::of(&meta);
        match self.by_script.get(script) {
            Some((seen, map)) if *seen == id => return map.clone(),
            // Rewritten (a rebuild, a hot reload): its old map no longer counts against the share.
            Some(_) => self.forget(script),
            None => {}
        }
        if self.window_spent >= MAP_TIME_SHARE {
            // Not remembered: the script is looked at again in a later window.
            self.cut_off(pid);
            return None;
        }
        if self.by_script.len() >= MAX_CACHED_SCRIPTS {
            self.by_script.clear();
            self.share.clear();
        }
        let started = Instant::now();
        let read = self.read_map(pid, file, id, script, &in_root);
        self.window_spent += started.elapsed();
        let map = match read {
            Ok(map) => map,
            Err(why) => {
                let over = matches!(why, SourceMapError::OverShare { .. });
                let note = format!("source map of {}: {why}; its frames keep the generated positions", script.display());
                if over {
                    budget::count_over_share();
                    if !std::mem::replace(&mut self.said_over_share, true) {
                        self.once.borrow_mut().push(format!("process {pid}: {note} (said once per process)"));
                    }
                }
                if why.refused() && !std::mem::replace(&mut self.said_refused, true) {
                    let printable = thread_ctx_discovery::printable::printable(&note).into_owned();
                    self.once.borrow_mut().push(format!(
                        "process {pid}: {printable} (the process's user may not read it: not read for it; other refused maps of this process are not logged)"
                    ));
                }
                self.note(note);
                None
            }
        };
        self.by_script.insert(script.to_path_buf(), (id, map.clone()));
        map
    }

    /// Drops what `script` gave, and its map's charge unless another script of the process uses it.
    fn forget(&mut self, script: &Path) {
        let Some(key) = self.by_script.remove(script).and_then(|(_, map)| map?.key) else { return };
        if !self.by_script.values().any(|(_, m)| m.as_ref().is_some_and(|m| m.key == Some(key))) {
            self.share.uncharge(key);
        }
    }

    /// Map loading stops for this window: counted once per window, said once per process.
    fn cut_off(&mut self, pid: i32) {
        if std::mem::replace(&mut self.window_cut, true) {
            return;
        }
        budget::count_past_time_share();
        if !std::mem::replace(&mut self.said_past_time, true) {
            self.once.borrow_mut().push(format!(
                "process {pid}: loading its source maps took its {} ms share of a window: its other scripts' maps wait for a \
                 later window, their frames keep the generated positions until then (said once per process; the status \
                 line counts such windows)",
                MAP_TIME_SHARE.as_millis()
            ));
        }
    }

    fn read_map(
        &mut self,
        pid: i32,
        file: std::fs::File,
        script_id: FileId,
        script: &Path,
        in_root: &dyn Fn(&Path) -> PathBuf,
    ) -> Result<Option<Arc<ScriptMap>>, SourceMapError> {
        fn read(path: &Path) -> impl FnOnce(std::io::Error) -> SourceMapError {
            let path = path.to_path_buf();
            move |cause| SourceMapError::Read { path, cause }
        }
        let len = file.metadata().map_err(read(script))?.len();
        let (tail, skipped) = thread_ctx_discovery::target_file::read_tail(file, TAIL_BYTES).map_err(read(script))?;
        let mut found = reference(&tail, script)?;
        if found.is_none() && skipped > 0 && has_inline_start(&tail) {
            // The tail began inside a long inline map: read back as far as an inline map may reach.
            let file = thread_ctx_discovery::target_file::open_any_owner(pid, &in_root(script)).map_err(read(script))?;
            let (longer, _) =
                thread_ctx_discovery::target_file::read_tail(file, (MAX_MAP_BYTES / 3 * 4 + TAIL_BYTES).min(len)).map_err(read(script))?;
            found = reference(&longer, script)?;
            if found.is_none() {
                return Err(SourceMapError::InlineTooLong);
            }
        }
        match found {
            None => Ok(None),
            Some(Reference::Inline(json)) => {
                if json.len() as u64 > MAX_MAP_BYTES {
                    return Err(SourceMapError::InlineTooLarge { bytes: json.len() });
                }
                let base = script.parent().map(Path::to_path_buf);
                self.shared(MapKey::InlineIn(script_id), script, base, || Ok(json)).map(Some)
            }
            Some(Reference::File(path)) => {
                let map = thread_ctx_discovery::target_file::open_any_owner(pid, &in_root(&path)).map_err(read(&path))?;
                let meta = map.metadata().map_err(read(&path))?;
                if meta.len() > MAX_MAP_BYTES {
                    return Err(SourceMapError::FileTooLarge { path, size: meta.len() });
                }
                let base = path.parent().map(Path::to_path_buf);
                let load = || thread_ctx_discovery::target_file::read_tail(map, MAX_MAP_BYTES).map(|(json, _)| json).map_err(read(&path));
                self.shared(MapKey::File(FileId::of(&meta)), &path, base, load).map(Some)
            }
        }
    }

    /// The parse of `key`: one another script or process made, or made now from `load`'s JSON,
    /// when it fits what is left of this process's share and of the program's budget.
    fn shared(
        &mut self,
        key: MapKey,
        path: &Path,
        base: Option<PathBuf>,
        load: impl FnOnce() -> Result<Vec<u8>, SourceMapError>,
    ) -> Result<Arc<ScriptMap>, SourceMapError> {
        let over = |estimate: u64, process_left: u64, global_left: u64| SourceMapError::OverShare {
            path: path.to_path_buf(),
            reason: budget::over_share_reason(estimate, process_left, global_left),
        };
        let store = self.store;
        let global_left = {
            let store = store.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((map, bytes)) = store.get(&key) {
                if !self.share.charge(key, bytes) {
                    return Err(over(bytes, self.share.left(), store.left()));
                }
                return Ok(Arc::new(ScriptMap { map, key: Some(key), base }));
            }
            let global_left = store.left();
            // Refused (or freed) before: refused again unread while it still does not fit.
            if let Some(bytes) = store.known_bytes(&key).filter(|&b| b > self.share.left().min(global_left)) {
                return Err(over(bytes, self.share.left(), global_left));
            }
            global_left
        };
        // Parsed outside the lock; two workers (a stuck one and its replacement) may overlap by one map.
        let json = load()?;
        let parsed = match parse::parse(&json, self.share.left().min(global_left)) {
            Ok(parsed) => parsed,
            Err(ParseError::OverBudget { estimate, .. }) => {
                store.lock().unwrap_or_else(|e| e.into_inner()).refused(key, estimate);
                return Err(over(estimate, self.share.left(), global_left));
            }
            Err(e) => return Err(SourceMapError::NotAMap(e)),
        };
        drop(json);
        let map = Arc::new(parsed.map);
        store.lock().unwrap_or_else(|e| e.into_inner()).insert(key, &map, parsed.bytes);
        self.share.charge(key, parsed.bytes);
        Ok(Arc::new(ScriptMap { map, key: Some(key), base }))
    }

    fn note(&mut self, note: String) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push(thread_ctx_discovery::printable::printable(&note).into_owned());
        } else {
            self.notes_left_out += 1;
        }
    }

    /// Renames `frame` (a JS frame of process `pid`) to its original source when its script has a map.
    pub fn apply(&mut self, pid: i32, frame: &mut Frame) {
        if frame.kind != FrameKind::Js || frame.generated.is_some() {
            return;
        }
        let (Some(script), Some(line)) = (frame.file.as_deref().and_then(script_path), frame.line) else { return };
        let Some(map) = self.for_script(pid, &script) else { return };
        let Some((source, start)) = map.original(line, frame.column) else { return };
        // The sampled position, when it maps into the same source (a bundle's neighbour is not this function).
        let pos = frame.pos.and_then(|p| map.original(p.line, p.column)).filter(|(s, _)| *s == source).map(|(_, p)| p);
        let generated = Generated { file: frame.file.take().unwrap_or_default(), line: frame.line, column: frame.column, pos: frame.pos };
        frame.file = Some(source);
        frame.line = Some(start.line);
        frame.column = start.column;
        frame.pos = pos;
        frame.generated = Some(Box::new(generated));
    }

    /// Notes about maps that could not be used (and how many more were left out).
    pub fn all_notes(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        if self.notes_left_out > 0 {
            notes.push(format!("{} more source maps could not be used", self.notes_left_out));
        }
        notes
    }
}

/// The tail holds the start of no comment but looks like the middle of a base64 line.
fn has_inline_start(tail: &[u8]) -> bool {
    let last = tail.rsplit(|&b| b == b'\n').find(|l| !l.trim_ascii().is_empty()).unwrap_or(&[]);
    last.len() as u64 + 1 >= TAIL_BYTES / 2 && last.iter().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TSC_MAP: &str = r#"{"version":3,"file":"heavy.js","sourceRoot":"","sources":["../src/heavy.ts"],"names":[],"mappings":";;AAAA,SAAS,KAAK,CAAC,CAAS;IACtB,OAAO,CAAC,GAAG,CAAC,CAAC;AACf,CAAC"}"#;

    #[test]
    fn references_are_found_and_resolved_against_the_script() {
        let script = Path::new("/app/dist/heavy.js");
        assert_eq!(reference(b"x();\n//# sourceMappingURL=heavy.js.map\n", script).unwrap(), Some(Reference::File("/app/dist/heavy.js.map".into())));
        assert_eq!(reference(b"//# sourceMappingURL=../maps/h%20a.map", script).unwrap(), Some(Reference::File("/app/maps/h a.map".into())));
        assert_eq!(reference(b"//# sourceMappingURL=https://cdn/x.map", script).unwrap(), None, "not fetched");
        assert_eq!(reference(b"no comment here\n", script).unwrap(), None);
        let inline = format!("//# sourceMappingURL=data:application/json;charset=utf-8;base64,{}", data_encoding::BASE64.encode(TSC_MAP.as_bytes()));
        assert_eq!(reference(inline.as_bytes(), script).unwrap(), Some(Reference::Inline(TSC_MAP.as_bytes().to_vec())));
        assert!(reference(b"//# sourceMappingURL=data:text/plain,x", script).unwrap_err().to_string().contains("text/plain"));
        assert!(reference(b"//# sourceMappingURL=data:application/json;base64,@@@", script).is_err());
    }

    #[test]
    fn positions_map_to_the_original_source() {
        let map = ScriptMap::parse(TSC_MAP.as_bytes(), Some("/app/dist".into())).unwrap();
        // Generated line 3 is `function heavy(n) {` (tsc's two header lines first), line 4 its body.
        let (source, pos) = map.original(3, Some(15)).unwrap();
        assert_eq!((source.as_str(), pos.line), ("/app/src/heavy.ts", 1));
        assert_eq!(map.original(4, Some(5)).map(|(_, p)| p.line), Some(2));
        assert!(ScriptMap::parse(b"{\"version\":3,", None).is_err());
        assert!(ScriptMap::parse(b"[1,2,3]", None).is_err());
        assert_eq!(map.original(0, None), None, "line 0 does not exist");
    }

    #[test]
    fn garbage_maps_never_panic() {
        for json in [
            &br#"{"version":3,"sources":["a"],"mappings":"AAAA;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;,,,,,,,"}"#[..],
            br#"{"version":3,"sources":[],"mappings":"AAAA"}"#,
            br#"{"version":3,"sources":["a"],"mappings":"////////"}"#,
            br#"{"version":3,"sections":[]}"#,
        ] {
            if let Ok(m) = ScriptMap::parse(json, None) {
                for line in 0..5 {
                    let _ = m.original(line, Some(u32::MAX));
                    let _ = m.original(u32::MAX, None);
                }
            }
        }
    }

    /// Three scripts naming one map file, and one naming its own inline map, in `dir`.
    fn scripts(dir: &Path, map: &str) -> Vec<PathBuf> {
        std::fs::write(dir.join("shared.js.map"), map).unwrap();
        let mut out: Vec<PathBuf> = (0..3).map(|i| dir.join(format!("s{i}.js"))).collect();
        for s in &out {
            std::fs::write(s, "f();\n//# sourceMappingURL=shared.js.map\n").unwrap();
        }
        let inline = dir.join("inline.js");
        std::fs::write(
            &inline,
            format!("g();\n//# sourceMappingURL=data:application/json;base64,{}\n", data_encoding::BASE64.encode(map.as_bytes())),
        )
        .unwrap();
        out.push(inline);
        out
    }

    fn new_store(budget: u64) -> &'static Mutex<MapStore<DecodedMap>> {
        Box::leak(Box::new(Mutex::new(MapStore::new(budget))))
    }

    #[test]
    fn one_file_behind_many_scripts_is_one_parse_charged_once_and_freed_with_its_users() {
        let dir = tempfile::tempdir().unwrap();
        let paths = scripts(dir.path(), TSC_MAP);
        let pid = std::process::id() as i32;
        let store = new_store(u64::MAX);
        let mut maps = SourceMaps::with_store(store, u64::MAX);
        let got: Vec<Arc<ScriptMap>> = paths[..3].iter().map(|p| maps.for_script(pid, p).expect("the shared map")).collect();
        assert!(got.iter().all(|m| Arc::ptr_eq(&m.map, &got[0].map)), "one parse behind three scripts");
        let one = store.lock().unwrap().held();
        assert!(one > 0 && maps.share_used() == one, "charged once: {} of {one}", maps.share_used());
        let mut other = SourceMaps::with_store(store, u64::MAX);
        let theirs = other.for_script(pid, &paths[0]).unwrap();
        assert!(Arc::ptr_eq(&theirs.map, &got[0].map), "and one parse behind two processes");
        assert_eq!(store.lock().unwrap().held(), one, "counted once for the program");
        maps.for_script(pid, &paths[3]).expect("the inline map: a parse of its own");
        assert_eq!(store.lock().unwrap().held(), 2 * one);
        drop((got, theirs, maps));
        assert_eq!(store.lock().unwrap().held(), one, "the inline map went with its only process");
        drop(other);
        assert_eq!(store.lock().unwrap().held(), 0, "and the shared one with the last");
    }

    #[test]
    fn a_map_past_the_share_is_refused_said_once_and_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let paths = scripts(dir.path(), TSC_MAP);
        let pid = std::process::id() as i32;
        let need = parse::parse(TSC_MAP.as_bytes(), u64::MAX).unwrap().bytes;
        let store = new_store(u64::MAX);
        let mut maps = SourceMaps::with_store(store, need - 1);
        assert!(paths[..3].iter().all(|p| maps.for_script(pid, p).is_none()), "past the process's share");
        let once = maps.notes_once();
        assert_eq!(once.len(), 1, "{once:?}");
        assert!(once[0].contains("shared.js.map") && once[0].contains("this process's share"), "{}", once[0]);
        assert!(maps.notes_once().is_empty(), "said once");
        assert_eq!(
            store.lock().unwrap().known_bytes(&MapKey::File(FileId::of(&std::fs::metadata(dir.path().join("shared.js.map")).unwrap()))),
            Some(need)
        );
        // Garbage of the same size and time now: another process is refused by the size known, unread.
        let file = dir.path().join("shared.js.map");
        let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::write(&file, "x".repeat(TSC_MAP.len())).unwrap();
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(modified).unwrap();
        let mut other = SourceMaps::with_store(store, need - 1);
        assert!(other.for_script(pid, &paths[0]).is_none());
        assert!(other.notes_once()[0].contains("this process's share"), "refused by size, not parsed: {:?}", other.all_notes());
        let mut global_bound = SourceMaps::with_store(new_store(need - 1), u64::MAX);
        assert!(global_bound.for_script(pid, &paths[3]).is_none(), "past the program's budget");
        assert!(global_bound.notes_once()[0].contains("the program's share"));
    }

    #[test]
    fn a_rewritten_script_lets_go_of_its_old_map() {
        let dir = tempfile::tempdir().unwrap();
        let paths = scripts(dir.path(), TSC_MAP);
        let pid = std::process::id() as i32;
        let need = parse::parse(TSC_MAP.as_bytes(), u64::MAX).unwrap().bytes;
        let mut maps = SourceMaps::with_store(new_store(u64::MAX), need);
        assert!(maps.for_script(pid, &paths[0]).is_some());
        assert_eq!(maps.share_used(), need);
        // A rebuild: the script and its map rewritten (new sizes, so new identities whatever the clock's grain).
        std::fs::write(dir.path().join("shared.js.map"), format!("{TSC_MAP} ")).unwrap();
        std::fs::write(&paths[0], "f(); // rebuilt\n//# sourceMappingURL=shared.js.map\n").unwrap();
        maps.new_window();
        assert!(maps.for_script(pid, &paths[0]).is_some(), "the new map fits the share the old one left");
        assert_eq!(maps.share_used(), need, "charged for the new map only: {:?}", maps.all_notes());
    }

    #[test]
    fn a_process_past_its_time_share_loads_no_more_maps_this_window() {
        let dir = tempfile::tempdir().unwrap();
        let paths = scripts(dir.path(), TSC_MAP);
        let pid = std::process::id() as i32;
        let mut maps = SourceMaps::with_store(new_store(u64::MAX), u64::MAX);
        maps.window_spent = MAP_TIME_SHARE;
        let before = budget::windows_past_time_share();
        assert!(maps.for_script(pid, &paths[0]).is_none() && maps.for_script(pid, &paths[1]).is_none(), "cut off");
        assert!(budget::windows_past_time_share() > before, "counted");
        assert_eq!(maps.notes_once().len(), 1, "named once");
        maps.new_window();
        assert!(maps.for_script(pid, &paths[0]).is_some(), "loaded in the next window");
    }

    #[test]
    fn script_names_are_paths_only_when_absolute() {
        assert_eq!(script_path("/app/a.js"), Some("/app/a.js".into()));
        assert_eq!(script_path("file:///app/my%20app/a.mjs"), Some("/app/my app/a.mjs".into()));
        assert_eq!(script_path("node:internal/main"), None);
        assert_eq!(script_path("evalmachine.<anonymous>"), None);
    }
}
