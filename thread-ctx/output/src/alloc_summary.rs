//! The summary's allocation table (`record --alloc`, and `report` of what a
//! Collector received): allocation samples grouped like the CPU table
//! ([`GroupBy`]: a record attribute, the trace or the span), in the bytes
//! they stand for, with the samples without a span and a total row. Its own
//! table, not more columns of the CPU one: its rows are ordered by bytes, and
//! a route can allocate much while it takes little CPU. Memory stays bounded
//! like the CPU table's: past [`MAX_GROUPS`] groups, new ones are counted together.

use super::group::{Group, GroupBy, MAX_GROUPS};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocRow {
    pub samples: u64,
    pub bytes: u64,
}

impl AllocRow {
    fn add(&mut self, samples: u64, bytes: u64) {
        self.samples += samples;
        self.bytes = self.bytes.saturating_add(bytes);
    }
}

/// Allocation samples by group.
#[derive(Debug, Default)]
pub struct AllocTable {
    rows: HashMap<Group, AllocRow>,
    overflow: AllocRow,
    no_span: AllocRow,
    total: AllocRow,
    /// Spans seen (distinct ids), bounded like the groups.
    spans: HashSet<([u8; 16], [u8; 8])>,
}

impl AllocTable {
    /// Adds `samples` allocation samples standing for `bytes`, of `group` (None: no span).
    pub fn add(&mut self, group: Option<Group>, ids: Option<([u8; 16], [u8; 8])>, samples: u64, bytes: u64) {
        self.total.add(samples, bytes);
        let Some(group) = group else {
            self.no_span.add(samples, bytes);
            return;
        };
        if let Some(ids) = ids.filter(|_| self.spans.len() < MAX_GROUPS) {
            self.spans.insert(ids);
        }
        let row =
            if self.rows.len() < MAX_GROUPS || self.rows.contains_key(&group) { self.rows.entry(group).or_default() } else { &mut self.overflow };
        row.add(samples, bytes);
    }

    pub fn total(&self) -> AllocRow {
        self.total
    }

    pub fn no_span(&self) -> AllocRow {
        self.no_span
    }

    /// Some sample carried the grouping attribute (a row with a value, or the rows past the bound).
    pub fn carried(&self) -> bool {
        self.rows.keys().any(|g| matches!(g, Group::Value(Some(_)))) || self.overflow.samples > 0
    }

    /// The row of `group`, if any sample fell in it.
    pub fn row(&self, group: &Group) -> Option<AllocRow> {
        self.rows.get(group).copied()
    }

    /// The table: a header, the `top` groups by bytes (0: all), the rest in one "other" row,
    /// the samples without a span, the total, and a line of facts. `label` names a group
    /// as the CPU table does.
    pub fn render(&self, by: &GroupBy, top: usize, interval: Option<u64>, label: &dyn Fn(&Group) -> String) -> String {
        let mut out = String::new();
        let pct = |b: u64| if self.total.bytes == 0 { 0.0 } else { 100.0 * b as f64 / self.total.bytes as f64 };
        let mut rows: Vec<(&Group, &AllocRow)> = self.rows.iter().collect();
        rows.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(b.0)));
        let shown = if top == 0 { rows.len() } else { rows.len().min(top) };
        let (head, rest) = rows.split_at(shown);
        let labels: Vec<String> = head.iter().map(|(g, _)| label(g)).collect();
        let title = format!("ALLOCATIONS BY {}", by.name().to_uppercase());
        let width = labels.iter().map(|l| l.chars().count()).chain([title.len(), 24]).max().unwrap_or(24).min(64);
        let _ = writeln!(out, "{title:<width$}  {:>8}  {:>12}  {:>6}", "SAMPLES", "MB", "%");
        let line = |out: &mut String, label: &str, r: AllocRow| {
            let label: String = label.chars().take(width).collect();
            let _ = writeln!(out, "{label:<width$}  {:>8}  {:>12.1}  {:>5.1}%", r.samples, r.bytes as f64 / 1e6, pct(r.bytes));
        };
        for ((_, row), label) in head.iter().zip(&labels) {
            line(&mut out, label, **row);
        }
        let mut other = self.overflow;
        for (_, r) in rest {
            other.add(r.samples, r.bytes);
        }
        if other.samples > 0 {
            line(&mut out, &format!("(other: {} more)", rest.len()), other);
        }
        line(&mut out, "(no span)", self.no_span);
        line(&mut out, "total", self.total);
        let with_span = self.total.samples - self.no_span.samples;
        let share = if self.total.samples == 0 { 0.0 } else { 100.0 * with_span as f64 / self.total.samples as f64 };
        let scale = match interval {
            Some(i) => format!("each sample scaled by V8's mean sampling interval of {i} bytes"),
            None => "each sample scaled by the interval its process published".to_string(),
        };
        let _ = writeln!(out, "{share:.1}% of allocation samples carry a span; MB: the bytes they stand for, {scale}.");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_ordered_by_bytes_with_no_span_and_total() {
        let mut t = AllocTable::default();
        let route = |r: &str| Some(Group::Value(Some(r.to_string())));
        t.add(route("/b"), Some(([1; 16], [1; 8])), 10, 1_000_000);
        t.add(route("/a"), Some(([2; 16], [2; 8])), 5, 3_000_000);
        t.add(None, None, 5, 1_000_000);
        assert_eq!(t.total(), AllocRow { samples: 20, bytes: 5_000_000 });
        assert_eq!(t.row(&Group::Value(Some("/a".into()))), Some(AllocRow { samples: 5, bytes: 3_000_000 }));
        let label = |g: &Group| match g {
            Group::Value(Some(v)) => v.clone(),
            _ => "?".into(),
        };
        let text = t.render(&GroupBy::Attr("http.route".into()), 10, Some(524288), &label);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("ALLOCATIONS BY HTTP.ROUTE"), "{text}");
        assert!(lines[1].starts_with("/a") && lines[1].contains("3.0") && lines[1].contains("60.0%"), "{text}");
        assert!(lines[2].starts_with("/b"), "{text}");
        assert!(lines[3].starts_with("(no span)") && lines[4].starts_with("total"), "{text}");
        assert!(lines[5].starts_with("75.0% of allocation samples carry a span"), "{text}");
    }
}
