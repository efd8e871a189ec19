//! The summary table's top frames per group: where each group's CPU samples
//! were, named by the innermost JS function on the stack (what a Node user can
//! act on; with its sampled line when V8's jitdump gave one), or by the leaf
//! frame when no JS frame is on it (GC, native code: named as `perf` names it,
//! without its parameter list).

use super::native_name::short_native_name;
use super::summary::{Group, GroupBy, GroupNotes};
use std::collections::HashMap;
use thread_ctx_model::FrameKind;
use thread_ctx_model::{Entry, Profile};

fn top_frame(p: &Profile, e: &Entry, files: &HashMap<&str, &str>) -> Option<String> {
    let f = e.stack.iter().map(|f| p.frame(f)).find(|f| f.kind == FrameKind::Js).or_else(|| e.stack.first().map(|f| p.frame(f)))?;
    if f.kind == FrameKind::Native {
        return Some(short_native_name(&f.name).into_owned());
    }
    Some(f.short_name_in(f.file.as_deref().map(|file| files.get(file).copied().unwrap_or(file))))
}

/// For every group with CPU samples: its `n` top frames as "name (file:line) 91%, ...".
pub fn top_frames(p: &Profile, by: &GroupBy, n: usize) -> GroupNotes {
    let mut per_group: HashMap<Group, HashMap<String, u64>> = HashMap::new();
    // JS files by the shortest path suffix that tells them apart (two index.js are not one).
    let files = thread_ctx_model::frame::unique_suffixes(p.frames.iter().filter(|f| f.kind == FrameKind::Js).filter_map(|f| f.file.as_deref()));
    for e in p.entries.iter().filter(|e| e.kind.is_cpu()) {
        let Some(group) = by.group_of_entry(e) else { continue };
        let name = top_frame(p, e, &files).unwrap_or_else(|| "(no stack)".into());
        *per_group.entry(group).or_default().entry(name).or_default() += e.count;
    }
    per_group
        .into_iter()
        .map(|(group, frames)| {
            let total: u64 = frames.values().sum();
            let mut frames: Vec<_> = frames.into_iter().collect();
            frames.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let pct = |c: u64| match 100.0 * c as f64 / total as f64 {
                p if p < 0.5 => "<1%".to_string(),
                p => format!("{p:.0}%"),
            };
            let text: Vec<String> = frames.iter().take(n).map(|(name, c)| format!("{name} {}", pct(*c))).collect();
            (group, text.join(", "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use thread_ctx_model::symbolized::StackFrame;
    use thread_ctx_model::{Frame, SourcePos};

    #[test]
    fn names_the_innermost_js_function_else_the_leaf_per_group() {
        let mut p = Profile::default();
        let sin = p.intern(Frame::native("ieee754::sin", None));
        let burn = p.intern(Frame { pos: Some(SourcePos { line: 5, column: Some(9) }), ..Frame::js("burn", Some("/app/a.js"), Some(3), None) });
        let gc = p.intern(Frame::native("v8::internal::Heap::Scavenge(v8::internal::GarbageCollectionReason)", None));
        let sf = |frame| StackFrame { addr: frame as u64, frame, kernel: false };
        let e = |stack, count, route: &str| Entry::test(stack, Some((1, 2)), &[("http.route", route)], count);
        p.push_entry(e(vec![sf(sin), sf(burn)], 3, "/a"));
        p.push_entry(e(vec![sf(gc)], 1, "/a"));
        p.push_entry(e(vec![sf(gc)], 2, "/b"));
        let top = top_frames(&p, &GroupBy::Attr("http.route".into()), 3);
        assert_eq!(top[&Group::Value(Some("/a".into()))], "burn (a.js:5) 75%, v8::internal::Heap::Scavenge 25%", "named without parameters");
        assert_eq!(top[&Group::Value(Some("/b".into()))], "v8::internal::Heap::Scavenge 100%");
        let by_span = top_frames(&p, &GroupBy::Span, 2);
        assert_eq!(by_span[&Group::Span([1; 16], [2; 8])], "burn (a.js:5) 50%, v8::internal::Heap::Scavenge 50%");
    }
}
