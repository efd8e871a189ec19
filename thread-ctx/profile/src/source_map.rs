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
//! once per process ([`SourceMaps::refused_note_once`]).
//!
//! Each script is looked at once per (path, modification time, size); what
//! was read is kept up to [`MAX_CACHED_MAP_BYTES`] of maps, then forgotten.
//! Whether a script changed is checked once per window (at its first frame),
//! not once per frame: a window's JS addresses from one script would each
//! open it again.

use super::frame::{Frame, FrameKind, Generated, SourcePos};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

/// Bytes at the end of a script searched for the `sourceMappingURL` comment.
pub const TAIL_BYTES: u64 = 64 << 10;
/// The largest map read (a file, or an inline URL's decoded JSON); tsc's map of a 1 MB bundle is ~0.5 MB.
pub const MAX_MAP_BYTES: u64 = 32 << 20;
/// Map bytes kept parsed over all scripts; past this the cache starts over.
pub const MAX_CACHED_MAP_BYTES: u64 = 256 << 20;
/// Scripts remembered (with or without a map); past this the cache starts over.
pub const MAX_CACHED_SCRIPTS: usize = 16 << 10;
/// Notes kept about maps that could not be used.
const MAX_NOTES: usize = 8;

/// Why a script's source map is not used: its frames keep the generated positions.
#[derive(Debug, thiserror::Error)]
pub enum SourceMapError {
    #[error("not a source map: {0}")]
    NotAMap(sourcemap::Error),
    #[error("index map: {0}")]
    IndexMap(sourcemap::Error),
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
    map: sourcemap::DecodedMap,
    /// Where relative source names resolve from: the map's directory.
    base: Option<PathBuf>,
}

impl ScriptMap {
    /// Parses map JSON; `base` is the directory relative sources resolve against.
    pub fn parse(json: &[u8], base: Option<PathBuf>) -> Result<ScriptMap, SourceMapError> {
        let map = match sourcemap::decode_slice(json).map_err(SourceMapError::NotAMap)? {
            sourcemap::DecodedMap::Index(index) => sourcemap::DecodedMap::Regular(index.flatten().map_err(SourceMapError::IndexMap)?),
            other => other,
        };
        Ok(ScriptMap { map, base })
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

/// The maps of one process's scripts, read on first use.
#[derive(Default)]
pub struct SourceMaps {
    /// By (script path, mtime, size): the script's map, or None (no map, or an unusable one).
    by_script: HashMap<(PathBuf, i64, u64), Option<Rc<ScriptMap>>>,
    /// What each script looked at in this window gave (None: no usable map, or no script).
    this_window: HashMap<PathBuf, Option<Rc<ScriptMap>>>,
    cached_bytes: u64,
    /// Maps that could not be used, for the user.
    pub notes: Vec<String>,
    notes_left_out: usize,
    /// The first map the target's user may not read, until said once.
    refused: Option<String>,
    refused_noted: std::cell::Cell<bool>,
}

impl SourceMaps {
    /// The map of `script` in process `pid`'s file system, when it has one that parses.
    pub fn for_script(&mut self, pid: i32, script: &Path) -> Option<Rc<ScriptMap>> {
        if let Some(known) = self.this_window.get(script) {
            return known.clone();
        }
        if self.this_window.len() >= MAX_CACHED_SCRIPTS {
            self.this_window.clear();
        }
        let map = self.look_at(pid, script);
        self.this_window.insert(script.to_path_buf(), map.clone());
        map
    }

    /// Scripts are looked at again (a change to one seen) from the next frame on.
    pub fn new_window(&mut self) {
        self.this_window.clear();
    }

    fn look_at(&mut self, pid: i32, script: &Path) -> Option<Rc<ScriptMap>> {
        let in_root = |p: &Path| PathBuf::from(format!("/proc/{pid}/root{}", p.display()));
        let file = match thread_ctx_discovery::target_file::open_any_owner(pid, &in_root(script)) {
            Ok(file) => file,
            Err(e) => {
                // A script the target runs but the reader may not open as it (no CAP_SETUID): said once.
                if e.kind() == std::io::ErrorKind::PermissionDenied && self.refused.is_none() {
                    let note = format!("script {}: {e}; its frames keep the generated positions", script.display());
                    self.refused = Some(thread_ctx_discovery::printable::printable(&note).into_owned());
                    self.note(note);
                }
                return None;
            }
        };
        let meta = file.metadata().ok()?;
        let key = (script.to_path_buf(), meta.mtime(), meta.size());
        if let Some(known) = self.by_script.get(&key) {
            return known.clone();
        }
        if self.by_script.len() >= MAX_CACHED_SCRIPTS || self.cached_bytes > MAX_CACHED_MAP_BYTES {
            self.by_script.clear();
            self.cached_bytes = 0;
        }
        let read = self.read_map(pid, file, script, &in_root);
        let (map, bytes) = match read {
            Ok(Some((map, bytes))) => (Some(Rc::new(map)), bytes),
            Ok(None) => (None, 0),
            Err(why) => {
                let note = format!("source map of {}: {why}; its frames keep the generated positions", script.display());
                if why.refused() && self.refused.is_none() {
                    self.refused = Some(thread_ctx_discovery::printable::printable(&note).into_owned());
                }
                self.note(note);
                (None, 0)
            }
        };
        self.cached_bytes += bytes;
        self.by_script.insert(key, map.clone());
        map
    }

    fn read_map(
        &self,
        pid: i32,
        file: std::fs::File,
        script: &Path,
        in_root: &dyn Fn(&Path) -> PathBuf,
    ) -> Result<Option<(ScriptMap, u64)>, SourceMapError> {
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
        let (json, base) = match found {
            None => return Ok(None),
            Some(Reference::Inline(json)) => (json, script.parent().map(Path::to_path_buf)),
            Some(Reference::File(path)) => {
                let map = thread_ctx_discovery::target_file::open_any_owner(pid, &in_root(&path)).map_err(read(&path))?;
                let size = map.metadata().map_err(read(&path))?.len();
                if size > MAX_MAP_BYTES {
                    return Err(SourceMapError::FileTooLarge { path, size });
                }
                let (json, _) = thread_ctx_discovery::target_file::read_tail(map, MAX_MAP_BYTES).map_err(read(&path))?;
                (json, path.parent().map(Path::to_path_buf))
            }
        };
        if json.len() as u64 > MAX_MAP_BYTES {
            return Err(SourceMapError::InlineTooLarge { bytes: json.len() });
        }
        let bytes = json.len() as u64;
        ScriptMap::parse(&json, base).map(|m| Some((m, bytes)))
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

    /// The first map refused to this process (its user may not read it), once per process:
    /// the agent logs one line for it, not one per window.
    pub fn refused_note_once(&self) -> Option<String> {
        let note = self.refused.as_ref().filter(|_| !self.refused_noted.replace(true))?;
        Some(format!("{note} (the process's user may not read it: not read for it; other refused maps of this process are not logged)"))
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

    #[test]
    fn script_names_are_paths_only_when_absolute() {
        assert_eq!(script_path("/app/a.js"), Some("/app/a.js".into()));
        assert_eq!(script_path("file:///app/my%20app/a.mjs"), Some("/app/my app/a.mjs".into()));
        assert_eq!(script_path("node:internal/main"), None);
        assert_eq!(script_path("evalmachine.<anonymous>"), None);
    }
}
