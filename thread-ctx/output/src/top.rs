//! The summary table's top frames per group: where each group's CPU samples
//! were, named by the innermost JS function on the stack (what a Node user can
//! act on; with its sampled line when V8's jitdump gave one), or by the leaf
//! frame when no JS frame is on it (GC, native code: named as `perf` names it,
//! without its parameter list).

use super::native_name::short_native_name;
use super::summary::{Group, GroupBy, GroupNotes, MAX_GROUPS};
use std::collections::HashMap;
use thread_ctx_model::FrameKind;
use thread_ctx_model::{Entry, Profile};

/// The frame that names an entry's CPU samples: its innermost JS frame, else its leaf (None: no
/// stack).
fn naming_frame(p: &Profile, e: &Entry) -> Option<usize> {
    e.stack.iter().find(|f| p.frame(f).kind == FrameKind::Js).or_else(|| e.stack.first()).map(|f| f.frame)
}

fn frame_name(p: &Profile, frame: Option<usize>, files: &HashMap<&str, &str>) -> String {
    let Some(f) = frame.map(|i| &p.frames[i]) else { return "(no stack)".into() };
    if f.kind == FrameKind::Native {
        return short_native_name(&f.name).into_owned();
    }
    f.short_name_in(f.file.as_deref().map(|file| files.get(file).copied().unwrap_or(file)))
}

/// Each group's CPU samples by the frame that names them, added up entry by entry, so that a
/// report need not keep the entries (`report --otlp`): frames are held by their index in the
/// profile and named only in [`TopFrames::notes`], once every JS file is known (a file's short
/// name depends on the others). Past [`MAX_GROUPS`] groups, new ones are not noted (the
/// summary table counts them in one overflow row, which has no top line).
#[derive(Debug)]
pub struct TopFrames {
    by: GroupBy,
    /// Per group, (frame index or None for no stack, CPU samples), sorted by frame: a vector, as
    /// most groups have a few frames (by trace: a hundred thousand groups of one or two).
    per_group: HashMap<Group, Vec<(Option<usize>, u64)>>,
}

impl TopFrames {
    pub fn new(by: GroupBy) -> TopFrames {
        TopFrames { by, per_group: HashMap::new() }
    }

    /// Adds an entry of `p` (whose frames its stack indexes).
    pub fn add_entry(&mut self, p: &Profile, e: &Entry) {
        if !e.kind.is_cpu() {
            return;
        }
        let Some(group) = self.by.group_of_entry(e) else { return };
        if self.per_group.len() >= MAX_GROUPS && !self.per_group.contains_key(&group) {
            return;
        }
        let frame = naming_frame(p, e);
        let counts = self.per_group.entry(group).or_default();
        match counts.binary_search_by_key(&frame, |&(f, _)| f) {
            Ok(i) => counts[i].1 += e.count,
            Err(i) => counts.insert(i, (frame, e.count)),
        }
    }

    /// For every group with CPU samples: its `n` top frames as "name (file:line) 91%, ...",
    /// named from `p`'s frames (the profile the entries were added from, or one with its frames).
    pub fn notes(&self, p: &Profile, n: usize) -> GroupNotes {
        // JS files by the shortest path suffix that tells them apart (two index.js are not one).
        let files = thread_ctx_model::frame::unique_suffixes(p.frames.iter().filter(|f| f.kind == FrameKind::Js).filter_map(|f| f.file.as_deref()));
        self.per_group
            .iter()
            .map(|(group, counts)| {
                // Two frames can share a name (the same function at two addresses): one line.
                let mut frames: HashMap<String, u64> = HashMap::new();
                for &(frame, c) in counts {
                    *frames.entry(frame_name(p, frame, &files)).or_default() += c;
                }
                let total: u64 = frames.values().sum();
                let mut frames: Vec<_> = frames.into_iter().collect();
                frames.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                let pct = |c: u64| match 100.0 * c as f64 / total as f64 {
                    p if p < 0.5 => "<1%".to_string(),
                    p => format!("{p:.0}%"),
                };
                let text: Vec<String> = frames.iter().take(n).map(|(name, c)| format!("{name} {}", pct(*c))).collect();
                (group.clone(), text.join(", "))
            })
            .collect()
    }
}

/// For every group with CPU samples: its `n` top frames as "name (file:line) 91%, ...".
pub fn top_frames(p: &Profile, by: &GroupBy, n: usize) -> GroupNotes {
    let mut top = TopFrames::new(by.clone());
    for e in &p.entries {
        top.add_entry(p, e);
    }
    top.notes(p, n)
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
