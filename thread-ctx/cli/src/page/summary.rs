//! What the page shows of a traces file, summarised once at start as `report --traces` reads it
//! (`scan_traces_file`, streamed twice): the routes' latency and their slowest 1 % explained
//! (`slow_requests`' own `Latencies`/`Tails`), and beside them what the page alone needs, each
//! bounded: per route its `SLOW_PER_ROUTE` slowest requests, per holder of who made whom wait the
//! `DELAYED_PER_HOLDER` requests it delayed most, and every span of those requests' traces (the
//! waterfall), so that memory follows what the page shows, not the file.

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use thread_ctx_otlp::traces::{scan_traces_file, SpanSelection, TracesScan};
use thread_ctx_output::file_error::Result;
use thread_ctx_output::slow_requests::{parse_holder, parse_hop, parse_route_hold, Explanation, Latencies, Report, Span};

/// The slowest requests kept per route, and in all.
pub const SLOW_PER_ROUTE: usize = 10;
pub const SLOWEST: usize = 20;
/// The requests kept per holder row, the ones it delayed most.
pub const DELAYED_PER_HOLDER: usize = 10;
/// Holder rows (route and line) kept; a file with more holders keeps the heaviest at the end.
const HOLDERS_KEPT: usize = 500;
/// Spans kept per trace shown (a waterfall past this says how many it left out).
const SPANS_PER_TRACE: usize = 400;
/// Rows of the frames, holders and hops of an explanation.
const TOP: usize = 10;

/// One request as a list row: its entry span and where its time went.
#[derive(Debug, Clone)]
struct Request {
    trace_id: String,
    service: String,
    route: String,
    duration_ns: u64,
    causes: Value,
}

impl Request {
    fn of(s: &Span) -> Request {
        Request {
            trace_id: s.trace_id.clone(),
            service: s.service.clone(),
            route: s.route_or_name().to_string(),
            duration_ns: s.duration_ns,
            causes: causes(&Explanation::of(&[s], TOP)),
        }
    }

    fn json(&self) -> Value {
        json!({"trace_id": self.trace_id, "service": self.service, "route": self.route, "duration_ms": self.duration_ns as f64 / 1e6, "causes": self.causes})
    }
}

/// Keeps the `n` largest by `key` (ties: the first met stays).
fn keep_top<T>(v: &mut Vec<T>, item: T, n: usize, key: impl Fn(&T) -> f64) {
    let k = key(&item);
    let at = v.partition_point(|x| key(x) >= k);
    if at < n {
        v.insert(at, item);
        v.truncate(n);
    }
}

/// Where one request's (or the mean of several requests') time went, ms, in the parts the
/// page's cause bar draws, with the lines behind them.
pub fn causes(e: &Explanation) -> Value {
    let per = |ms: f64, n: usize| if n == 0 { Value::Null } else { json!(ms / n as f64) };
    let n = e.enriched;
    json!({
        "enriched": n > 0,
        "duration_ms": if n == 0 { 0.0 } else { e.duration_ms / n as f64 },
        "own_cpu_ms": per(e.own_cpu_ms, e.cpu_measured),
        "held_cpu_ms": per(e.other_requests_cpu_ms, e.cpu_measured),
        "held_off_cpu_ms": per(e.other_requests_off_cpu_ms, e.off_cpu_measured),
        "no_span_cpu_ms": per(e.no_span_cpu_ms, e.cpu_measured),
        "blocked_ms": per(e.blocked_in_it_ms, e.off_cpu_measured),
        "runnable_ms": per(e.cpu_starved_ms, e.runnable_measured),
        "idle_ms": per(e.idle_ms, e.off_cpu_measured),
        "alloc_bytes": per(e.alloc_bytes as f64, e.alloc_measured),
        "own_frames": e.own_frames.iter().map(|(f, ms)| json!({"frame": f, "ms": ms / n.max(1) as f64})).collect::<Vec<_>>(),
        "held_by": e.held_by.iter().map(|(who, ms, frame)| json!({"route": who, "ms": ms / n.max(1) as f64, "frame": frame})).collect::<Vec<_>>(),
        "held_by_rest_ms": e.held_by_rest_ms / n.max(1) as f64,
        "path": e.path.iter().map(|(hop, ms, cause)| json!({"hop": hop, "ms": ms / e.path_requests.max(1) as f64, "cause": cause})).collect::<Vec<_>>(),
    })
}

/// The first pass's own part: slow requests per route and in all, delayed requests per holder.
#[derive(Default)]
struct Picks {
    per_route: BTreeMap<String, Vec<Request>>,
    slowest: Vec<Request>,
    /// (holder route, its line) -> the requests it delayed, most delayed first, with the ms.
    delayed: HashMap<(String, String), Vec<(f64, Request)>>,
}

impl Picks {
    fn add(&mut self, s: &Span) {
        if !s.entry {
            return;
        }
        // A request's row is made once, and only when some list keeps it.
        let mut row: Option<Request> = None;
        let made = |row: &mut Option<Request>| row.get_or_insert_with(|| Request::of(s)).clone();
        let slow = |v: &Vec<Request>, n: usize| v.len() < n || v.last().is_some_and(|r| r.duration_ns < s.duration_ns);
        let route = match self.per_route.get_mut(s.route_or_name()) {
            Some(r) => r,
            None => self.per_route.entry(s.route_or_name().to_string()).or_default(),
        };
        if slow(route, SLOW_PER_ROUTE) {
            keep_top(route, made(&mut row), SLOW_PER_ROUTE, |r| r.duration_ns as f64);
        }
        if slow(&self.slowest, SLOWEST) {
            keep_top(&mut self.slowest, made(&mut row), SLOWEST, |r| r.duration_ns as f64);
        }
        let Some(j) = &s.joined else { return };
        for h in j.held_by_routes.iter().filter_map(|r| parse_route_hold(r)) {
            let Some(frame) = h.frame else { continue };
            let key = (h.route, frame);
            if !self.delayed.contains_key(&key) && self.delayed.len() >= HOLDERS_KEPT * 4 {
                continue;
            }
            let rows = self.delayed.entry(key).or_default();
            if rows.len() < DELAYED_PER_HOLDER || rows.last().is_some_and(|(ms, _)| *ms < h.ms) {
                keep_top(rows, (h.ms, made(&mut row)), DELAYED_PER_HOLDER, |r| r.0);
            }
        }
    }
}

/// One span of a trace shown: its place in the waterfall and its cause bar.
fn span_json(s: &Span, parent: &str) -> Value {
    let j = s.joined.as_ref();
    json!({
        "span_id": s.span_id, "parent": parent, "service": s.service, "name": s.name, "route": s.route, "entry": s.entry,
        "start_unix_ns": s.start_unix_ns, "duration_ms": s.duration_ms(),
        "causes": causes(&Explanation::of(&[s], TOP)),
        "holders": j.map(|j| j.held_by.iter().filter_map(|h| parse_holder(h)).map(|h| json!({"route": h.who, "trace_id": h.trace_id, "ms": h.ms, "frame": h.frame})).collect::<Vec<_>>()).unwrap_or_default(),
        "path": j.map(|j| j.path.iter().filter_map(|h| parse_hop(h)).map(|h| json!({"hop": h.hop, "ms": h.ms, "cause": h.cause})).collect::<Vec<_>>()).unwrap_or_default(),
        "path_others_ms": j.map_or(0.0, |j| j.path_others_ms),
    })
}

/// The page's data of a traces file.
pub struct Summary {
    pub data: Value,
    /// The traces the page lists, whose flame graphs an export holds.
    pub traces: Vec<String>,
    /// The routes and holder routes the page lists.
    pub routes: Vec<String>,
    pub scan: TracesScan,
}

pub fn summarise(path: &Path) -> Result<Summary> {
    let all = SpanSelection::default();
    let mut latencies = Latencies::new(0);
    let mut picks = Picks::default();
    let scan = scan_traces_file(path, &all, None, |s| {
        latencies.add(&s);
        picks.add(&s);
    })?;
    // The holders the page lists: the heaviest rows of the report's own table.
    let mut tails = latencies.tails();
    let mut wanted: BTreeSet<String> = picks.slowest.iter().map(|r| r.trace_id.clone()).collect();
    wanted.extend(picks.per_route.values().flatten().map(|r| r.trace_id.clone()));
    wanted.extend(picks.delayed.values().flatten().map(|(_, r)| r.trace_id.clone()));
    // The second pass: each route's slowest 1 % explained, and every span of the traces shown.
    let mut spans: BTreeMap<String, Vec<Span>> = BTreeMap::new();
    let mut left_out: BTreeMap<String, usize> = BTreeMap::new();
    scan_traces_file(path, &all, Some(scan.whole_bytes), |s| {
        tails.add(&s);
        if wanted.contains(&s.trace_id) {
            let kept = spans.entry(s.trace_id.clone()).or_default();
            if kept.len() < SPANS_PER_TRACE {
                kept.push(s);
            } else {
                *left_out.entry(s.trace_id.clone()).or_default() += 1;
            }
        }
    })?;
    let report: Report = tails.finish(HOLDERS_KEPT);
    let holders: Vec<Value> = report
        .inflicted
        .iter()
        .map(|i| {
            let delayed = i.frame.as_ref().and_then(|f| picks.delayed.get(&(i.route.clone(), f.clone())));
            json!({
                "route": i.route, "frame": i.frame, "ms": i.ms, "delayed": i.delayed, "share": i.share,
                "requests": delayed.map(|d| d.iter().map(|(ms, r)| json!({"ms": ms, "request": r.json()})).collect::<Vec<_>>()).unwrap_or_default(),
            })
        })
        .collect();
    let routes: Vec<Value> = report
        .routes
        .iter()
        .map(|r| {
            json!({
                "route": r.route, "requests": r.requests, "enriched": r.enriched, "p50_ms": r.p50_ms, "p90_ms": r.p90_ms, "p99_ms": r.p99_ms,
                "max_ms": r.max_ms, "slowest_from_ms": r.slowest_from_ms, "slowest_requests": r.slowest.requests, "causes": causes(&r.slowest),
                "slow": picks.per_route.get(&r.route).map(|v| v.iter().map(Request::json).collect::<Vec<_>>()).unwrap_or_default(),
            })
        })
        .collect();
    let traces: BTreeMap<&String, Value> = spans
        .iter_mut()
        .map(|(id, v)| {
            v.sort_by_key(|s| (s.start_unix_ns, std::cmp::Reverse(s.duration_ns)));
            (id, json!({"spans": waterfall(v), "left_out": left_out.get(id).copied().unwrap_or(0)}))
        })
        .collect();
    let mut route_names: BTreeSet<String> = report.routes.iter().map(|r| r.route.clone()).collect();
    route_names.extend(report.inflicted.iter().filter(|i| i.frame.is_some()).map(|i| i.route.clone()));
    let data = json!({
        "spans": report.spans, "requests": report.routes.iter().map(|r| r.requests).sum::<usize>(),
        "routes": routes, "holders": holders, "waiting_ms": report.waiting_ms,
        "slowest": picks.slowest.iter().map(Request::json).collect::<Vec<_>>(),
        "traces": traces,
    });
    Ok(Summary { data, traces: spans.keys().cloned().collect(), routes: route_names.into_iter().collect(), scan })
}

/// A trace's spans as a tree by their parent span id, each after its parent and its siblings in
/// start order (`spans` comes sorted by start). A span whose parent is not among them (not in
/// the file, or past `SPANS_PER_TRACE`) sits at the top, in start order; so does a span of a
/// cycle of parents a bad file may hold, once.
fn waterfall(spans: &[Span]) -> Vec<Value> {
    let at: HashMap<&str, usize> = spans.iter().enumerate().map(|(i, s)| (s.span_id.as_str(), i)).collect();
    let parent_of = |s: &Span| at.get(s.parent_span_id.as_str()).copied().filter(|_| s.parent_span_id != s.span_id);
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); spans.len()];
    for (i, s) in spans.iter().enumerate() {
        if let Some(p) = parent_of(s) {
            children[p].push(i);
        }
    }
    let mut out = Vec::with_capacity(spans.len());
    let mut shown = vec![false; spans.len()];
    let roots = (0..spans.len()).filter(|&i| parent_of(&spans[i]).is_none());
    // The cycles' spans after the true roots: the first met of each heads it.
    for top in roots.collect::<Vec<_>>().into_iter().chain(0..spans.len()) {
        if shown[top] {
            continue;
        }
        let mut stack = vec![(top, true)];
        while let Some((i, is_top)) = stack.pop() {
            if std::mem::replace(&mut shown[i], true) {
                continue;
            }
            let parent = if is_top { "" } else { spans[i].parent_span_id.as_str() };
            out.push(span_json(&spans[i], parent));
            stack.extend(children[i].iter().rev().map(|&c| (c, false)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(id: &str, parent: &str, service: &str, start: u64, ms: u64) -> Span {
        Span {
            trace_id: "ab".repeat(16),
            span_id: id.into(),
            parent_span_id: parent.into(),
            service: service.into(),
            name: id.into(),
            start_unix_ns: start,
            duration_ns: ms * 1_000_000,
            ..Default::default()
        }
    }

    /// Each span follows its parent whatever the clocks say; a lost parent's child and the spans
    /// of a cycle are shown at the top, each once.
    #[test]
    fn the_waterfall_nests_by_parent_not_by_time() {
        let spans = [
            span("a1", "b0", "inventory", 0, 1),
            span("b0", "", "gateway", 1, 10),
            span("c1", "d9", "gateway", 2, 1),
            span("x1", "x2", "gateway", 3, 1),
            span("x2", "x1", "gateway", 4, 1),
            span("b1", "b0", "gateway", 5, 5),
            span("s1", "s1", "gateway", 6, 1),
        ];
        let rows: Vec<(String, String)> =
            waterfall(&spans).iter().map(|v| (v["span_id"].as_str().unwrap().into(), v["parent"].as_str().unwrap().into())).collect();
        let want = [("b0", ""), ("a1", "b0"), ("b1", "b0"), ("c1", ""), ("s1", ""), ("x1", ""), ("x2", "x1")];
        assert_eq!(rows, want.map(|(a, b)| (a.to_string(), b.to_string())));
    }
}
