//! V8's perf map (`/tmp/perf-PID.map`, written by Node with
//! `--perf-basic-prof-only-functions`): one `START SIZE NAME` line (hex, no
//! 0x) per piece of generated code, appended as V8 compiles. V8 reuses code
//! space after GC, so a later line overrides every earlier range it overlaps.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    end: u64,
    func: JsFunction,
}

#[derive(Debug, Default, Clone)]
pub struct PerfMap {
    by_start: BTreeMap<u64, Range>,
    /// Lines that did not parse (reported, not fatal: a line may be mid-write).
    pub bad_lines: usize,
}

/// The perf map path of `pid` as seen from this mount namespace: V8 names
/// the file after the pid inside the target's pid namespace and writes it
/// to the target's own /tmp.
pub fn path_for(pid: i32) -> PathBuf {
    let ns_pid = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("NStgid:"))
                .and_then(|v| v.split_whitespace().last().map(str::to_string))
        })
        .unwrap_or_else(|| pid.to_string());
    let in_root = PathBuf::from(format!("/proc/{pid}/root/tmp/perf-{ns_pid}.map"));
    if in_root.exists() {
        in_root
    } else {
        PathBuf::from(format!("/tmp/perf-{pid}.map"))
    }
}

impl PerfMap {
    pub fn from_file(path: &Path) -> std::io::Result<Self> {
        Ok(Self::parse(&String::from_utf8_lossy(&std::fs::read(path)?)))
    }

    pub fn parse(text: &str) -> Self {
        let mut map = PerfMap::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match parse_line(line) {
                Some((start, size, func)) => map.insert(start, start.saturating_add(size.max(1)), func),
                None => map.bad_lines += 1,
            }
        }
        map
    }

    fn insert(&mut self, start: u64, end: u64, func: JsFunction) {
        // Drop every older range this one overlaps: the newer line is what lives there now.
        // Stored ranges never overlap, so ends rise with starts and the walk back can stop early.
        let overlapping: Vec<u64> =
            self.by_start.range(..end).rev().take_while(|(_, r)| r.end > start).map(|(s, _)| *s).collect();
        for s in overlapping {
            self.by_start.remove(&s);
        }
        self.by_start.insert(start, Range { end, func });
    }

    pub fn lookup(&self, addr: u64) -> Option<&JsFunction> {
        let (_, r) = self.by_start.range(..=addr).next_back()?;
        (addr < r.end).then_some(&r.func)
    }

    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }
}

fn parse_line(line: &str) -> Option<(u64, u64, JsFunction)> {
    let line = line.trim_end();
    let (start, rest) = line.split_once(' ')?;
    let (size, name) = rest.trim_start().split_once(' ').unwrap_or((rest.trim_start(), ""));
    let start = u64::from_str_radix(start.trim_start_matches("0x"), 16).ok()?;
    let size = u64::from_str_radix(size.trim_start_matches("0x"), 16).ok()?;
    Some((start, size, parse_v8_name(name.trim())))
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
    JsFunction {
        name: if name.is_empty() { "(anonymous)".into() } else { name.to_string() },
        code_kind,
        tier,
        script,
        line,
        column,
    }
}

type Location = (Option<String>, Option<u32>, Option<u32>);

fn parse_location(loc: &str) -> Option<Location> {
    let (head, last) = loc.rsplit_once(':')?;
    let last: u32 = last.parse().ok()?;
    match head.rsplit_once(':') {
        Some((path, line)) if !path.is_empty() && line.parse::<u32>().is_ok() => {
            Some((Some(path.to_string()), line.parse().ok(), Some(last)))
        }
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
            "1000 100 JS:*old /a.js:1:1\n\
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
}
