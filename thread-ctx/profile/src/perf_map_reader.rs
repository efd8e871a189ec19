//! Follows one process's V8 perf map as V8 appends to it: each refresh reads
//! only the bytes added since the last one (whole lines), so a service that
//! keeps compiling costs what it adds, not its whole map again. The map is
//! bounded: past [`MAX_JS_FUNCTIONS`] it keeps the newest half and every
//! function looked up in this window or the last (see [`PerfMap::evict`]: older
//! code is the likeliest to be gone, but code that runs stays named however
//! old it is), and the functions dropped are counted.

use super::perf_map::{self, PerfMap};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// JS functions kept per process: ~130 bytes each with their names and the allocator's share
/// (see `perf_map::Range`), so ~1 MiB. A service run with `--perf-basic-prof-only-functions`
/// logs a few thousand; one that keeps compiling new code reaches it and keeps its newest half.
pub const MAX_JS_FUNCTIONS: usize = 8_192;
/// Bytes read per refresh at most; the rest waits for the next one.
const MAX_READ_BYTES: u64 = 4 << 20;

/// A perf map last written this long before its process started is another process's: pids are
/// reused and V8 never deletes its map. The margin covers the start time's clock tick and a clock
/// step; a pid reused within it, by a process that writes no map of its own, goes unnoticed.
const STALE_MARGIN: Duration = Duration::from_secs(1);

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

pub struct PerfMapReader {
    pid: i32,
    path: PathBuf,
    started_at: Option<SystemTime>,
    map: Option<PerfMap>,
    /// The file (inode) and how many of its bytes were parsed.
    inode: u64,
    offset: u64,
    error: Option<String>,
    stale: bool,
    /// Functions dropped to stay under [`MAX_JS_FUNCTIONS`].
    pub evicted: u64,
}

impl PerfMapReader {
    pub fn new(pid: i32, started_at: Option<SystemTime>) -> PerfMapReader {
        PerfMapReader { pid, path: perf_map::path_for(pid), started_at, map: None, inode: 0, offset: 0, error: None, stale: false, evicted: 0 }
    }

    /// A new window starts: see [`PerfMap::next_window`].
    pub fn next_window(&mut self) {
        if let Some(m) = self.map.as_mut() {
            m.next_window();
        }
    }

    pub fn map(&self) -> Option<&PerfMap> {
        self.map.as_ref()
    }

    pub fn status(&self) -> PerfMapStatus {
        let path = self.path.clone();
        match (&self.map, &self.error) {
            (Some(m), _) => PerfMapStatus::Loaded { path, functions: m.len() },
            (None, Some(e)) => PerfMapStatus::Unreadable { path, error: e.clone() },
            (None, None) if self.stale => PerfMapStatus::Stale { path },
            (None, None) => PerfMapStatus::Missing { path },
        }
    }

    /// Reads what V8 appended since the last look (the whole file when it was replaced).
    pub fn refresh(&mut self) {
        // Not followed: a symlink planted as the map is refused by the open, and reported.
        let meta = match std::fs::symlink_metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.error = Some(e.to_string());
                return;
            }
        };
        // Checked at every look: V8 truncates a stale map when it opens its own.
        let written = meta.modified().ok();
        self.stale = matches!((written, self.started_at), (Some(w), Some(s)) if w + STALE_MARGIN < s);
        if self.stale {
            self.map = None;
            return;
        }
        if meta.ino() != self.inode || meta.len() < self.offset {
            (self.map, self.inode, self.offset) = (None, meta.ino(), 0);
        }
        // Anything but a regular file goes to the open, which refuses it and says why (a FIFO has no length).
        if meta.is_file() && meta.len() == self.offset {
            return;
        }
        match self.read_from(meta.len()) {
            Ok(()) => self.error = None,
            Err(e) => self.error = Some(e.to_string()),
        }
    }

    fn read_from(&mut self, len: u64) -> std::io::Result<()> {
        let mut file = thread_ctx_discovery::target_file::open(self.pid, &self.path)?;
        let map = self.map.get_or_insert_with(PerfMap::default);
        // A first look at a long map starts at its newest lines, as a bounded re-read does.
        let mut start = self.offset.max(len.saturating_sub(perf_map::MAX_BYTES));
        let mut skip_partial = start > self.offset;
        let mut bytes = Vec::new();
        loop {
            file.seek(SeekFrom::Start(start))?;
            bytes.clear();
            (&mut file).take(MAX_READ_BYTES.min(len - start)).read_to_end(&mut bytes)?;
            let mut text = bytes.as_slice();
            if skip_partial {
                let first = text.iter().position(|&b| b == b'\n').map_or(text.len(), |i| i + 1);
                text = &text[first..];
                start += first as u64;
                skip_partial = false;
            }
            let Some(last) = text.iter().rposition(|&b| b == b'\n') else { break };
            let whole = &text[..=last];
            map.extend(whole);
            start += whole.len() as u64;
            if start >= len || bytes.len() as u64 >= MAX_READ_BYTES {
                break;
            }
        }
        self.offset = start;
        if map.len() > MAX_JS_FUNCTIONS {
            self.evicted += map.evict(MAX_JS_FUNCTIONS / 2) as u64;
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn appended_lines_are_read_once_and_a_replaced_file_from_the_start() {
        let pid = std::process::id() as i32;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf.map");
        let mut r = PerfMapReader::new(pid, None);
        r.path = path.clone();
        std::fs::write(&path, b"1000 10 JS:*a /a.js:1:1\n2000 10 JS:*b /a.js:2").unwrap();
        r.refresh();
        assert_eq!(r.map().unwrap().len(), 1, "a line being written waits");
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b":1\n3000 10 JS:*c /a.js:3:1\n").unwrap();
        r.refresh();
        let m = r.map().unwrap();
        assert_eq!((m.len(), m.lookup(0x2005).unwrap().name.as_str()), (3, "b"));
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"5000 10 JS:*d /b.js:1:1\n").unwrap();
        r.refresh();
        assert_eq!((r.map().unwrap().len(), r.map().unwrap().lookup(0x5000).unwrap().name.as_str()), (1, "d"));
    }

    #[test]
    fn the_map_stays_bounded_keeping_the_newest_functions() {
        let pid = std::process::id() as i32;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf.map");
        let mut text = Vec::new();
        for i in 0..(MAX_JS_FUNCTIONS as u64 + 100) {
            text.extend_from_slice(format!("{:x} 2 JS:*f{i} /a.js:1:1\n", 0x10000 + i * 4).as_bytes());
        }
        std::fs::write(&path, &text).unwrap();
        let mut r = PerfMapReader::new(pid, None);
        r.path = path;
        r.refresh();
        let m = r.map().unwrap();
        assert!(m.len() <= MAX_JS_FUNCTIONS / 2 + 1 && r.evicted > 0, "{} kept, {} evicted", m.len(), r.evicted);
        let newest = 0x10000 + (MAX_JS_FUNCTIONS as u64 + 99) * 4;
        assert!(m.lookup(newest).is_some() && m.lookup(0x10000).is_none(), "the newest code is kept");
    }

    #[test]
    fn code_looked_up_lately_stays_however_old() {
        let pid = std::process::id() as i32;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf.map");
        let line = |i: u64| format!("{:x} 2 JS:*f{i} /a.js:1:1\n", 0x10000 + i * 4);
        std::fs::write(&path, line(0) + &line(1)).unwrap();
        let mut r = PerfMapReader::new(pid, None);
        r.path = path.clone();
        r.refresh();
        let mut more = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        let mut lines = 2;
        // A window looks each address up once; evictions come several times a window.
        for window in 0..3 {
            assert_eq!(r.map().unwrap().lookup(0x10000).map(|f| f.name), Some("f0".into()), "window {window}: the hot function, compiled first");
            for _ in 0..3 {
                let text: String = (lines..lines + MAX_JS_FUNCTIONS as u64).map(line).collect();
                lines += MAX_JS_FUNCTIONS as u64;
                more.write_all(text.as_bytes()).unwrap();
                r.refresh();
                assert!(r.map().unwrap().len() <= MAX_JS_FUNCTIONS && r.evicted > 0, "{} kept", r.map().unwrap().len());
            }
            r.next_window();
        }
        assert!(r.map().unwrap().lookup(0x10004).is_none(), "old code that did not run is dropped");
        for _ in 0..2 {
            r.next_window();
            more.write_all((lines..lines + MAX_JS_FUNCTIONS as u64).map(line).collect::<String>().as_bytes()).unwrap();
            lines += MAX_JS_FUNCTIONS as u64;
            r.refresh();
        }
        assert!(r.map().unwrap().lookup(0x10000).is_none(), "and so is code that stopped running");
    }
}
