//! `--folded FILE` and `--flamegraph FILE.svg` (inferno): folded stacks,
//! root first, rooted at the thread's name. A CPU-only profile counts samples;
//! with off-CPU time traced the unit is microseconds, so CPU samples (one
//! period each) and off-CPU intervals share one scale, and off-CPU stacks end
//! in an `[off-CPU: blocked]` or `[off-CPU: preempted]` frame. A profile with
//! allocations traced shows those alone, in the bytes they stand for.

use super::file_error::{FileError, Result};
use inferno::flamegraph::color::{MultiPalette, Palette};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use thread_ctx_profile::Filter;
use thread_ctx_profile::{Entry, Profile};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Samples,
    Micros,
    /// Allocation samples only, each the bytes it stands for.
    Bytes,
}

impl Unit {
    pub fn of(p: &Profile) -> Unit {
        if p.alloc_traced {
            Unit::Bytes
        } else if p.off_cpu_traced {
            Unit::Micros
        } else {
            Unit::Samples
        }
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Samples => "samples",
            Unit::Micros => "us",
            Unit::Bytes => "bytes",
        }
    }

    /// What a folded line's value is, as the command's messages say it.
    pub fn describe(self) -> &'static str {
        match self {
            Unit::Samples => "values are CPU samples",
            Unit::Micros => "values are microseconds: a CPU sample counts as its sampling period, off-CPU time as itself",
            Unit::Bytes => "values are allocated bytes: each allocation sample counts the bytes it stands for",
        }
    }

    /// The entry's samples are shown in this unit.
    pub fn shows(self, e: &Entry) -> bool {
        match self {
            Unit::Samples => e.kind.is_cpu(),
            Unit::Micros => !e.kind.is_alloc(),
            Unit::Bytes => e.kind.is_alloc(),
        }
    }

    /// What the shown samples are called in messages.
    pub fn samples_name(self) -> &'static str {
        match self {
            Unit::Bytes => "allocation samples",
            _ => "CPU samples",
        }
    }
}

fn stack_line(p: &Profile, e: &Entry) -> String {
    let thread = p.thread_name(e.tid).map(str::to_string).unwrap_or_else(|| format!("tid {}", e.tid));
    let mut parts = vec![thread.replace([';', '\n', '\r'], ":")];
    parts.extend(e.stack.iter().rev().map(|f| p.frame(f).flame_name()));
    if let Some(k) = e.kind.off_cpu_label() {
        parts.push(format!("[off-CPU: {k}]_[k]"));
    }
    parts.join(";")
}

/// Folded lines (`a;b;c VALUE`, sorted) of the entries `filter` keeps.
pub fn folded(p: &Profile, filter: &Filter) -> Vec<String> {
    let unit = Unit::of(p);
    let mut sums: BTreeMap<String, u64> = BTreeMap::new();
    for e in p.entries.iter().filter(|e| filter.matches(e) && unit.shows(e)) {
        let v = match unit {
            Unit::Samples => e.count,
            Unit::Micros | Unit::Bytes => e.weight,
        };
        *sums.entry(stack_line(p, e)).or_default() += v;
    }
    sums.into_iter()
        .map(|(k, v)| (k, if unit == Unit::Micros { (v + 500) / 1000 } else { v }))
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}

pub fn write_folded(path: &Path, p: &Profile, filter: &Filter) -> Result<usize> {
    let lines = folded(p, filter);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).map_err(|e| FileError::io("writing", path, e))?;
    Ok(lines.len())
}

/// Writes the SVG; an error when `filter` keeps no samples (an empty flame graph says nothing).
/// Errors do not name a flag: callers add theirs as context.
pub fn write_svg(path: &Path, p: &Profile, filter: &Filter, subtitle: &str) -> Result<()> {
    let lines = folded(p, filter);
    if lines.is_empty() {
        return Err(FileError::NoSamples(filter.describe()));
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = match Unit::of(p) {
        Unit::Samples => format!("CPU: {}", filter.describe()),
        Unit::Micros => format!("CPU and off-CPU time: {}", filter.describe()),
        Unit::Bytes => format!("Allocated bytes: {}", filter.describe()),
    };
    opts.subtitle = Some(subtitle.to_string());
    opts.count_name = Unit::of(p).name().to_string();
    opts.colors = Palette::Multi(MultiPalette::Js);
    opts.deterministic = true;
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)
        .map_err(|e| FileError::Render { path: path.display().to_string(), reason: e.to_string() })?;
    let mut f = std::fs::File::create(path).map_err(|e| FileError::io("creating", path, e))?;
    f.write_all(&out).map_err(|e| FileError::io("writing", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use thread_ctx_profile::symbolized::StackFrame;
    use thread_ctx_profile::{Frame, SampleKind};

    fn profile(off_cpu: bool) -> Profile {
        let mut p = Profile::default();
        (p.off_cpu_traced, p.cpu_period_ns) = (off_cpu, 10_000_000);
        let main = p.intern(Frame::native("main", None));
        let burn = p.intern(Frame::js("burn", Some("/a.js"), Some(3), None));
        p.thread_names.insert(7, "node".into());
        let stack = vec![StackFrame { addr: 2, frame: burn, kernel: false }, StackFrame { addr: 1, frame: main, kernel: false }];
        let e = |kind, trace: u8, count, weight| Entry { kind, tid: 7, weight, ..Entry::test(stack.clone(), Some((trace, trace)), &[], count) };
        p.push_entry(e(SampleKind::Cpu, 1, 3, 30_000_000));
        p.push_entry(e(SampleKind::Cpu, 2, 1, 10_000_000));
        if off_cpu {
            p.push_entry(e(SampleKind::Blocked, 1, 1, 50_000_400));
        }
        p
    }

    #[test]
    fn folded_lines_are_root_first_and_merge_spans() {
        let p = profile(false);
        assert_eq!(folded(&p, &Filter::default()), vec!["node;main;burn /a.js:3_[j] 4"]);
        let only = Filter::parse(Some(&"02".repeat(16)), None, &[]).unwrap();
        assert_eq!(folded(&p, &only), vec!["node;main;burn /a.js:3_[j] 1"]);
    }

    #[test]
    fn off_cpu_profiles_count_microseconds_and_mark_off_cpu_stacks() {
        let p = profile(true);
        assert_eq!(
            folded(&p, &Filter::default()),
            vec!["node;main;burn /a.js:3_[j] 40000", "node;main;burn /a.js:3_[j];[off-CPU: blocked]_[k] 50000"]
        );
    }

    #[test]
    fn an_empty_selection_is_an_error_naming_the_filter() {
        let p = profile(false);
        let none = Filter::parse(Some(&"09".repeat(16)), None, &[]).unwrap();
        let path = std::env::temp_dir().join(format!("flame-empty-{}.svg", std::process::id()));
        let err = write_svg(&path, &p, &none, "").unwrap_err().to_string();
        assert!(err.starts_with("no samples match"), "{err}");
        assert!(err.contains("no samples match trace 0909"), "{err}");
        assert!(!path.exists());
    }
}
