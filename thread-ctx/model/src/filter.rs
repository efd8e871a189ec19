//! `--trace`, `--span`, `--attr key=value`: which entries a flame graph keeps.

use crate::symbolized::Entry;
use thread_ctx_discovery::ids::{hex, parse_hex};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub trace_id: Option<[u8; 16]>,
    pub span_id: Option<[u8; 8]>,
    /// Every pair must be among the entry's attributes.
    pub attrs: Vec<(String, String)>,
}

/// A selection flag's value that selects nothing: the message names the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("--trace: {0} (a W3C trace id)")]
    Trace(String),
    #[error("--span: {0} (a W3C span id)")]
    Span(String),
    #[error("--attr: expected KEY=VALUE (e.g. http.route=/users/:id), got {0:?}")]
    Attr(String),
}

impl Filter {
    /// Parses the CLI values; Err names the flag and what it expects.
    pub fn parse(trace: Option<&str>, span: Option<&str>, attrs: &[String]) -> Result<Filter, FilterError> {
        let trace_id = trace.map(|t| parse_hex::<16>(t).map_err(|e| FilterError::Trace(e.to_string()))).transpose()?;
        let span_id = span.map(|s| parse_hex::<8>(s).map_err(|e| FilterError::Span(e.to_string()))).transpose()?;
        let attrs = attrs
            .iter()
            .map(|a| match a.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
                _ => Err(FilterError::Attr(a.clone())),
            })
            .collect::<Result<_, _>>()?;
        Ok(Filter { trace_id, span_id, attrs })
    }

    pub fn is_empty(&self) -> bool {
        self.trace_id.is_none() && self.span_id.is_none() && self.attrs.is_empty()
    }

    pub fn matches(&self, e: &Entry) -> bool {
        self.trace_id.is_none_or(|t| e.trace_id == Some(t))
            && self.span_id.is_none_or(|s| e.span_id == Some(s))
            && self.attrs.iter().all(|a| e.attrs.contains(a))
    }

    /// `trace 4bf9… span 00f0… http.route=/x`, for titles and messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.trace_id {
            parts.push(format!("trace {}", hex(&t)));
        }
        if let Some(s) = self.span_id {
            parts.push(format!("span {}", hex(&s)));
        }
        parts.extend(self.attrs.iter().map(|(k, v)| format!("{k}={v}")));
        if parts.is_empty() {
            "all samples".into()
        } else {
            parts.join(" ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(trace: u8, span: u8, route: &str) -> Entry {
        Entry { weight: 1, ..Entry::test(vec![], Some((trace, span)), &[("http.route", route)], 1) }
    }

    #[test]
    fn parse_names_the_bad_flag() {
        assert!(Filter::parse(Some("abc"), None, &[]).unwrap_err().to_string().starts_with("--trace: expected 32 hex digits"));
        assert!(Filter::parse(None, Some("xyz"), &[]).unwrap_err().to_string().starts_with("--span: expected 16 hex digits"));
        assert!(Filter::parse(None, None, &["route".into()]).unwrap_err().to_string().starts_with("--attr: expected KEY=VALUE"));
        assert!(Filter::parse(None, None, &["=v".into()]).is_err());
    }

    #[test]
    fn every_given_condition_must_hold() {
        let f = Filter::parse(Some(&"01".repeat(16)), None, &["http.route=/a".into()]).unwrap();
        assert!(f.matches(&entry(1, 9, "/a")));
        assert!(!f.matches(&entry(2, 9, "/a")));
        assert!(!f.matches(&entry(1, 9, "/b")));
        let by_span = Filter::parse(None, Some(&"09".repeat(8)), &[]).unwrap();
        assert!(by_span.matches(&entry(1, 9, "/a")) && !by_span.matches(&entry(1, 8, "/a")));
        assert!(Filter::default().matches(&entry(3, 3, "/c")));
        assert_eq!(f.describe(), format!("trace {} http.route=/a", "01".repeat(16)));
    }
}
