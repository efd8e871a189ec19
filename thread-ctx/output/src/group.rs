//! What a table's rows are ([`GroupBy`]: a record attribute such as `http.route`, the trace, or
//! the span instance) and which row a sample or profile entry falls in ([`Group`]).

use thread_ctx_model::{Entry, Sample};

/// Distinct groups kept; samples of later ones are counted in one overflow row.
pub const MAX_GROUPS: usize = 100_000;
/// A `--by` value that names nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupByError {
    #[error("expected span, trace or a record attribute key such as http.route")]
    Blank,
}

/// What the table's rows are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupBy {
    /// One row per value of this record attribute (named by the process context's key map).
    Attr(String),
    /// One row per trace.
    Trace,
    /// One row per span instance (trace id, span id).
    Span,
}

impl GroupBy {
    /// `span`, `trace`, or an attribute key (`http.route`).
    pub fn parse(s: &str) -> Result<GroupBy, GroupByError> {
        match s.trim() {
            "" => Err(GroupByError::Blank),
            "span" => Ok(GroupBy::Span),
            "trace" => Ok(GroupBy::Trace),
            key => Ok(GroupBy::Attr(key.to_string())),
        }
    }

    /// The default for a process: its `http.route` attribute when it registered one (what
    /// a service is usually asked about), else traces.
    pub fn default_for(key_map: Option<&[String]>) -> GroupBy {
        match key_map {
            Some(keys) if keys.iter().any(|k| k == "http.route") => GroupBy::Attr("http.route".into()),
            _ => GroupBy::Trace,
        }
    }

    pub fn name(&self) -> &str {
        match self {
            GroupBy::Attr(k) => k,
            GroupBy::Trace => "trace",
            GroupBy::Span => "span",
        }
    }

    /// The group of a sample or entry with these ids and attributes (sorted by key, as the decode
    /// stage gives them); None: no span.
    pub fn group_of(&self, trace_id: Option<[u8; 16]>, span_id: Option<[u8; 8]>, attrs: &[(String, String)]) -> Option<Group> {
        let (trace, span) = match (trace_id, span_id) {
            (None, None) => return None,
            (t, s) => (t.unwrap_or([0; 16]), s.unwrap_or([0; 8])),
        };
        Some(match self {
            GroupBy::Span => Group::Span(trace, span),
            GroupBy::Trace => Group::Trace(trace),
            GroupBy::Attr(key) => Group::Value(attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())),
        })
    }

    /// The group of a profile entry (None: no span).
    pub fn group_of_entry(&self, e: &Entry) -> Option<Group> {
        self.group_of(e.trace_id, e.span_id, &e.attrs)
    }

    /// The group of a decoded sample (None: no span).
    pub fn group_of_sample(&self, s: &Sample) -> Option<Group> {
        self.group_of(s.trace_id, s.span_id, &s.attrs)
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    Span([u8; 16], [u8; 8]),
    Trace([u8; 16]),
    /// The attribute's value; None for spans whose record does not carry it.
    Value(Option<String>),
}
