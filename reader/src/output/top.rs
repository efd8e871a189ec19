//! The summary table's top frames per span: where each span's CPU samples
//! were, named by the innermost JS function on the stack (what a Node user can
//! act on), or by the leaf frame when no JS frame is on it (GC, native code).

use crate::profile::{Entry, Profile};
use crate::profile::FrameKind;
use std::collections::HashMap;

pub type SpanKey = ([u8; 16], [u8; 8]);

fn top_frame(p: &Profile, e: &Entry) -> Option<String> {
    let f = e.stack.iter().map(|f| p.frame(f)).find(|f| f.kind == FrameKind::Js).or_else(|| e.stack.first().map(|f| p.frame(f)))?;
    Some(f.short_name())
}

/// For every span with CPU samples: its `n` top frames as "name (file:line) 91%, ...".
pub fn top_frames(p: &Profile, n: usize) -> HashMap<SpanKey, String> {
    let mut per_span: HashMap<SpanKey, HashMap<String, u64>> = HashMap::new();
    for e in p.entries.iter().filter(|e| !e.kind.is_off_cpu()) {
        let (Some(t), Some(s)) = (e.trace_id, e.span_id) else { continue };
        let name = top_frame(p, e).unwrap_or_else(|| "(no stack)".into());
        *per_span.entry((t, s)).or_default().entry(name).or_default() += e.count;
    }
    per_span
        .into_iter()
        .map(|(span, frames)| {
            let total: u64 = frames.values().sum();
            let mut frames: Vec<_> = frames.into_iter().collect();
            frames.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let pct = |c: u64| match 100.0 * c as f64 / total as f64 {
                p if p < 0.5 => "<1%".to_string(),
                p => format!("{p:.0}%"),
            };
            let text: Vec<String> = frames.iter().take(n).map(|(name, c)| format!("{name} {}", pct(*c))).collect();
            (span, text.join(", "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::aggregate::StackFrame;
    use crate::profile::{Frame, SampleKind};

    #[test]
    fn names_the_innermost_js_function_else_the_leaf() {
        let mut p = Profile::default();
        let sin = p.intern(Frame { kind: FrameKind::Native, name: "ieee754::sin".into(), file: None, line: None, column: None });
        let burn = p.intern(Frame { kind: FrameKind::Js, name: "burn".into(), file: Some("/app/a.js".into()), line: Some(3), column: None });
        let gc = p.intern(Frame { kind: FrameKind::Native, name: "Heap::Scavenge".into(), file: None, line: None, column: None });
        let sf = |frame| StackFrame { addr: frame as u64, frame, kernel: false };
        let e = |stack, count| Entry {
            kind: SampleKind::Cpu,
            stack,
            tid: 1,
            trace_id: Some([1; 16]),
            span_id: Some([2; 8]),
            attrs: vec![],
            count,
            weight_ns: 0,
            times: vec![],
        };
        p.push_entry(e(vec![sf(sin), sf(burn)], 3));
        p.push_entry(e(vec![sf(gc)], 1));
        let top = top_frames(&p, 3);
        assert_eq!(top[&([1; 16], [2; 8])], "burn (a.js:3) 75%, Heap::Scavenge 25%");
    }
}
