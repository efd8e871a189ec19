//! What a test workload logged about its spans, per thread, with process.hrtime times
//! (CLOCK_MONOTONIC, the clock of an eBPF sample's `time_ns` and of a dump row's
//! `stopped_at_ns`), and the judgement of one reading from outside against it. Logged by
//! `sampler_fixtures/http_burner.js` and `__test__/fixtures/interleaved-spans.js`, one JSON
//! object per thread: `{tid, spans: [{kind, traceId, spanId, start, end}], pieces: [{spanId,
//! start, end}], ended: [{spanId, how, start, end}]}` (times as decimal strings; `end` null
//! while a span is open; `ended` optional).
//!
//! - a span's window encloses every moment a reader may see it: one that carries the span outside
//!   the window, on another thread, or under another trace, leaked it;
//! - a piece is a synchronous burn with its span the active context all through it: a reading
//!   inside carries exactly that span;
//! - an ended piece burns after its span's end(), in a context that still holds the span: a
//!   reading inside carries no span.

use serde_json::Value;
use std::collections::HashMap;

#[derive(Debug)]
pub struct SpanWindow {
    pub kind: String,
    pub trace_id: String,
    pub tid: i64,
    pub start: u64,
    /// None: still open when the log was fetched.
    pub end: Option<u64>,
}

#[derive(Debug)]
pub struct Piece {
    pub span_id: String,
    pub start: u64,
    pub end: u64,
}

/// Every logged thread's spans (by span id), pieces and ended pieces (by thread, sorted by start).
#[derive(Default)]
pub struct Timeline {
    pub spans: HashMap<String, SpanWindow>,
    pub pieces: HashMap<i64, Vec<Piece>>,
    pub ended: HashMap<i64, Vec<Piece>>,
}

fn ns(v: &Value, what: &str) -> u64 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("span log: {what} is not a decimal string: {v}"))
}

fn pieces(log: &Value, key: &str) -> Vec<Piece> {
    let mut out: Vec<Piece> = log[key]
        .as_array()
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|p| Piece { span_id: p["spanId"].as_str().unwrap().to_string(), start: ns(&p["start"], "start"), end: ns(&p["end"], "end") })
        .collect();
    out.sort_by_key(|p| p.start);
    out
}

/// The piece of `list` running at `t`, if any (the pieces of one thread never overlap).
fn at(list: Option<&Vec<Piece>>, t: u64) -> Option<&Piece> {
    let list = list?;
    let i = list.partition_point(|p| p.start <= t);
    list[..i].last().filter(|p| t <= p.end)
}

/// What one reading of a thread found.
#[derive(Debug, Clone, Copy)]
pub enum Seen<'a> {
    /// A valid record: (trace id, span id).
    Span(&'a str, &'a str),
    /// No context (none published, not valid, no frame or store).
    None,
    /// Neither: a fault, a malformed or torn record (the state's name).
    Fault(&'a str),
}

impl Timeline {
    /// Adds one thread's log.
    pub fn add(&mut self, log: &Value) {
        let tid = log["tid"].as_i64().unwrap_or_else(|| panic!("span log without tid: {log}"));
        for s in log["spans"].as_array().expect("span log: spans array") {
            let window = SpanWindow {
                kind: s["kind"].as_str().unwrap().to_string(),
                trace_id: s["traceId"].as_str().unwrap().to_string(),
                tid,
                start: ns(&s["start"], "start"),
                end: (!s["end"].is_null()).then(|| ns(&s["end"], "end")),
            };
            self.spans.insert(s["spanId"].as_str().unwrap().to_string(), window);
        }
        self.pieces.entry(tid).or_default().extend(pieces(log, "pieces"));
        self.pieces.get_mut(&tid).unwrap().sort_by_key(|p| p.start);
        self.ended.entry(tid).or_default().extend(pieces(log, "ended"));
        self.ended.get_mut(&tid).unwrap().sort_by_key(|p| p.start);
    }

    /// The burn piece running on `tid` at `t`, if any.
    pub fn piece_at(&self, tid: i64, t: u64) -> Option<&Piece> {
        at(self.pieces.get(&tid), t)
    }

    /// The ended piece running on `tid` at `t`, if any.
    pub fn ended_piece_at(&self, tid: i64, t: u64) -> Option<&Piece> {
        at(self.ended.get(&tid), t)
    }

    /// Why a reading of `tid` at `t` carrying span `span_id` of trace `trace_id` shows a span that
    /// was not running there, if it does.
    pub fn leak(&self, tid: i64, t: u64, trace_id: &str, span_id: &str) -> Option<String> {
        match self.spans.get(span_id) {
            None => Some(format!("carries span {span_id}, which no logged thread started")),
            Some(w) if w.trace_id != trace_id => Some(format!("carries trace {trace_id}, but span {span_id} belongs to trace {}", w.trace_id)),
            Some(w) if w.tid != tid => Some(format!("runs on thread {tid}, but {} span {span_id} ran on thread {}", w.kind, w.tid)),
            Some(w) if t < w.start || w.end.is_some_and(|e| t > e) => Some(format!(
                "is outside the window of {} span {span_id}: [{}, {:?}] ({} ns {})",
                w.kind,
                w.start,
                w.end,
                t.abs_diff(if t < w.start { w.start } else { w.end.unwrap() }),
                if t < w.start { "before its start" } else { "after its end" }
            )),
            Some(_) => None,
        }
    }

    /// Why a reading of a logged thread `tid` at `t` contradicts the log, if it does: a leak, a
    /// piece that does not show its span, an ended piece that shows one, or a fault.
    pub fn mismatch(&self, tid: i64, t: u64, seen: Seen<'_>) -> Option<String> {
        if let Seen::Span(trace_id, span_id) = seen {
            if let Some(why) = self.leak(tid, t, trace_id, span_id) {
                return Some(why);
            }
        }
        if let Some(p) = self.piece_at(tid, t) {
            if !matches!(seen, Seen::Span(_, s) if s == p.span_id) {
                return Some(format!("fell inside a burn piece of span {} [{}, {}], but read {seen:?}", p.span_id, p.start, p.end));
            }
        }
        if let Some(p) = self.ended_piece_at(tid, t) {
            if !matches!(seen, Seen::None) {
                return Some(format!("fell inside a burn after the end of span {} [{}, {}], but read {seen:?}", p.span_id, p.start, p.end));
            }
        }
        match seen {
            Seen::Fault(state) => Some(format!("read {state}: neither a record nor none")),
            _ => None,
        }
    }
}
