//! V8's perf map (`/tmp/perf-PID.map`, written by Node with
//! `--perf-basic-prof-only-functions`): one `START SIZE NAME` line (hex, no
//! 0x) per piece of generated code, appended as V8 compiles. V8 reuses code
//! space after GC, so a later line overrides every earlier range it overlaps.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Newest bytes of the file read: V8 only appends, later lines win, and a
/// long-running service's map can grow without end.
pub const MAX_BYTES: u64 = 16 << 20;
/// Longest line taken (V8 writes a name and a script URL, a few hundred bytes).
pub const MAX_LINE_BYTES: usize = 4096;
/// Functions kept; lines past this are counted in `dropped_lines`.
pub const MAX_FUNCTIONS: usize = 1 << 18;

/// A JS function (or V8 stub) as named in the perf map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsFunction {
    /// `burnAlpha`; `(anonymous)` for an unnamed function.
    pub name: String,
    /// V8's code kind prefix: `JS`, `Builtin`, `Script`, `LazyCompile` (older V8)...
    pub code_kind: Option<String>,
    /// V8 tier marker: `~` interpreted, `^` Sparkplug, `+` Maglev, `*` TurboFan.
    pub tier: Option<char>,
    pub script: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
}

/// A function's code range and its name as V8 wrote it, parsed when looked up: a service that
/// keeps compiling fills the map to its bound, and one string per function (~130 bytes with the
/// tree's share) is a third of a parsed [`JsFunction`] (name, kind and script apart, ~330 bytes
/// with the allocator's share), while each address is looked up once per window at most.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    end: u64,
    name: Box<str>,
    /// Order of insertion: the newest functions are kept by [`PerfMap::evict`].
    seq: u64,
    /// The window it was last looked up in, plus one (0: never); see [`PerfMap::evict`].
    used_in: Cell<u64>,
}

#[derive(Debug, Default, Clone)]
pub struct PerfMap {
    by_start: BTreeMap<u64, Range>,
    next_seq: u64,
    /// The window lookups happen in ([`PerfMap::next_window`]).
    window: u64,
    /// Lines that did not parse or were too long (reported, not fatal: a line may be mid-write).
    pub bad_lines: usize,
    /// Lines not kept because the map already held `MAX_FUNCTIONS`.
    pub dropped_lines: usize,
    /// Bytes at the start of the file not read (past `MAX_BYTES`).
    pub skipped_bytes: u64,
}

/// The perf map path of `pid` as seen from this mount namespace: V8 names
/// the file after the pid inside the target's pid namespace and writes it
/// to the target's own /tmp.
pub fn path_for(pid: i32) -> PathBuf {
    let ns_pid = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("NStgid:")).and_then(|v| v.split_whitespace().last().map(str::to_string)))
        .unwrap_or_else(|| pid.to_string());
    let in_root = PathBuf::from(format!("/proc/{pid}/root/tmp/perf-{ns_pid}.map"));
    if in_root.exists() {
        in_root
    } else {
        PathBuf::from(format!("/tmp/perf-{pid}.map"))
    }
}

impl PerfMap {
    /// Reads process `pid`'s perf map at `path` (see [`thread_ctx_discovery::target_file`]:
    /// a regular file of the process's user, its newest `MAX_BYTES`).
    pub fn from_target_file(pid: i32, path: &Path) -> std::io::Result<Self> {
        let (bytes, skipped) = thread_ctx_discovery::target_file::read_tail(thread_ctx_discovery::target_file::open(pid, path)?, MAX_BYTES)?;
        let mut text = bytes.as_slice();
        if skipped > 0 {
            // Started mid-line: the first whole line follows the first newline.
            let first = text.iter().position(|&b| b == b'\n').map_or(text.len(), |i| i + 1);
            text = &text[first..];
        }
        let mut map = Self::parse(text);
        map.skipped_bytes = skipped;
        Ok(map)
    }

    /// Parses perf map text: a pure function of the bytes (fuzzed). Lines
    /// that do not parse are counted, never fatal.
    pub fn parse(text: &[u8]) -> Self {
        let mut map = PerfMap::default();
        map.extend(text);
        map
    }

    /// Adds the lines V8 appended since the text already parsed (whole lines only).
    pub fn extend(&mut self, text: &[u8]) {
        for line in text.split(|&b| b == b'\n').filter(|l| !l.trim_ascii().is_empty()) {
            if line.len() > MAX_LINE_BYTES {
                self.bad_lines += 1;
                continue;
            }
            match parse_line(&String::from_utf8_lossy(line)) {
                Some(_) if self.by_start.len() >= MAX_FUNCTIONS => self.dropped_lines += 1,
                Some((start, size, name)) => self.insert(start, start.saturating_add(size.max(1)), name.into()),
                None => self.bad_lines += 1,
            }
        }
    }

    fn insert(&mut self, start: u64, end: u64, name: Box<str>) {
        // Drop every older range this one overlaps: the newer line is what lives there now.
        // Stored ranges never overlap, so ends rise with starts and the walk back can stop early.
        let overlapping: Vec<u64> = self.by_start.range(..end).rev().take_while(|(_, r)| r.end > start).map(|(s, _)| *s).collect();
        for s in overlapping {
            self.by_start.remove(&s);
        }
        self.by_start.insert(start, Range { end, name, seq: self.next_seq, used_in: Cell::new(0) });
        self.next_seq += 1;
    }

    pub fn lookup(&self, addr: u64) -> Option<JsFunction> {
        let (_, r) = self.by_start.range(..=addr).next_back()?;
        (addr < r.end).then(|| {
            r.used_in.set(self.window + 1);
            parse_v8_name(&r.name)
        })
    }

    /// Lookups from now on belong to the next window. A symbolizer looks an address up once per
    /// window, so "looked up in this window or the last" is "ran lately".
    pub fn next_window(&mut self) {
        self.window += 1;
    }

    /// Keeps the `keep_newest` functions added last and those looked up in this window or the
    /// last (the code that runs: a hot function compiled at start-up must stay named however
    /// much code came after it); drops the rest. Returns how many were dropped. When the code
    /// looked up alone is more than `keep_newest`, only the newest stay.
    pub fn evict(&mut self, keep_newest: usize) -> usize {
        let before = self.by_start.len();
        let newest_from = self.next_seq.saturating_sub(keep_newest as u64);
        // Looked up in the last window or this one: `used_in` is that window plus one.
        let used_lately = self.window.max(1);
        self.by_start.retain(|_, r| r.used_in.get() >= used_lately || r.seq >= newest_from);
        if self.by_start.len() > 2 * keep_newest {
            self.by_start.retain(|_, r| r.seq >= newest_from);
        }
        before - self.by_start.len()
    }

    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }
}

/// Start, size and the name as written (see [`parse_v8_name`]).
fn parse_line(line: &str) -> Option<(u64, u64, &str)> {
    let line = line.trim_end();
    let (start, rest) = line.split_once(' ')?;
    let (size, name) = rest.trim_start().split_once(' ').unwrap_or((rest.trim_start(), ""));
    let start = u64::from_str_radix(start.trim_start_matches("0x"), 16).ok()?;
    let size = u64::from_str_radix(size.trim_start_matches("0x"), 16).ok()?;
    Some((start, size, name.trim()))
}

/// Splits V8's `Kind:<tier>name location` (e.g. `JS:*burn /app/a.js:3:19`).
pub fn parse_v8_name(raw: &str) -> JsFunction {
    let (code_kind, rest) = match raw.split_once(':') {
        Some((k, r)) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric()) => (Some(k.to_string()), r),
        _ => (None, raw),
    };
    // Newer V8 marks on-stack-replacement code `o` before the tier and
    // context-specialized code `'` after it (`JS:o*f`, `JS:+'f`).
    let is_tier = |c: Option<char>| matches!(c, Some('~' | '^' | '+' | '*'));
    let rest = match rest.strip_prefix('o') {
        Some(r) if is_tier(r.chars().next()) => r,
        _ => rest,
    };
    let tier = rest.chars().next().filter(|&c| is_tier(Some(c)));
    let rest = if tier.is_some() { &rest[1..] } else { rest };
    let rest = if tier.is_some() { rest.strip_prefix('\'').unwrap_or(rest) } else { rest };
    // The location, when present, is the last word: `path:line[:column]`.
    let (name, location) = match rest.rsplit_once(' ') {
        Some((n, loc)) if parse_location(loc).is_some() => (n.trim(), Some(loc)),
        _ if parse_location(rest).is_some() && code_kind.is_some() => ("", Some(rest)),
        _ => (rest.trim(), None),
    };
    let (script, line, column) = location.and_then(parse_location).unwrap_or((None, None, None));
    JsFunction { name: if name.is_empty() { "(anonymous)".into() } else { name.to_string() }, code_kind, tier, script, line, column }
}

type Location = (Option<String>, Option<u32>, Option<u32>);

fn parse_location(loc: &str) -> Option<Location> {
    let (head, last) = loc.rsplit_once(':')?;
    let last: u32 = last.parse().ok()?;
    match head.rsplit_once(':') {
        Some((path, line)) if !path.is_empty() && line.parse::<u32>().is_ok() => Some((Some(path.to_string()), line.parse().ok(), Some(last))),
        _ if !head.is_empty() => Some((Some(head.to_string()), Some(last), None)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_node20_names_tiers_and_locations() {
        let f = parse_v8_name("JS:*burnAlpha /tmp/pm.js:1:19");
        assert_eq!((f.name.as_str(), f.tier, f.code_kind.as_deref()), ("burnAlpha", Some('*'), Some("JS")));
        assert_eq!((f.script.as_deref(), f.line, f.column), (Some("/tmp/pm.js"), Some(1), Some(19)));
        let anon = parse_v8_name("JS:~ node:internal/main/run_main_module:1:1");
        assert_eq!((anon.name.as_str(), anon.script.as_deref(), anon.line), ("(anonymous)", Some("node:internal/main/run_main_module"), Some(1)));
        let old = parse_v8_name("LazyCompile:*handler file:///srv/app.mjs:12");
        assert_eq!((old.name.as_str(), old.script.as_deref(), old.line, old.column), ("handler", Some("file:///srv/app.mjs"), Some(12), None));
        let getter = parse_v8_name("JS:^get size /a.js:4:7");
        assert_eq!(getter.name, "get size");
        for marked in ["JS:o*work /a.js:1:14", "JS:+'work /a.js:1:14", "JS:o+work /a.js:1:14", "JS:*'work /a.js:1:14"] {
            let f = parse_v8_name(marked);
            assert_eq!((f.name.as_str(), f.line), ("work", Some(1)), "{marked}");
        }
        assert_eq!(parse_v8_name("JS:~onData /a.js:2:3").name, "onData", "an o that starts a name stays");
        let builtin = parse_v8_name("Builtin:ArrayPrototypePush");
        assert_eq!((builtin.name.as_str(), builtin.script), ("ArrayPrototypePush", None));
    }

    #[test]
    fn later_lines_override_overlapping_ranges_and_bad_lines_are_counted() {
        let map = PerfMap::parse(
            b"1000 100 JS:*old /a.js:1:1\n\
             2000 10 JS:*keep /a.js:2:1\n\
             1080 100 JS:*new /a.js:3:1\n\
             zz 10 garbage\n",
        );
        assert_eq!(map.bad_lines, 1);
        assert_eq!(map.lookup(0x1000), None, "the old range was replaced by an overlapping newer one");
        assert_eq!(map.lookup(0x1100).unwrap().name, "new");
        assert_eq!(map.lookup(0x200f).unwrap().name, "keep");
        assert_eq!(map.lookup(0x2010), None, "end (start + hex size) is exclusive");
        assert_eq!(map.lookup(0xfff), None);
    }

    #[test]
    fn garbage_lines_are_counted_and_bounded() {
        let long = format!("3000 10 {}\n", "x".repeat(MAX_LINE_BYTES));
        let text = [
            "fffffffffffff000 ffffffffffffffff JS:*huge /a.js:1:1\n",
            "1000\n",
            "1000 10\n",
            "\u{0}\u{1} \u{ff}\n",
            "1000 0 JS:zero\n",
            "-1 10 neg\n",
            &long,
        ]
        .concat();
        let map = PerfMap::parse(text.as_bytes());
        assert_eq!(map.lookup(u64::MAX - 1).unwrap().name, "huge", "the end saturates instead of wrapping");
        assert_eq!(map.lookup(0x1000).unwrap().name, "zero", "size 0 covers its start; a later line wins");
        assert_eq!(map.lookup(0x3000), None, "an over-long line is not taken");
        assert_eq!(map.bad_lines, 4, "{map:?}");
        let invalid_utf8 = PerfMap::parse(b"2000 10 JS:*caf\xe9 /a.js:1:1\n");
        assert_eq!(invalid_utf8.lookup(0x2000).unwrap().name, "caf\u{fffd}");
    }

    #[test]
    fn functions_are_capped() {
        let mut text = Vec::new();
        for i in 0..MAX_FUNCTIONS as u64 + 10 {
            text.extend_from_slice(format!("{:x} 1 f\n", 0x1000 + i * 2).as_bytes());
        }
        let map = PerfMap::parse(&text);
        assert_eq!((map.len(), map.dropped_lines), (MAX_FUNCTIONS, 10));
    }
}
