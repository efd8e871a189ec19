//! The table `record` prints: CPU samples grouped by what people ask about
//! ([`GroupBy`]: a record attribute such as `http.route`, the trace, or the
//! span instance), the `--top N` groups with an "other" row for the rest, the
//! samples without a span and why, the off-CPU time per group when traced
//! (blocked apart from preempted, and added up in the total row), and (given them) each group's top frames. Memory stays bounded however long
//! the recording: past [`MAX_GROUPS`] groups, new ones are counted together.
//! With allocations traced, the allocation table ([`AllocTable`]) follows.
//! Samples come one by one as the decode stage made them ([`Summary::add`]:
//! their attributes named once, allocations weighed in the bytes they stand
//! for, and why a sample had no span) or aggregated from a profile
//! ([`Summary::add_entry`]: a profile a Collector received, which does not
//! say why a sample had no span).

use super::alloc_summary::AllocTable;
pub use super::group::{Group, GroupBy, MAX_GROUPS};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use thread_ctx_discovery::container::Placement;
use thread_ctx_discovery::ids::hex;
use thread_ctx_model::CtxState;
use thread_ctx_model::{Entry, Sample, SampleKind};

/// Distinct (group, trace or span) pairs kept to count each group's traces or spans.
pub const MAX_MEMBERS: usize = 200_000;

/// The attribute most services are asked about, and what to do when no span carries it.
pub const ROUTE_KEY: &str = "http.route";
pub const NO_ROUTE_HINT: &str = "no span carried http.route: the service's instrumentation sets no route. \
     An instrumentation of its web framework sets it (Express: @opentelemetry/instrumentation-express; \
     Fastify: @fastify/otel, which @opentelemetry/auto-instrumentations-node 0.81 does not include), \
     or span.setAttribute('http.route', …) in the request's span";

#[derive(Debug, Clone, Default)]
struct Row {
    samples: u64,
    off_cpu: OffCpu,
    /// Span rows: the attributes of the latest sample (attributes can change during a span).
    attrs: Vec<(String, String)>,
}

#[derive(Debug)]
pub struct Summary {
    by: GroupBy,
    rows: HashMap<Group, Row>,
    /// Traces (by attribute) or spans (by trace) of each group's CPU samples, for the count
    /// column: counted over CPU samples only, so that it never exceeds the SAMPLES beside it.
    members: HashSet<(Group, [u8; 16], [u8; 8])>,
    members_complete: bool,
    overflow: Row,
    /// Samples without a span context, by what the sampler found.
    no_context: HashMap<CtxState, u64>,
    /// Samples without a span context whose reason is not known (profile entries).
    no_context_unexplained: u64,
    total: u64,
    /// Off-CPU time is traced: the table gets its column.
    off_cpu_traced: bool,
    off_cpu_no_context: OffCpu,
    /// Allocations are traced: the allocation table follows the CPU one.
    alloc_traced: bool,
    /// The process's mean heap sampling interval (bytes), as the allocation table says it.
    alloc_interval: Option<u64>,
    alloc: AllocTable,
}

/// Off-CPU time, split by why the thread was off the CPU: it blocked (sleep, I/O, a lock), or it
/// was preempted while runnable (it waited for a CPU: on a busy machine, a CPU-bound span's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct OffCpu {
    blocked_ns: u64,
    preempted_ns: u64,
}

impl OffCpu {
    fn of(ns: u64, preempted: bool) -> OffCpu {
        if preempted {
            OffCpu { blocked_ns: 0, preempted_ns: ns }
        } else {
            OffCpu { blocked_ns: ns, preempted_ns: 0 }
        }
    }

    fn add(&mut self, o: OffCpu) {
        self.blocked_ns += o.blocked_ns;
        self.preempted_ns += o.preempted_ns;
    }

    fn total_ns(self) -> u64 {
        self.blocked_ns + self.preempted_ns
    }
}

/// Text shown under a group's row (its top frames).
pub type GroupNotes = HashMap<Group, String>;

/// What the table needs besides the samples.
pub struct RunInfo<'a> {
    pub pid: u32,
    /// Only this thread was recorded.
    pub tid: Option<u32>,
    pub hz: u32,
    pub cpus: usize,
    pub seconds: f64,
    pub dropped: u64,
    pub service_name: Option<&'a str>,
    /// Where the process runs, when in a PID namespace or a container of its own.
    pub placement: Option<&'a Placement>,
    /// Rows shown before the "other" row (0: all).
    pub top: usize,
}

impl Summary {
    pub fn new(by: GroupBy) -> Summary {
        Summary {
            by,
            rows: HashMap::new(),
            members: HashSet::new(),
            members_complete: true,
            overflow: Row::default(),
            no_context: HashMap::new(),
            no_context_unexplained: 0,
            total: 0,
            off_cpu_traced: false,
            off_cpu_no_context: OffCpu::default(),
            alloc_traced: false,
            alloc_interval: None,
            alloc: AllocTable::default(),
        }
    }

    pub fn by(&self) -> &GroupBy {
        &self.by
    }

    /// Shows the off-CPU column (even before any off-CPU event arrives).
    pub fn set_off_cpu_traced(&mut self, traced: bool) {
        self.off_cpu_traced = traced;
    }

    /// Shows the allocation table (even before any allocation sample arrives, or not at all);
    /// its samples were scaled at `interval` (None: the package's default).
    pub fn set_alloc_traced(&mut self, traced: bool, interval: Option<u64>) {
        self.alloc_traced = traced;
        self.alloc_interval = interval;
    }

    /// The allocation table.
    pub fn alloc(&self) -> &AllocTable {
        &self.alloc
    }

    /// Adds a sample as the decode stage made it (its weight, for an allocation, the bytes
    /// it stands for), counting why it had no span when it had none.
    pub fn add(&mut self, s: &Sample) {
        let group = self.by.group_of_sample(s);
        self.count(s.kind, group, ids(s.trace_id, s.span_id), &s.attrs, 1, s.weight, Some(s.ctx_state));
    }

    /// Adds a profile entry (`count` samples of one kind): what [`Summary::add`] does for each
    /// of its samples, without the reason a sample had no span.
    pub fn add_entry(&mut self, e: &Entry) {
        self.count(e.kind, self.by.group_of_entry(e), ids(e.trace_id, e.span_id), &e.attrs, e.count, e.weight, None);
    }

    /// `count` samples of `kind` weighing `weight` in all, in `group` (None: no span, for `why`).
    #[allow(clippy::too_many_arguments)]
    fn count(
        &mut self,
        kind: SampleKind,
        group: Option<Group>,
        ids: Option<([u8; 16], [u8; 8])>,
        attrs: &[(String, String)],
        count: u64,
        weight: u64,
        why: Option<CtxState>,
    ) {
        if kind.is_alloc() {
            self.alloc_traced = true;
            self.alloc.add(group, ids, count, weight);
            return;
        }
        let off_cpu = kind.is_off_cpu();
        self.off_cpu_traced |= off_cpu;
        if !off_cpu {
            self.total += count;
        }
        let Some(group) = group else {
            match (off_cpu, why) {
                (true, _) => self.off_cpu_no_context.add(OffCpu::of(weight, kind == SampleKind::Preempted)),
                (false, Some(state)) => *self.no_context.entry(state).or_default() += count,
                (false, None) => self.no_context_unexplained += count,
            }
            return;
        };
        let by_span = matches!(self.by, GroupBy::Span);
        let row = if off_cpu {
            self.count_in(group, None, 0, OffCpu::of(weight, kind == SampleKind::Preempted))
        } else {
            self.count_in(group, ids, count, OffCpu::default())
        };
        if by_span && row.attrs != attrs {
            row.attrs = attrs.to_vec();
        }
    }

    /// Counts CPU `samples` and `off_cpu` time in `group`'s row (the overflow row past
    /// [`MAX_GROUPS`]), noting the trace and span behind the samples; returns the row.
    fn count_in(&mut self, group: Group, ids: Option<([u8; 16], [u8; 8])>, samples: u64, off_cpu: OffCpu) -> &mut Row {
        if let (Some((trace, span)), false) = (ids, matches!(group, Group::Span(..))) {
            self.add_member(&group, trace, span);
        }
        let row =
            if self.rows.len() < MAX_GROUPS || self.rows.contains_key(&group) { self.rows.entry(group).or_default() } else { &mut self.overflow };
        row.samples += samples;
        row.off_cpu.add(off_cpu);
        row
    }

    fn add_member(&mut self, group: &Group, trace: [u8; 16], span: [u8; 8]) {
        // By trace, a member is a span; by attribute value, a trace.
        let span = if matches!(group, Group::Trace(_)) { span } else { [0; 8] };
        let key = (group.clone(), trace, span);
        if self.members.contains(&key) {
            return;
        }
        if self.members.len() >= MAX_MEMBERS {
            self.members_complete = false;
            return;
        }
        self.members.insert(key);
    }

    /// CPU samples.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// CPU samples without a span context.
    pub fn no_context(&self) -> u64 {
        self.no_context.values().sum::<u64>() + self.no_context_unexplained
    }

    /// By an attribute: some sample with a span carried it (false for the other groupings).
    pub fn key_carried(&self) -> bool {
        matches!(self.by, GroupBy::Attr(_))
            && (self.rows.keys().any(|g| matches!(g, Group::Value(Some(_)))) || self.overflow.samples > 0 || self.alloc.carried())
    }

    /// The recording's line, then the table, with `notes` (top frames) under the groups they name.
    pub fn render(&self, info: &RunInfo, notes: Option<&GroupNotes>) -> String {
        let mut out = String::new();
        let cpu_s = |n: u64| n as f64 / info.hz.max(1) as f64;
        let mut who = match (info.tid, info.service_name) {
            (Some(tid), _) => format!("thread {tid} of pid {}", info.pid),
            (None, Some(s)) => format!("pid {} ({s})", info.pid),
            (None, None) => format!("pid {}", info.pid),
        };
        if let Some(place) = info.placement.map(placement_text).filter(|t| !t.is_empty()) {
            who += &format!(" [{place}]");
        }
        let _ = writeln!(
            out,
            "{who}: {} CPU samples at {} Hz on {} CPUs over {:.1} s (~{:.2} s on CPU), {} dropped (ring buffer full)",
            self.total,
            info.hz,
            info.cpus,
            info.seconds,
            cpu_s(self.total),
            info.dropped
        );
        out.push_str(&self.render_table(info.hz, info.top, notes));
        out
    }

    /// The table: a header, the `top` groups (0: all) with their notes, the rest in one
    /// "other" row, the samples without a span, the total, and a line of facts. `hz` turns
    /// samples into CPU seconds.
    pub fn render_table(&self, hz: u32, top: usize, notes: Option<&GroupNotes>) -> String {
        let mut out = String::new();
        let pct = |n: u64| if self.total == 0 { 0.0 } else { 100.0 * n as f64 / self.total as f64 };
        let cpu_s = |n: u64| n as f64 / hz.max(1) as f64;
        let off = self.off_cpu_traced;

        let mut rows: Vec<(&Group, &Row)> = self.rows.iter().collect();
        rows.sort_by(|a, b| b.1.samples.cmp(&a.1.samples).then(b.1.off_cpu.total_ns().cmp(&a.1.off_cpu.total_ns())).then(a.0.cmp(b.0)));
        let shown = if top == 0 { rows.len() } else { rows.len().min(top) };
        let (head, rest) = rows.split_at(shown);

        let member_counts = self.member_counts();
        let (member_head, plus) = match self.by {
            GroupBy::Attr(_) => ("TRACES", if self.members_complete { "" } else { "+" }),
            GroupBy::Trace => ("SPANS", if self.members_complete { "" } else { "+" }),
            GroupBy::Span => ("", ""),
        };
        let labels: Vec<String> = head.iter().map(|(g, _)| self.label(g)).collect();
        let width = labels.iter().map(|l| l.chars().count()).chain([self.by.name().len(), 24]).max().unwrap_or(24).min(64);
        let off_head = if off { format!("  {:>10}  {:>12}", "BLOCKED ms", "PREEMPTED ms") } else { String::new() };
        let ms =
            |o: OffCpu| if off { format!("  {:>10.1}  {:>12.1}", o.blocked_ns as f64 / 1e6, o.preempted_ns as f64 / 1e6) } else { String::new() };
        let count_col = |n: Option<usize>| match (member_head.is_empty(), n) {
            (true, _) => String::new(),
            (false, Some(n)) => format!("  {:>7}", format!("{n}{plus}")),
            (false, None) => format!("  {:>7}", ""),
        };
        let tail = if matches!(self.by, GroupBy::Span) { "  ATTRS" } else { "" };
        let _ = writeln!(
            out,
            "{:<width$}  {:>8}  {:>6}  {:>8}{}{off_head}{tail}",
            self.by.name().to_uppercase(),
            "SAMPLES",
            "%",
            "CPU s",
            if member_head.is_empty() { String::new() } else { format!("  {member_head:>7}") },
        );
        let line = |out: &mut String, label: &str, r: &Row, members: Option<usize>, extra: &str| {
            let label = truncate(label, width);
            let text = format!(
                "{label:<width$}  {:>8}  {:>5.1}%  {:>8.2}{}{}{extra}",
                r.samples,
                pct(r.samples),
                cpu_s(r.samples),
                count_col(members),
                ms(r.off_cpu)
            );
            let _ = writeln!(out, "{}", text.trim_end());
        };
        for ((group, row), label) in head.iter().zip(&labels) {
            let extra = match self.by {
                GroupBy::Span => format!("  {}", self.attrs_text(row)),
                _ => String::new(),
            };
            line(&mut out, label, row, member_counts.get(*group).copied(), extra.trim_end());
            if let Some(note) = notes.and_then(|n| n.get(*group)) {
                let _ = writeln!(out, "    top: {note}");
            }
        }
        let mut other = self.overflow.clone();
        for (_, r) in rest {
            other.samples += r.samples;
            other.off_cpu.add(r.off_cpu);
        }
        let other_groups = rest.len() + usize::from(self.overflow.samples + self.overflow.off_cpu.total_ns() > 0);
        if other_groups > 0 {
            let more = if self.overflow.samples + self.overflow.off_cpu.total_ns() > 0 {
                format!("(other: {} more, and more past {MAX_GROUPS})", rest.len())
            } else {
                format!("(other: {} more)", rest.len())
            };
            line(&mut out, &more, &other, None, "");
        }
        let none = Row { samples: self.no_context(), off_cpu: self.off_cpu_no_context, ..Row::default() };
        line(&mut out, "(no span)", &none, None, "");
        // Every row's off-CPU time, the "other" and "(no span)" rows' included.
        let mut off_cpu = self.off_cpu_no_context;
        for r in self.rows.values().chain([&self.overflow]) {
            off_cpu.add(r.off_cpu);
        }
        let all = Row { samples: self.total, off_cpu, ..Row::default() };
        line(&mut out, "total", &all, None, "");

        let with_span = self.total - none.samples;
        let mut facts = vec![format!("{:.1}% of CPU samples carry a span", pct(with_span))];
        if let GroupBy::Attr(key) = &self.by {
            let without: u64 = self.rows.get(&Group::Value(None)).map_or(0, |r| r.samples);
            let carried = with_span.saturating_sub(without);
            let share = if with_span == 0 { 0.0 } else { 100.0 * carried as f64 / with_span as f64 };
            facts.push(format!("{share:.1}% of those carry {key}"));
        }
        if !self.no_context.is_empty() {
            let mut why: Vec<_> = self.no_context.iter().collect();
            why.sort_by_key(|(s, _)| **s);
            let why: Vec<String> = why.iter().map(|(s, n)| format!("{} {n}", s.name())).collect();
            facts.push(format!("no span because: {}", why.join(", ")));
        }
        let _ = writeln!(out, "{}.", facts.join("; "));
        if self.by == GroupBy::Attr(ROUTE_KEY.into()) && with_span > 0 && !self.key_carried() {
            let _ = writeln!(out, "Note: {NO_ROUTE_HINT}.");
        }
        if self.alloc_traced {
            out.push('\n');
            out.push_str(&self.alloc.render(&self.by, top, self.alloc_interval, &|g| self.label(g)));
        }
        out
    }

    /// Distinct traces (by attribute) or spans (by trace) per group.
    fn member_counts(&self) -> HashMap<&Group, usize> {
        let mut counts = HashMap::new();
        for (g, _, _) in &self.members {
            *counts.entry(g).or_default() += 1;
        }
        counts
    }

    fn label(&self, g: &Group) -> String {
        match g {
            Group::Span(t, s) => format!("{} {}", hex(t), hex(s)),
            Group::Trace(t) => hex(t),
            Group::Value(Some(v)) if v.is_empty() => "\"\"".into(),
            Group::Value(Some(v)) => v.replace(['\n', '\r', '\t'], " "),
            Group::Value(None) => format!("(no {})", self.by.name()),
        }
    }

    fn attrs_text(&self, row: &Row) -> String {
        row.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }
}

/// The trace and span a sample or entry belongs to, as [`GroupBy::group_of`] reads them.
fn ids(trace_id: Option<[u8; 16]>, span_id: Option<[u8; 8]>) -> Option<([u8; 16], [u8; 8])> {
    match (trace_id, span_id) {
        (None, None) => None,
        (t, s) => Some((t.unwrap_or([0; 16]), s.unwrap_or([0; 8]))),
    }
}

/// `pid 1 in its PID namespace, container 5e1c0a7b9d2f, pod 7d4f5c2a-…`: what the summary's first
/// line says of a process in a container (the container id shortened as `docker ps` shows it).
fn placement_text(p: &Placement) -> String {
    let mut parts = Vec::new();
    if let Some(vpid) = p.namespace_pid {
        parts.push(format!("pid {vpid} in its PID namespace"));
    }
    if let Some(id) = &p.container.id {
        parts.push(format!("container {}", &id[..id.len().min(12)]));
    }
    if let Some(uid) = &p.container.pod_uid {
        parts.push(format!("pod {uid}"));
    }
    parts.join(", ")
}

/// At most `width` characters, an ellipsis marking a cut.
fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
    t.push('…');
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use thread_ctx_model::sample::Attrs;

    /// A CPU sample as the decode stage makes it: a span only when the record was valid and had ids.
    fn sample(state: CtxState, trace: u8, span: u8, route: Option<&str>) -> Sample<'static> {
        let spanned = state == CtxState::Valid && (trace, span) != (0, 0);
        let attrs: Vec<(String, String)> = route.filter(|_| spanned).map(|r| ("http.route".to_string(), r.to_string())).into_iter().collect();
        Sample {
            kind: SampleKind::Cpu,
            time_ns: 0,
            tid: 1,
            trace_id: spanned.then_some([trace; 16]),
            span_id: spanned.then_some([span; 8]),
            flags: 1,
            attrs: Attrs::from(attrs),
            ctx_state: state,
            user_stack: &[],
            kernel_stack: &[],
            js_frames: &[],
            leaf_words: &[],
            weight: 10_000_000,
        }
    }

    /// An off-CPU interval of `ms` milliseconds.
    fn off_cpu(state: CtxState, trace: u8, span: u8, ms: u64, preempted: bool) -> Sample<'static> {
        let kind = if preempted { SampleKind::Preempted } else { SampleKind::Blocked };
        Sample { kind, weight: ms * 1_000_000, ..sample(state, trace, span, None) }
    }

    fn info(top: usize) -> RunInfo<'static> {
        RunInfo { pid: 1, tid: None, hz: 49, cpus: 2, seconds: 1.0, dropped: 7, service_name: Some("shop"), placement: None, top }
    }

    #[test]
    fn groups_by_attribute_with_trace_counts_and_no_span_reasons() {
        let km = ["http.route".to_string()];
        let mut s = Summary::new(GroupBy::default_for(Some(&km)));
        assert_eq!(s.by(), &GroupBy::Attr("http.route".into()));
        for (trace, route) in [(1, "/a"), (1, "/a"), (2, "/a"), (3, "/b")] {
            s.add(&sample(CtxState::Valid, trace, trace, Some(route)));
        }
        s.add(&sample(CtxState::Valid, 4, 4, None));
        s.add(&sample(CtxState::Invalid, 0, 0, None));
        s.add(&sample(CtxState::Torn, 5, 6, None));
        assert_eq!((s.total(), s.no_context()), (7, 2));
        let text = s.render(&info(10), None);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("pid 1 (shop): 7 CPU samples") && lines[0].contains("7 dropped"), "{text}");
        assert!(lines[1].starts_with("HTTP.ROUTE") && lines[1].contains("TRACES"), "{text}");
        let cols = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(cols(lines[2]), ["/a", "3", "42.9%", "0.06", "2"], "{text}");
        assert_eq!(cols(lines[3])[..2], ["(no", "http.route)"], "{text}");
        assert_eq!(cols(lines[4])[..3], ["/b", "1", "14.3%"], "{text}");
        assert!(lines[5].starts_with("(no span)") && lines[5].contains("28.6%"), "{text}");
        assert!(lines[6].starts_with("total") && lines[6].contains("100.0%"), "{text}");
        assert_eq!(lines[7], "71.4% of CPU samples carry a span; 80.0% of those carry http.route; no span because: not_valid 1, torn 1.");
    }

    #[test]
    fn top_n_folds_the_rest_into_one_other_row() {
        let mut s = Summary::new(GroupBy::Trace);
        for t in 1..=20u8 {
            for _ in 0..t {
                s.add(&sample(CtxState::Valid, t, t, None));
            }
        }
        let text = s.render(&info(3), None);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].starts_with(&"14".repeat(16)) && lines[2].contains(" 20 "), "{text}");
        assert!(lines[4].starts_with(&"12".repeat(16)), "{text}");
        let other: Vec<&str> = lines[5].split_whitespace().collect();
        assert_eq!(other[..4], ["(other:", "17", "more)", &(1..=17).sum::<u64>().to_string()], "{text}");
        assert_eq!(lines.len(), 9, "three rows, other, no span, total, facts: {text}");
        assert_eq!(s.render(&info(0), None).lines().count(), 2 + 20 + 3, "--top 0 shows every row");
    }

    #[test]
    fn by_span_shows_attributes_and_off_cpu_goes_to_the_span_published_at_switch_out() {
        let mut s = Summary::new(GroupBy::Span);
        s.add(&sample(CtxState::Valid, 1, 2, Some("/x")));
        s.add(&off_cpu(CtxState::Valid, 3, 4, 50, false));
        s.add(&off_cpu(CtxState::Valid, 3, 4, 4, true));
        s.add(&off_cpu(CtxState::Invalid, 0, 1, 7, false));
        assert_eq!(s.total(), 1, "off-CPU events are not CPU samples");
        let notes: GroupNotes = [(Group::Span([1; 16], [2; 8]), "burn (a.js:3) 100%".to_string())].into();
        let text = s.render(&info(10), Some(&notes));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].contains("BLOCKED ms  PREEMPTED ms") && lines[1].ends_with("ATTRS"), "{text}");
        assert!(lines[2].starts_with(&format!("{} {}", "01".repeat(16), "02".repeat(8))), "{text}");
        assert!(lines[2].contains("       0.0           0.0  http.route=/x"), "{text}");
        assert_eq!(lines[3], "    top: burn (a.js:3) 100%", "{text}");
        assert!(lines[4].starts_with(&"03".repeat(16)) && lines[4].ends_with("      50.0           4.0"), "{text}");
        assert!(lines[5].starts_with("(no span)") && lines[5].ends_with("       7.0           0.0"), "{text}");
        // The total row adds up every row's off-CPU time, as it does their samples.
        assert!(lines[6].starts_with("total") && lines[6].ends_with("      57.0           4.0"), "{text}");
    }

    #[test]
    fn the_total_row_adds_up_off_cpu_time_of_shown_other_and_unspanned_rows() {
        let mut s = Summary::new(GroupBy::Trace);
        for trace in 1..=5u8 {
            s.add(&off_cpu(CtxState::Valid, trace, trace, u64::from(trace), trace % 2 == 0));
        }
        let text = s.render_table(49, 2, None);
        let total = text.lines().find(|l| l.starts_with("total")).unwrap();
        // Blocked: traces 1, 3, 5 (9 ms); preempted: 2, 4 (6 ms); --top 2 shows two of them.
        assert!(total.ends_with("       9.0           6.0"), "{text}");
    }

    #[test]
    fn entries_count_as_their_samples_would() {
        let (mut by_sample, mut by_entry) = (Summary::new(GroupBy::Attr("http.route".into())), Summary::new(GroupBy::Attr("http.route".into())));
        let entry = |trace: Option<u8>, route: Option<&str>, count| {
            let attrs: Vec<(&str, &str)> = route.map(|r| ("http.route", r)).into_iter().collect();
            Entry::test(vec![], trace.map(|t| (t, t)), &attrs, count)
        };
        for (trace, route, count) in
            [(Some(1), Some("/a"), 3), (Some(2), Some("/a"), 1), (Some(3), Some("/b"), 2), (Some(4), None, 1), (None, None, 2)]
        {
            by_entry.add_entry(&entry(trace, route, count));
            for _ in 0..count {
                let state = if trace.is_some() { CtxState::Valid } else { CtxState::Invalid };
                by_sample.add(&sample(state, trace.unwrap_or(0), trace.unwrap_or(0), route));
            }
        }
        assert_eq!((by_entry.total(), by_entry.no_context()), (9, 2));
        let (samples, entries) = (by_sample.render_table(49, 10, None), by_entry.render_table(49, 10, None));
        assert_eq!(entries.lines().collect::<Vec<_>>()[..6], samples.lines().collect::<Vec<_>>()[..6], "{entries}\n{samples}");
        assert!(samples.ends_with("; no span because: not_valid 2.\n"), "{samples}");
        assert!(entries.ends_with("77.8% of CPU samples carry a span; 85.7% of those carry http.route.\n"), "a profile does not say why: {entries}");
        let mut by_span = Summary::new(GroupBy::Span);
        by_span.add_entry(&entry(Some(1), Some("/a"), 3));
        assert!(by_span.render_table(49, 10, None).lines().nth(1).unwrap().ends_with("  http.route=/a"), "span rows show their attributes");
    }

    #[test]
    fn entries_and_samples_land_in_the_same_group() {
        let s = sample(CtxState::Valid, 1, 2, Some("/x"));
        let entry = Entry::test(vec![], Some((1, 2)), &[("http.route", "/x")], 1);
        for by in [GroupBy::Span, GroupBy::Trace, GroupBy::Attr("http.route".into()), GroupBy::Attr("missing".into())] {
            assert_eq!(by.group_of_sample(&s), by.group_of_entry(&entry), "{by:?}");
        }
        assert_eq!(GroupBy::parse("span"), Ok(GroupBy::Span));
        assert!(GroupBy::parse(" ").is_err());
    }

    /// The TRACES column counts the traces of the row's CPU samples: off-CPU intervals of other
    /// traces add time to the row, not traces, so the column never exceeds SAMPLES beside it.
    #[test]
    fn traces_are_counted_over_cpu_samples_only() {
        let mut s = Summary::new(GroupBy::Attr("http.route".into()));
        s.add(&sample(CtxState::Valid, 1, 1, Some("/a")));
        for trace in 2..=9 {
            let mut idle = off_cpu(CtxState::Valid, trace, trace, 5, false);
            idle.attrs = Attrs::from(vec![("http.route".to_string(), "/a".to_string())]);
            s.add(&idle);
        }
        let text = s.render_table(49, 10, None);
        let row: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row[..5], ["/a", "1", "100.0%", "0.02", "1"], "{text}");
        assert_eq!(row[5], "40.0", "the off-CPU time of all nine traces is the row's: {text}");
    }

    /// By http.route, when no span carried one: the table says what sets it, for the web
    /// frameworks people ask about.
    #[test]
    fn no_route_on_any_span_says_how_to_set_one() {
        let mut s = Summary::new(GroupBy::Attr(ROUTE_KEY.into()));
        s.add(&sample(CtxState::Valid, 1, 1, None));
        let text = s.render_table(49, 10, None);
        assert!(text.contains("no span carried http.route") && text.contains("@fastify/otel"), "{text}");
        s.add(&sample(CtxState::Valid, 2, 2, Some("/a")));
        assert!(!s.render_table(49, 10, None).contains("@fastify/otel"), "one span with a route: no note");
        let mut none = Summary::new(GroupBy::Attr(ROUTE_KEY.into()));
        none.add(&sample(CtxState::Invalid, 0, 0, None));
        assert!(!none.render_table(49, 10, None).contains("@fastify/otel"), "no span at all: nothing to say of routes");
    }

    /// An allocation sample counts the bytes the decode stage weighed it at: the summary does
    /// not scale it again.
    #[test]
    fn allocations_count_their_weight() {
        let mut s = Summary::new(GroupBy::Trace);
        s.add(&Sample { kind: SampleKind::Alloc, weight: 600_000, ..sample(CtxState::Valid, 1, 1, None) });
        assert_eq!(s.alloc().total(), crate::alloc_summary::AllocRow { samples: 1, bytes: 600_000 });
        assert_eq!(s.total(), 0, "not a CPU sample");
    }
}
