//! Per-trace/per-span aggregation of samples and the table `record` prints:
//! CPU samples per span, off-CPU time per span when traced, and (given them)
//! each span's top frames.

use crate::sampler::CtxState;
use crate::sampler::{Event, EventKind};
use crate::ctx_record::decode_attrs;
use crate::ids::hex;
use std::collections::HashMap;
use std::fmt::Write;

/// Distinct spans kept; later ones are counted in one overflow row so memory stays bounded.
pub const MAX_SPANS: usize = 100_000;

#[derive(Debug, Clone, Default)]
struct SpanRow {
    samples: u64,
    off_cpu_ns: u64,
    /// attrs-data of the span's latest sample (attributes can change during a span).
    attrs: Vec<u8>,
}

#[derive(Debug, Default)]
pub struct Summary {
    spans: HashMap<([u8; 16], [u8; 8]), SpanRow>,
    overflow_samples: u64,
    /// Samples without a span context, by what the sampler found.
    no_context: HashMap<CtxState, u64>,
    total: u64,
    /// Off-CPU time is traced: the table gets its column.
    off_cpu_traced: bool,
    off_cpu_no_context_ns: u64,
    off_cpu_overflow_ns: u64,
}

/// Per-span text shown under a span's row (e.g. its top frames).
pub type SpanNotes = HashMap<([u8; 16], [u8; 8]), String>;

/// What the table needs besides the samples.
pub struct RunInfo<'a> {
    pub pid: u32,
    pub hz: u32,
    pub cpus: usize,
    pub seconds: f64,
    pub dropped: u64,
    pub key_map: Option<&'a [String]>,
}

impl Summary {
    /// Shows the off-CPU column (even before any off-CPU event arrives).
    pub fn set_off_cpu_traced(&mut self, traced: bool) {
        self.off_cpu_traced = traced;
    }

    pub fn add(&mut self, s: &Event) {
        if s.kind == EventKind::OffCpu {
            self.add_off_cpu(s);
            return;
        }
        self.total += 1;
        let Some((trace, span, _)) = s.span() else {
            *self.no_context.entry(s.state).or_default() += 1;
            return;
        };
        let full = self.spans.len() >= MAX_SPANS;
        match self.spans.get_mut(&(trace, span)) {
            Some(row) => {
                row.samples += 1;
                if row.attrs != s.attrs {
                    row.attrs.clone_from(&s.attrs);
                }
            }
            None if full => self.overflow_samples += 1,
            None => {
                self.spans.insert((trace, span), SpanRow { samples: 1, off_cpu_ns: 0, attrs: s.attrs.clone() });
            }
        }
    }

    fn add_off_cpu(&mut self, s: &Event) {
        self.off_cpu_traced = true;
        let Some((trace, span, _)) = s.span() else {
            self.off_cpu_no_context_ns += s.duration_ns;
            return;
        };
        let full = self.spans.len() >= MAX_SPANS;
        match self.spans.get_mut(&(trace, span)) {
            Some(row) => row.off_cpu_ns += s.duration_ns,
            None if full => self.off_cpu_overflow_ns += s.duration_ns,
            None => {
                self.spans.insert((trace, span), SpanRow { samples: 0, off_cpu_ns: s.duration_ns, attrs: s.attrs.clone() });
            }
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn no_context(&self) -> u64 {
        self.no_context.values().sum()
    }

    pub fn render(&self, info: &RunInfo) -> String {
        self.render_with(info, None)
    }

    /// The table, with `notes` (e.g. top frames) on an indented line under each span they name.
    pub fn render_with(&self, info: &RunInfo, notes: Option<&SpanNotes>) -> String {
        let mut out = String::new();
        let off = self.off_cpu_traced;
        let ms = |ns: u64| if off { format!("  {:>10.1}", ns as f64 / 1e6) } else { String::new() };
        let pct = |n: u64| if self.total == 0 { 0.0 } else { 100.0 * n as f64 / self.total as f64 };
        let cpu_s = |n: u64| n as f64 / info.hz as f64;
        let _ = writeln!(
            out,
            "pid {}: {} samples at {} Hz on {} CPUs over {:.1} s (~{:.2} s on CPU), {} dropped (ring buffer full)",
            info.pid, self.total, info.hz, info.cpus, info.seconds, cpu_s(self.total), info.dropped
        );
        let off_head = if off { format!("  {:>10}", "OFF-CPU ms") } else { String::new() };
        let _ = writeln!(out, "{:<32}  {:<16}  {:>8}  {:>6}  {:>8}{off_head}  ATTRS", "TRACE ID", "SPAN ID", "SAMPLES", "%", "CPU s");
        let mut rows: Vec<_> = self.spans.iter().collect();
        rows.sort_by(|a, b| b.1.samples.cmp(&a.1.samples).then(b.1.off_cpu_ns.cmp(&a.1.off_cpu_ns)).then(a.0.cmp(b.0)));
        for ((trace, span), row) in rows {
            let (attrs, _) = decode_attrs(&row.attrs, info.key_map);
            let attrs: Vec<String> = attrs
                .iter()
                .map(|a| format!("{}={}", a.key.clone().unwrap_or_else(|| format!("#{}", a.key_index)), a.value))
                .collect();
            let _ = writeln!(
                out,
                "{:<32}  {:<16}  {:>8}  {:>5.1}%  {:>8.2}{}  {}",
                hex(trace),
                hex(span),
                row.samples,
                pct(row.samples),
                cpu_s(row.samples),
                ms(row.off_cpu_ns),
                attrs.join(" ")
            );
            if let Some(note) = notes.and_then(|n| n.get(&(*trace, *span))) {
                let _ = writeln!(out, "    top: {note}");
            }
        }
        if self.overflow_samples > 0 || self.off_cpu_overflow_ns > 0 {
            let n = self.overflow_samples;
            let label = format!("(other spans: more than {MAX_SPANS})");
            let _ = writeln!(out, "{label:<50}  {n:>8}  {:>5.1}%  {:>8.2}{}", pct(n), cpu_s(n), ms(self.off_cpu_overflow_ns));
        }
        let none = self.no_context();
        let _ = writeln!(out, "{:<50}  {:>8}  {:>5.1}%  {:>8.2}{}", "(no context)", none, pct(none), cpu_s(none), ms(self.off_cpu_no_context_ns));
        if none > 0 {
            let mut why: Vec<_> = self.no_context.iter().collect();
            why.sort_by_key(|(s, _)| **s);
            let why: Vec<String> = why.iter().map(|(s, n)| format!("{} {}", s.name(), n)).collect();
            let _ = writeln!(out, "  no context because: {}", why.join(", "));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctx_record::Header;

    fn sample(state: CtxState, trace: u8, span: u8) -> Event {
        Event {
            kind: EventKind::Cpu,
            time_ns: 0,
            pid: 1,
            tid: 1,
            cpu: 0,
            state,
            record_addr: 0x1000,
            header: Some(Header { trace_id: [trace; 16], span_id: [span; 8], valid: 1, flags: 1, attrs_size: 0 }),
            attrs: vec![],
            user_stack: Err(-2),
            kernel_stack: Err(-2),
            duration_ns: 0,
            preempted: false,
        }
    }

    #[test]
    fn groups_by_span_and_counts_no_context() {
        let mut s = Summary::default();
        for _ in 0..3 {
            s.add(&sample(CtxState::Valid, 1, 2));
        }
        s.add(&sample(CtxState::Valid, 3, 4));
        s.add(&sample(CtxState::Invalid, 0, 0));
        s.add(&sample(CtxState::Torn, 5, 6));
        assert_eq!((s.total(), s.no_context()), (6, 2));
        let text = s.render(&RunInfo { pid: 1, hz: 49, cpus: 2, seconds: 1.0, dropped: 7, key_map: None });
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("6 samples") && lines[0].contains("7 dropped"), "{text}");
        assert!(lines[2].starts_with(&"01".repeat(16)) && lines[2].contains(" 3 "), "{text}");
        assert!(lines[3].starts_with(&"03".repeat(16)), "{text}");
        assert!(lines[4].starts_with("(no context)") && lines[4].contains("33.3%"), "{text}");
        assert!(lines[5].contains("not_valid 1") && lines[5].contains("torn 1"), "{text}");
        assert!(!text.contains("OFF-CPU"), "no off-CPU column unless traced: {text}");
    }

    #[test]
    fn off_cpu_time_goes_to_the_span_published_at_switch_out_and_top_frames_follow_rows() {
        let mut s = Summary::default();
        s.add(&sample(CtxState::Valid, 1, 2));
        let mut blocked = sample(CtxState::Valid, 3, 4);
        blocked.kind = EventKind::OffCpu;
        blocked.duration_ns = 50_000_000;
        s.add(&blocked);
        let mut idle = sample(CtxState::Invalid, 0, 0);
        idle.kind = EventKind::OffCpu;
        idle.duration_ns = 7_000_000;
        s.add(&idle);
        assert_eq!(s.total(), 1, "off-CPU events are not CPU samples");
        let notes: SpanNotes = [(([1; 16], [2; 8]), "burn (a.js:3) 100%".to_string())].into();
        let text = s.render_with(&RunInfo { pid: 1, hz: 49, cpus: 2, seconds: 1.0, dropped: 0, key_map: None }, Some(&notes));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].contains("OFF-CPU ms"), "{text}");
        assert!(lines[2].starts_with(&"01".repeat(16)) && lines[2].contains("       0.0"), "{text}");
        assert_eq!(lines[3], "    top: burn (a.js:3) 100%", "{text}");
        assert!(lines[4].starts_with(&"03".repeat(16)) && lines[4].contains("      50.0"), "{text}");
        assert!(lines[5].starts_with("(no context)") && lines[5].contains("       7.0"), "{text}");
    }
}
