//! Where a process's allocations can be probed: the mapped object holding V8
//! (the `node` executable, or a `libnode.so` where a distribution links V8 as a
//! shared library) and the probe's file offset in it, remembered per object by
//! build id, so that a host running many processes of one `node` reads its
//! symbol tables once.

use super::symbol::{probe_offset_in_file, ProbeOffset, ProbeSymbolError};
use std::collections::HashMap;
use thread_ctx_discovery::build_id::build_id;
use thread_ctx_discovery::maps::{read_maps, Mapping};

/// Objects remembered; past this the cache starts over (bounded memory on a host with churn).
const MAX_CACHED: usize = 256;

/// One process's probe site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSite {
    /// A path that opens the very file mapped in the process (`/proc/PID/map_files/…`): it
    /// reaches other mount namespaces and a `node` replaced on disk since the process started.
    pub attach_path: String,
    /// The object's path as the process maps it, for messages.
    pub path: String,
    /// Identifies the object across processes: its GNU build id, else device and inode.
    pub object: ObjectKey,
    pub offset: ProbeOffset,
}

/// One mapped object, the same in every process that maps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKey {
    BuildId(String),
    File { dev: String, inode: u64 },
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObjectKey::BuildId(id) => write!(f, "build id {id}"),
            ObjectKey::File { dev, inode } => write!(f, "device {dev} inode {inode}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeSiteError {
    #[error("process {pid}: {reason}")]
    Process { pid: u32, reason: String },
    #[error("process {pid} maps no node executable or libnode")]
    NoV8 { pid: u32 },
    #[error("process {pid}: {source}")]
    Symbol { pid: u32, source: ProbeSymbolError },
}

/// Probe offsets by object, and why objects have none (asked once, said once).
#[derive(Default)]
pub struct ProbeSites {
    by_object: HashMap<ObjectKey, Result<ProbeOffset, ProbeSymbolError>>,
}

impl ProbeSites {
    pub fn new() -> Self {
        Self::default()
    }

    /// The probe site of process `pid`: its executable if that holds V8, else a mapped libnode.
    pub fn site(&mut self, pid: u32) -> Result<ProbeSite, ProbeSiteError> {
        let maps = read_maps(pid as i32).map_err(|e| ProbeSiteError::Process { pid, reason: e.to_string() })?;
        let exe =
            std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| ProbeSiteError::Process { pid, reason: format!("/proc/{pid}/exe: {e}") })?;
        let exe = exe.to_string_lossy();
        let exe = exe.strip_suffix(" (deleted)").unwrap_or(&exe);
        let candidates = v8_objects(&maps, exe);
        if candidates.is_empty() {
            return Err(ProbeSiteError::NoV8 { pid });
        }
        let mut first_error = None;
        for m in candidates {
            let attach_path = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
            let object = match build_id(pid as i32, m) {
                Some(id) => ObjectKey::BuildId(id),
                None => ObjectKey::File { dev: m.dev.clone(), inode: m.inode },
            };
            if self.by_object.len() >= MAX_CACHED && !self.by_object.contains_key(&object) {
                self.by_object.clear();
            }
            let found = self.by_object.entry(object.clone()).or_insert_with(|| probe_offset_in_file(&attach_path, m.path())).clone();
            match found {
                Ok(offset) => return Ok(ProbeSite { attach_path, path: m.path().to_string(), object, offset }),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(ProbeSiteError::Symbol { pid, source: first_error.expect("at least one candidate was tried") })
    }
}

/// The executable mappings that may hold V8, one per object, the executable first.
fn v8_objects<'m>(maps: &'m [Mapping], exe: &str) -> Vec<&'m Mapping> {
    let mut found: Vec<&Mapping> = Vec::new();
    let executable = |m: &&Mapping| m.is_file_backed() && m.perms.contains('x');
    let is_libnode = |m: &Mapping| m.path().rsplit('/').next().is_some_and(|base| base.starts_with("libnode.so"));
    for m in maps.iter().filter(executable).filter(|m| m.path() == exe).chain(maps.iter().filter(executable).filter(|m| is_libnode(m))) {
        if !found.iter().any(|f| (f.dev.as_str(), f.inode) == (m.dev.as_str(), m.inode)) {
            found.push(m);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use thread_ctx_discovery::maps::parse_maps;

    #[test]
    fn the_executable_comes_first_then_libnode_once() {
        let maps = parse_maps(
            "00400000-00500000 r--p 00000000 08:01 11 /usr/bin/node\n\
             00500000-00900000 r-xp 00100000 08:01 11 /usr/bin/node\n\
             7f0000000000-7f0000100000 r-xp 00000000 08:01 12 /usr/lib/libnode.so.115\n\
             7f0000200000-7f0000300000 r-xp 00000000 08:01 13 /usr/lib/libc.so.6\n\
             7f0000400000-7f0000500000 r-xp 00200000 08:01 12 /usr/lib/libnode.so.115\n",
            "test",
        )
        .unwrap();
        let found: Vec<_> = v8_objects(&maps, "/usr/bin/node").iter().map(|m| (m.path(), m.start)).collect();
        assert_eq!(found, [("/usr/bin/node", 0x500000), ("/usr/lib/libnode.so.115", 0x7f0000000000)]);
        assert!(v8_objects(&maps[3..4], "/usr/bin/python3").is_empty());
    }

    #[test]
    fn a_process_without_v8_says_so() {
        let mut sites = ProbeSites::new();
        let me = std::process::id();
        match sites.site(me) {
            Err(e @ ProbeSiteError::Symbol { source: ProbeSymbolError::Missing { .. }, .. }) => assert!(e.to_string().contains("not V8"), "{e}"),
            other => panic!("expected no V8 in the test binary, got {other:?}"),
        }
        assert_eq!(sites.by_object.len(), 1, "the answer is remembered");
    }
}
