//! What a `--trace`, `--span` or `--attr` selection holds, as a summary of its own: the flame
//! graph and folded stacks show only the selection, so the table printed beside them must say
//! what they show (how many of the process's samples of the kind they draw, split by span), not
//! the whole process.

use super::kind::Kind;
use super::summary::{GroupBy, Summary};
use super::top::top_frames;
use thread_ctx_model::{Filter, Profile};

/// "selection (trace 4bf9…): 37 of 1,204 CPU samples" (the samples of `kind`: what the flame
/// graph and folded stacks draw), then the selection's table. Rows are the selection's spans
/// when it names a trace or a span (`by` otherwise); `hz` turns samples into CPU seconds, `top`
/// is the table's row limit (0: all). None when `filter` selects everything.
pub fn selection_summary(p: &Profile, filter: &Filter, kind: Kind, by: &GroupBy, hz: u32, top: usize) -> Option<String> {
    if filter.is_empty() {
        return None;
    }
    let by = if filter.trace_id.is_some() || filter.span_id.is_some() { GroupBy::Span } else { by.clone() };
    let mut selected = p.clone();
    selected.entries.retain(|e| filter.matches(e));
    let mut summary = Summary::new(by.clone());
    for e in &selected.entries {
        summary.add_entry(e);
    }
    let all = Filter::default();
    let mut out = format!("selection ({}): {} of {} {}\n", filter.describe(), kind.count(&selected, &all), kind.count(p, &all), kind.samples_name());
    if p.off_cpu_traced {
        summary.set_off_cpu_traced(true);
    }
    out += &summary.render_table(hz, top, Some(&top_frames(&selected, &by, 3)));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use thread_ctx_model::symbolized::{Entry, StackFrame};
    use thread_ctx_model::Frame;

    fn profile() -> Profile {
        let mut p = Profile::default();
        let burn = p.intern(Frame::js("burn", Some("/a.js"), Some(3), None));
        let e = |trace: u8, span: u8, count| Entry {
            weight: count * 10_000_000,
            ..Entry::test(
                vec![StackFrame { addr: 1, frame: burn, kernel: false }],
                Some((trace, span)),
                &[("http.route", &format!("/r{trace}"))],
                count,
            )
        };
        for entry in [e(1, 1, 5), e(1, 2, 3), e(2, 3, 40)] {
            p.push_entry(entry);
        }
        p
    }

    #[test]
    fn a_trace_selection_is_summarized_by_its_own_spans_and_counts_only_itself() {
        let p = profile();
        let trace = Filter::parse(Some(&"01".repeat(16)), None, &[]).unwrap();
        let text = selection_summary(&p, &trace, Kind::Cpu, &GroupBy::Attr("http.route".into()), 100, 10).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("selection (trace {}): 8 of 48 CPU samples", "01".repeat(16)), "{text}");
        assert!(lines[1].starts_with("SPAN"), "{text}");
        assert!(lines[2].starts_with(&format!("{} {}", "01".repeat(16), "01".repeat(8))) && lines[2].contains(" 5 "), "{text}");
        assert!(lines.iter().any(|l| l.starts_with(&format!("{} {}", "01".repeat(16), "02".repeat(8)))), "{text}");
        assert!(!text.contains(&"02".repeat(16)), "the other trace is not in the selection: {text}");
        let total = lines.iter().find(|l| l.starts_with("total")).unwrap();
        assert!(total.contains(" 8 ") && total.contains("100.0%"), "the selection's own total: {text}");
    }

    #[test]
    fn an_attribute_selection_keeps_the_grouping_asked_for_and_no_selection_prints_nothing() {
        let p = profile();
        let route = Filter::parse(None, None, &["http.route=/r2".to_string()]).unwrap();
        let text = selection_summary(&p, &route, Kind::Cpu, &GroupBy::Trace, 100, 10).unwrap();
        assert!(text.starts_with("selection (http.route=/r2): 40 of 48 CPU samples\nTRACE"), "{text}");
        assert_eq!(selection_summary(&p, &Filter::default(), Kind::Cpu, &GroupBy::Trace, 100, 10), None);
    }
}
