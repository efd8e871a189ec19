//! What a table's rows are ([`GroupBy`]: a record attribute such as `http.route`, the trace, or
//! the span instance) and which row a sample or profile entry falls in ([`Group`]).

use thread_ctx_discovery::ctx_record::decode_attrs;
use thread_ctx_profile::Entry;
use thread_ctx_sampler::Event;

/// Distinct groups kept; samples of later ones are counted in one overflow row.
pub const MAX_GROUPS: usize = 100_000;
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
    pub fn parse(s: &str) -> Result<GroupBy, String> {
        match s.trim() {
            "" => Err("expected span, trace or a record attribute key such as http.route".into()),
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

    /// The group of a sample with a span context (None: no span).
    pub fn group_of_event(&self, e: &Event, key_map: Option<&[String]>) -> Option<Group> {
        let (trace, span, _) = e.span()?;
        Some(match self {
            GroupBy::Span => Group::Span(trace, span),
            GroupBy::Trace => Group::Trace(trace),
            GroupBy::Attr(key) => {
                let (attrs, _) = decode_attrs(&e.attrs, key_map);
                let name = |a: &thread_ctx_discovery::ctx_record::Attr| a.key.clone().unwrap_or_else(|| attr_index_name(a.key_index));
                Group::Value(attrs.into_iter().find(|a| name(a) == *key).map(|a| a.value))
            }
        })
    }

    /// The group of a profile entry (None: no span), as [`GroupBy::group_of_event`] would say.
    pub fn group_of_entry(&self, e: &Entry) -> Option<Group> {
        let (trace, span) = match (e.trace_id, e.span_id) {
            (None, None) => return None,
            (t, s) => (t.unwrap_or([0; 16]), s.unwrap_or([0; 8])),
        };
        Some(match self {
            GroupBy::Span => Group::Span(trace, span),
            GroupBy::Trace => Group::Trace(trace),
            GroupBy::Attr(key) => Group::Value(e.attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())),
        })
    }
}

/// How a profile names an attribute whose key index the key map lacks.
pub(crate) fn attr_index_name(index: u8) -> String {
    format!("attr.{index}")
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    Span([u8; 16], [u8; 8]),
    Trace([u8; 16]),
    /// The attribute's value; None for spans whose record does not carry it.
    Value(Option<String>),
}
