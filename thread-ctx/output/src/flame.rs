//! `--folded FILE` and `--flamegraph FILE.svg` (inferno): folded stacks,
//! root first, rooted at the thread's name, of the samples a [`Kind`] shows:
//! CPU samples counted; off-CPU time in microseconds, alone or with the CPU
//! samples (one period each) on the same scale, off-CPU stacks ending in an
//! `[off-CPU: blocked]` or `[off-CPU: preempted]` frame; allocations in the
//! bytes they stand for. Native frames are named as `perf` names them
//! ([`short_native_name`]: no parameter list); pprof keeps the full name.

use super::file_error::{FileError, Result};
use super::kind::Kind;
use super::native_name::short_native_name;
use inferno::flamegraph::color::{MultiPalette, Palette};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use thread_ctx_model::{Entry, Filter, FrameKind, Profile};

fn stack_line(p: &Profile, e: &Entry) -> String {
    let thread = p.thread_name(e.tid).map(str::to_string).unwrap_or_else(|| format!("tid {}", e.tid));
    let mut parts = vec![thread.replace([';', '\n', '\r'], ":")];
    parts.extend(e.stack.iter().rev().map(|f| {
        let frame = p.frame(f);
        match frame.kind {
            FrameKind::Native => short_native_name(&frame.name).replace([';', '\n', '\r'], ":"),
            _ => frame.flame_name(),
        }
    }));
    if let Some(k) = e.kind.off_cpu_label() {
        parts.push(format!("[off-CPU: {k}]_[k]"));
    }
    parts.join(";")
}

/// Folded lines (`a;b;c VALUE`, sorted) of the entries `kind` shows and `filter` keeps.
pub fn folded(p: &Profile, filter: &Filter, kind: Kind) -> Vec<String> {
    let mut sums: BTreeMap<String, u64> = BTreeMap::new();
    for e in p.entries.iter().filter(|e| filter.matches(e) && kind.shows(e)) {
        *sums.entry(stack_line(p, e)).or_default() += kind.value(e);
    }
    sums.into_iter()
        .map(|(k, v)| (k, if kind.is_time() { (v + 500) / 1000 } else { v }))
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}

pub fn write_folded(path: &Path, p: &Profile, filter: &Filter, kind: Kind) -> Result<usize> {
    let lines = folded(p, filter, kind);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).map_err(|e| FileError::io("writing", path, e))?;
    Ok(lines.len())
}

/// Writes the SVG of what `kind` shows, titled so; an error when `filter` keeps none of those
/// samples (an empty flame graph says nothing). Errors do not name a flag: callers add theirs
/// as context.
pub fn write_svg(path: &Path, p: &Profile, filter: &Filter, kind: Kind, subtitle: &str) -> Result<()> {
    let lines = folded(p, filter, kind);
    if lines.is_empty() {
        return Err(FileError::NoSamples(filter.describe()));
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = kind.title(filter);
    opts.subtitle = Some(subtitle.to_string());
    opts.count_name = kind.unit().to_string();
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
    use thread_ctx_model::symbolized::StackFrame;
    use thread_ctx_model::{Frame, SampleKind};

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
        assert_eq!(folded(&p, &Filter::default(), Kind::Cpu), vec!["node;main;burn /a.js:3_[j] 4"]);
        let only = Filter::parse(Some(&"02".repeat(16)), None, &[]).unwrap();
        assert_eq!(folded(&p, &only, Kind::Cpu), vec!["node;main;burn /a.js:3_[j] 1"]);
    }

    #[test]
    fn off_cpu_profiles_count_microseconds_and_mark_off_cpu_stacks() {
        let p = profile(true);
        assert_eq!(
            folded(&p, &Filter::default(), Kind::CpuAndOffCpu),
            vec!["node;main;burn /a.js:3_[j] 40000", "node;main;burn /a.js:3_[j];[off-CPU: blocked]_[k] 50000"]
        );
        assert_eq!(folded(&p, &Filter::default(), Kind::OffCpu), vec!["node;main;burn /a.js:3_[j];[off-CPU: blocked]_[k] 50000"]);
        assert_eq!(folded(&p, &Filter::default(), Kind::Cpu), vec!["node;main;burn /a.js:3_[j] 4"], "CPU alone counts samples");
    }

    #[test]
    fn an_empty_selection_is_an_error_naming_the_filter() {
        let p = profile(false);
        let none = Filter::parse(Some(&"09".repeat(16)), None, &[]).unwrap();
        let path = std::env::temp_dir().join(format!("flame-empty-{}.svg", std::process::id()));
        let err = write_svg(&path, &p, &none, Kind::Cpu, "").unwrap_err().to_string();
        assert!(err.starts_with("no samples match"), "{err}");
        assert!(err.contains("no samples match trace 0909"), "{err}");
        assert!(!path.exists());
    }

    #[test]
    fn native_frames_are_named_without_their_parameters() {
        let mut p = profile(false);
        let long = "void v8::internal::BodyDescriptorBase::IteratePointers<v8::internal::Visitor>(v8::internal::Tagged<v8::internal::HeapObject>, int, int, v8::internal::Visitor*)";
        let gc = p.intern(Frame::native(long, Some("/usr/bin/node")));
        p.push_entry(Entry { tid: 7, ..Entry::test(vec![StackFrame { addr: 9, frame: gc, kernel: false }], None, &[], 2) });
        let lines = folded(&p, &Filter::default(), Kind::Cpu);
        assert!(lines.contains(&"node;v8::internal::BodyDescriptorBase::IteratePointers<v8::internal::Visitor> 2".to_string()), "{lines:?}");
    }
}
