//! `thread-ctx report --traces`: where the slow requests' time went, from spans the Collector's
//! `span_profiles` connector enriched (docs/spanprofiles.md has the fields). Per route: the latency
//! distribution of its requests (entry spans: server spans and roots), and for its slowest 1 %
//! what their thread did while they were open: their own CPU and top lines, other requests on
//! the loop (which routes, which lines), CPU with no span, time off CPU, and allocations; and
//! with `--slowest N` the same for single traces. Reading the spans is `thread_ctx_otlp::traces`.

use std::collections::BTreeMap;

/// What the connector wrote on a span (its attributes and its `thread_ctx.profile` event).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Joined {
    /// Present when samples of the span's thread supported them (docs/spanprofiles.md: the
    /// connector writes no figure the samples do not support).
    pub cpu_span_ms: Option<f64>,
    pub cpu_trace_ms: Option<f64>,
    pub cpu_other_traces_ms: Option<f64>,
    pub cpu_no_span_ms: Option<f64>,
    /// Present when the agent traced off-CPU time.
    pub off_cpu_trace_ms: Option<f64>,
    pub off_cpu_other_traces_ms: Option<f64>,
    pub off_cpu_no_span_ms: Option<f64>,
    /// Off CPU but runnable (waiting for a CPU: preempted or throttled); present with off-CPU.
    pub off_cpu_runnable_ms: Option<f64>,
    /// Present when the agent traced allocations.
    pub alloc_bytes: Option<i64>,
    pub samples: Option<i64>,
    pub top_frames: Vec<String>,
    pub held_by: Vec<String>,
    /// The traces that held the thread but are not in `held_by`, and their ms: with `held_by`'s
    /// they add up to the other requests' time.
    pub held_by_others: i64,
    pub held_by_others_ms: f64,
    /// The same time by route: `<route> <ms>ms in <n> requests: <top frame>`.
    pub held_by_routes: Vec<String>,
    pub top_alloc_frames: Vec<String>,
    /// On a trace's first request, its path across services (the `thread_ctx.path` event's
    /// `hops`: `<hop> <ms>ms: <cause>`), and the ms of the hops past those listed.
    pub path: Vec<String>,
    pub path_others_ms: f64,
}

/// A span, with what the report needs of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Span {
    /// Lower-case hex.
    pub trace_id: String,
    pub span_id: String,
    /// Its parent's span id, lower-case hex; empty for a root.
    pub parent_span_id: String,
    pub service: String,
    pub name: String,
    pub route: Option<String>,
    /// Where `route` came from when the span had no `http.route`: the connector named it by the
    /// route its samples carried (`samples`) or its method and templated path (`path`).
    pub route_source: Option<String>,
    /// A server span or a root: one request.
    pub entry: bool,
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    /// None when the connector could not enrich it.
    pub joined: Option<Joined>,
}

impl Span {
    /// The route it is reported under: its `http.route`, else the connector's name for it
    /// (`thread_ctx.route`), else its name.
    pub fn route_or_name(&self) -> &str {
        self.route.as_deref().unwrap_or(&self.name)
    }

    pub fn duration_ms(&self) -> f64 {
        self.duration_ns as f64 / 1e6
    }
}

/// One `held_by` entry: `<who> <trace id> <ms>ms: <top frame>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    pub who: String,
    pub trace_id: String,
    pub ms: f64,
    pub frame: String,
}

/// Parses a `held_by` entry; None when it is not in the contract's form. `<who>` may hold
/// spaces (a span name); the trace id, 32 hex digits followed by `<ms>ms:`, ends it.
pub fn parse_holder(s: &str) -> Option<Holder> {
    let words: Vec<&str> = s.split(' ').collect();
    let i = (1..words.len().saturating_sub(1)).find(|&i| {
        words[i].len() == 32
            && words[i].bytes().all(|b| b.is_ascii_hexdigit())
            && words[i + 1].strip_suffix("ms:").is_some_and(|m| m.parse::<f64>().is_ok())
    })?;
    let ms = words[i + 1].strip_suffix("ms:")?.parse().ok()?;
    Some(Holder { who: words[..i].join(" "), trace_id: words[i].to_string(), ms, frame: words[i + 2..].join(" ") })
}

/// One hop of a request's path across services (the `thread_ctx.path` event's `hops`):
/// `<hop> <ms>ms: <cause>`, or `<hop> <ms>ms` for a hop without a cause (a network leg, a wait on
/// a peer the Collector saw no span of).
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    /// `<service> <route>`, `waiting on <service> <route>`, `network to <service> <route>` or
    /// `waiting on <peer>`.
    pub hop: String,
    pub ms: f64,
    pub cause: Option<String>,
}

/// Parses a `hops` entry; None when it is not in the contract's form. The hop may hold spaces;
/// its first word `<ms>ms` (or `<ms>ms:`, before the cause) ends it.
pub fn parse_hop(s: &str) -> Option<Hop> {
    let words: Vec<&str> = s.split(' ').collect();
    let ms_of = |w: &str| w.strip_suffix("ms:").or_else(|| w.strip_suffix("ms")).and_then(|m| m.parse::<f64>().ok());
    let i = (1..words.len()).find(|&i| ms_of(words[i]).is_some() && (words[i].ends_with("ms:") || i + 1 == words.len()))?;
    let cause = words[i].ends_with("ms:").then(|| words[i + 1..].join(" ")).filter(|c| !c.is_empty());
    Some(Hop { hop: words[..i].join(" "), ms: ms_of(words[i])?, cause })
}

/// One `held_by_routes` entry: `<route> <ms>ms in <n> requests: <top frame>`, or the rest of the
/// routes, `(<k> other routes) <ms>ms in <n> requests` (no frame).
#[derive(Debug, Clone, PartialEq)]
pub struct RouteHold {
    pub route: String,
    pub ms: f64,
    pub requests: u64,
    pub frame: Option<String>,
}

/// The route `held_by_routes` gives the routes past its top ones.
pub const OTHER_ROUTES: &str = "(other routes)";

/// Parses a `held_by_routes` entry; None when it is not in the contract's form. `<route>` may
/// hold spaces (a span name); `<ms>ms in <n> requests` ends it.
pub fn parse_route_hold(s: &str) -> Option<RouteHold> {
    let words: Vec<&str> = s.split(' ').collect();
    let i = (1..words.len().saturating_sub(3)).find(|&i| {
        words[i].strip_suffix("ms").is_some_and(|m| m.parse::<f64>().is_ok())
            && words[i + 1] == "in"
            && words[i + 2].parse::<u64>().is_ok()
            && (words[i + 3] == "requests" || words[i + 3] == "requests:")
    })?;
    let ms = words[i].strip_suffix("ms")?.parse().ok()?;
    let requests = words[i + 2].parse().ok()?;
    let who = words[..i].join(" ");
    let (route, frame) = if words[i + 3] == "requests:" {
        (who, Some(words[i + 4..].join(" ")))
    } else if who.starts_with('(') && who.ends_with(" other routes)") {
        (OTHER_ROUTES.to_string(), None)
    } else {
        return None;
    };
    Some(RouteHold { route, ms, requests, frame })
}

/// Parses a `top_frames` entry, `function (file:line) NN%`, into the frame and its share (0-1);
/// `<1%` counts as half a percent.
pub fn parse_frame(s: &str) -> Option<(String, f64)> {
    let (frame, pct) = s.rsplit_once(' ')?;
    let share = match pct {
        "<1%" => 0.005,
        p => p.strip_suffix('%')?.parse::<f64>().ok()? / 100.0,
    };
    Some((frame.to_string(), share))
}

/// Where a set of requests' time went, summed over them (ms), with what held them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Explanation {
    pub requests: usize,
    /// The requests among them the connector enriched: the parts below are theirs.
    pub enriched: usize,
    /// Enriched requests that carried the CPU fields: the CPU figures are means over these.
    pub cpu_measured: usize,
    pub duration_ms: f64,
    pub own_cpu_ms: f64,
    pub other_requests_cpu_ms: f64,
    pub other_requests_off_cpu_ms: f64,
    pub no_span_cpu_ms: f64,
    pub blocked_in_it_ms: f64,
    pub idle_ms: f64,
    /// Waiting for a CPU (off_cpu.runnable_ms), over the requests that carried it.
    pub cpu_starved_ms: f64,
    pub runnable_measured: usize,
    /// Enriched requests that carried the off-CPU fields (the agent ran with `--off-cpu`): the
    /// off-CPU figures are means over these.
    pub off_cpu_measured: usize,
    pub alloc_bytes: i64,
    /// Enriched requests that carried `alloc_bytes` (the agent ran with `--alloc`).
    pub alloc_measured: usize,
    pub samples: i64,
    /// Own frames, weighted by the CPU they stand for (ms), heaviest first.
    pub own_frames: Vec<(String, f64)>,
    /// Other requests that held the thread, by route (or span name): ms and their top frame.
    pub held_by: Vec<(String, f64, String)>,
    /// The rest of the other requests' time: routes past the top ones, and traces the spans
    /// did not name. `held_by` and this add up to the other requests' time where the spans
    /// carry `held_by_routes`.
    pub held_by_rest_ms: f64,
    pub alloc_frames: Vec<(String, f64)>,
    /// The requests that carried a path across services, and its hops summed over them: hop,
    /// ms, and the cause of the heaviest instance of it; heaviest first. `path_rest_ms`: the hops
    /// past the top ones.
    pub path_requests: usize,
    pub path: Vec<(String, f64, String)>,
    pub path_rest_ms: f64,
}

/// An [`Explanation`] summed span by span, so that a report need not hold the spans it explains.
#[derive(Debug, Default)]
pub struct ExplanationSum {
    e: Explanation,
    own: BTreeMap<String, f64>,
    alloc: BTreeMap<String, f64>,
    held: BTreeMap<String, (f64, BTreeMap<String, f64>)>,
    // Hop -> (ms summed, (the heaviest instance's ms, its cause)).
    path: BTreeMap<String, (f64, (f64, String))>,
}

impl ExplanationSum {
    pub fn add(&mut self, s: &Span) {
        let e = &mut self.e;
        e.requests += 1;
        let Some(j) = &s.joined else { return };
        e.enriched += 1;
        e.duration_ms += s.duration_ms();
        if let (Some(own), Some(other), Some(none)) = (j.cpu_trace_ms, j.cpu_other_traces_ms, j.cpu_no_span_ms) {
            e.cpu_measured += 1;
            e.own_cpu_ms += own;
            e.other_requests_cpu_ms += other;
            e.no_span_cpu_ms += none;
        }
        if let (Some(other), Some(own), Some(idle)) = (j.off_cpu_other_traces_ms, j.off_cpu_trace_ms, j.off_cpu_no_span_ms) {
            e.off_cpu_measured += 1;
            e.other_requests_off_cpu_ms += other;
            e.blocked_in_it_ms += own;
            e.idle_ms += idle;
        }
        if let Some(runnable) = j.off_cpu_runnable_ms {
            e.runnable_measured += 1;
            e.cpu_starved_ms += runnable;
        }
        if let Some(bytes) = j.alloc_bytes {
            e.alloc_measured += 1;
            e.alloc_bytes += bytes;
        }
        e.samples += j.samples.unwrap_or(0);
        for (frame, share) in j.top_frames.iter().filter_map(|f| parse_frame(f)) {
            *self.own.entry(frame).or_default() += share * j.cpu_trace_ms.unwrap_or(0.0);
        }
        for (frame, share) in j.top_alloc_frames.iter().filter_map(|f| parse_frame(f)) {
            *self.alloc.entry(frame).or_default() += share * j.alloc_bytes.unwrap_or(0) as f64;
        }
        let hops: Vec<Hop> = j.path.iter().filter_map(|h| parse_hop(h)).collect();
        if !hops.is_empty() {
            e.path_requests += 1;
            e.path_rest_ms += j.path_others_ms;
        }
        for h in hops {
            let slot = self.path.entry(h.hop).or_default();
            slot.0 += h.ms;
            if h.ms > slot.1 .0 {
                slot.1 = (h.ms, h.cause.unwrap_or_default());
            }
        }
        let routes: Vec<RouteHold> = j.held_by_routes.iter().filter_map(|r| parse_route_hold(r)).collect();
        if routes.is_empty() {
            // Spans of a connector before held_by_routes: its listed traces only.
            for h in j.held_by.iter().filter_map(|h| parse_holder(h)) {
                let slot = self.held.entry(h.who).or_default();
                slot.0 += h.ms;
                *slot.1.entry(h.frame).or_default() += h.ms;
            }
        }
        for r in routes {
            match r.frame {
                Some(frame) => {
                    let slot = self.held.entry(r.route).or_default();
                    slot.0 += r.ms;
                    *slot.1.entry(frame).or_default() += r.ms;
                }
                None => e.held_by_rest_ms += r.ms,
            }
        }
    }

    /// The explanation, with the `top` heaviest frames and holders (the rest of the holders'
    /// time in `held_by_rest_ms`).
    pub fn finish(self, top: usize) -> Explanation {
        let mut e = self.e;
        e.own_frames = heaviest(self.own, top);
        e.alloc_frames = heaviest(self.alloc, top);
        let mut by_who: Vec<(String, f64, String)> =
            self.held.into_iter().map(|(who, (ms, frames))| (who, ms, heaviest(frames, 1).pop().map(|f| f.0).unwrap_or_default())).collect();
        by_who.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        e.held_by_rest_ms += by_who.iter().skip(top).map(|h| h.1).sum::<f64>();
        by_who.truncate(top);
        e.held_by = by_who;
        let mut path: Vec<(String, f64, String)> = self.path.into_iter().map(|(hop, (ms, (_, cause)))| (hop, ms, cause)).collect();
        path.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        e.path_rest_ms += path.iter().skip(top).map(|h| h.1).sum::<f64>();
        path.truncate(top);
        e.path = path;
        e
    }
}

impl Explanation {
    pub fn of(spans: &[&Span], top: usize) -> Explanation {
        let mut sum = ExplanationSum::default();
        spans.iter().for_each(|s| sum.add(s));
        sum.finish(top)
    }

    /// The text block: one line per part, with its share of the requests' time. A part the
    /// agent did not measure says so rather than showing 0.
    pub fn render(&self, indent: &str) -> String {
        if self.enriched == 0 {
            return format!("{indent}not enriched: no profile of their process and thread covered them (see the Collector's otelcol_connector_spanprofiles_spans)\n");
        }
        let frames = |fs: &[(String, f64)]| fs.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>().join(", ");
        let mut out = String::new();
        // A part's mean per request over the requests that measured it, and its share of their time.
        let line = |what: &str, ms: f64, measured: usize, more: String| {
            let share = mean(self.duration_ms, self.enriched).map_or(0.0, |d| if d > 0.0 { 100.0 * ms / measured as f64 / d } else { 0.0 });
            format!("{indent}{what:<38}{:>9.1} ms {share:>4.0} %{more}\n", ms / measured as f64)
        };
        let own_top = if self.own_frames.is_empty() { String::new() } else { format!("   {}", frames(&self.own_frames)) };
        if self.cpu_measured > 0 {
            out += &line("own CPU", self.own_cpu_ms, self.cpu_measured, own_top);
            out += &line("other requests on its thread, on CPU", self.other_requests_cpu_ms, self.cpu_measured, String::new());
            out += &line("CPU with no span (GC, the loop)", self.no_span_cpu_ms, self.cpu_measured, String::new());
        } else {
            out += &format!("{indent}{:<38}not measured: no sample of their thread supported a figure\n", "CPU");
        }
        if self.off_cpu_measured > 0 {
            out += &line("other requests on its thread, off CPU", self.other_requests_off_cpu_ms, self.off_cpu_measured, String::new());
            out += &line("off CPU inside it (blocked)", self.blocked_in_it_ms, self.off_cpu_measured, String::new());
            // Where the requests called other services the Collector saw, their wait on those
            // is in this idle time: the path below says on which, and why.
            let idle = if self.path_requests > 0 { "idle (its calls below, I/O, timers)" } else { "idle (waiting for I/O, timers)" };
            out += &line(idle, self.idle_ms, self.off_cpu_measured, String::new());
            if self.runnable_measured > 0 {
                out += &line("waiting for a CPU (preempted, throttled)", self.cpu_starved_ms, self.runnable_measured, String::new());
            }
        } else {
            out += &format!("{indent}{:<38}not measured: the agent ran without --off-cpu\n", "off CPU");
        }
        if !self.held_by.is_empty() {
            let per = |ms: f64| ms / self.enriched as f64;
            // A holder whose mean rounds to 0.0 ms names nothing: it counts in `others`.
            let (named, tiny): (Vec<_>, Vec<_>) = self.held_by.iter().partition(|h| per(h.1) >= 0.05);
            let mut held: Vec<String> = named.iter().map(|(who, ms, frame)| format!("{who} {:.1} ms in {frame}", per(*ms))).collect();
            let rest = self.held_by_rest_ms + tiny.iter().map(|h| h.1).sum::<f64>();
            if rest > 0.0 {
                held.push(format!("others {:.1} ms", per(rest)));
            }
            let all = self.held_by.iter().map(|h| h.1).sum::<f64>() + self.held_by_rest_ms;
            out += &format!("{indent}{:<38}{} (= {:.1} ms)\n", "held by", held.join(", "), per(all));
        }
        if !self.path.is_empty() {
            out += &self.render_path(indent);
        }
        match mean(self.alloc_bytes as f64, self.alloc_measured) {
            Some(bytes) => {
                let alloc_top = if self.alloc_frames.is_empty() { String::new() } else { format!("   {}", frames(&self.alloc_frames)) };
                out += &format!("{indent}{:<38}{:>9.2} MB{alloc_top}\n", "allocated", bytes / 1e6);
            }
            None => out += &format!("{indent}{:<38}not measured: the agent ran without --alloc\n", "allocated"),
        }
        out += &format!("{indent}({} CPU samples; a CPU figure is good to about one sampling period per request)\n", self.samples);
        out
    }
}

impl Explanation {
    /// The path across services (`thread_ctx.path`): each hop's mean ms over the requests that
    /// carried a path, its share of their time, and the cause of its heaviest instance.
    fn render_path(&self, indent: &str) -> String {
        let n = self.path_requests as f64;
        let duration = mean(self.duration_ms, self.enriched).unwrap_or(0.0);
        let mut out = format!(
            "{indent}path across services ({} of {} request{}; a wait on another service is its request's own time, and why):\n",
            self.path_requests,
            self.enriched,
            if self.enriched == 1 { "" } else { "s" }
        );
        for (hop, ms, cause) in &self.path {
            let share = if duration > 0.0 { 100.0 * ms / n / duration } else { 0.0 };
            let cause = if cause.is_empty() { String::new() } else { format!("   {cause}") };
            out += &format!("{indent}  {hop:<36}{:>9.1} ms {share:>4.0} %{cause}\n", ms / n);
        }
        if self.path_rest_ms > 0.0 {
            out += &format!("{indent}  {:<36}{:>9.1} ms\n", "other hops", self.path_rest_ms / n);
        }
        out
    }
}

/// A part's mean per request, over the `measured` requests whose spans carried it (None: none did).
pub fn mean(total: f64, measured: usize) -> Option<f64> {
    (measured > 0).then(|| total / measured as f64)
}

fn heaviest(m: BTreeMap<String, f64>, n: usize) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

/// One route: its requests' latency and the explanation of its slowest 1 %.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteReport {
    pub route: String,
    /// Where the route came from when its spans had no `http.route` (`samples`, `path`).
    pub route_source: Option<String>,
    pub requests: usize,
    pub enriched: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The slowest 1 % (at least one request).
    pub slowest: Explanation,
    pub slowest_from_ms: f64,
}

/// Who made others wait: one holder route and its top line, over every enriched request.
#[derive(Debug, Clone, PartialEq)]
pub struct Inflicted {
    /// The holder's route (or span name); `(other routes)` for those a span did not list.
    pub route: String,
    /// Its top frame on the requests it delayed, `function (file:line)`; None for the rest.
    pub frame: Option<String>,
    /// The time it made other requests wait on their thread.
    pub ms: f64,
    /// The requests it delayed.
    pub delayed: u64,
    /// Its share of all the time requests waited for others (0-1).
    pub share: f64,
}

/// Who made others wait, from each request's `held_by_routes`: the `top` heaviest holders
/// (route and line), the rest in one `(others)` row, so that the rows add up to `waiting_ms`.
#[derive(Debug, Default)]
struct InflictedSum {
    by: BTreeMap<(String, Option<String>), (f64, u64)>,
    waiting: f64,
}

impl InflictedSum {
    /// One request (an entry span).
    fn add(&mut self, s: &Span) {
        let Some(j) = &s.joined else { return };
        self.waiting += j.cpu_other_traces_ms.unwrap_or(0.0) + j.off_cpu_other_traces_ms.unwrap_or(0.0);
        for r in j.held_by_routes.iter().filter_map(|r| parse_route_hold(r)) {
            let slot = self.by.entry((r.route, r.frame)).or_default();
            slot.0 += r.ms;
            // One delayed request: this span.
            slot.1 += 1;
        }
    }

    fn finish(self, top: usize) -> (Vec<Inflicted>, f64) {
        let waiting = self.waiting;
        let mut rows: Vec<Inflicted> =
            self.by.into_iter().map(|((route, frame), (ms, delayed))| Inflicted { route, frame, ms, delayed, share: 0.0 }).collect();
        rows.sort_by(|a, b| b.ms.total_cmp(&a.ms).then_with(|| a.route.cmp(&b.route)).then_with(|| a.frame.cmp(&b.frame)));
        if rows.len() > top {
            let rest = rows.split_off(top);
            rows.push(Inflicted {
                route: "(others)".into(),
                frame: None,
                ms: rest.iter().map(|r| r.ms).sum(),
                delayed: rest.iter().map(|r| r.delayed).sum(),
                share: 0.0,
            });
        }
        for r in &mut rows {
            r.share = if waiting > 0.0 { r.ms / waiting } else { 0.0 };
        }
        (rows, waiting)
    }
}

/// The report of a file's spans.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub spans: usize,
    pub routes: Vec<RouteReport>,
    /// Who made others wait, heaviest first; its ms add up to `waiting_ms`.
    pub inflicted: Vec<Inflicted>,
    /// The time every enriched request waited for others (cpu + off_cpu other_traces_ms).
    pub waiting_ms: f64,
    /// `--slowest N`: the N slowest requests, each explained.
    pub slowest: Vec<(Span, Explanation)>,
}

/// The report: routes by request count, then name; `slowest` single requests explained.
pub fn report(spans: &[Span], slowest: usize, top: usize) -> Report {
    let mut latencies = Latencies::new(slowest);
    spans.iter().for_each(|s| latencies.add(s));
    let mut tails = latencies.tails();
    spans.iter().for_each(|s| tails.add(s));
    tails.finish(top)
}

/// A report's first pass over the spans: each route's durations (8 bytes a request, the one
/// part of the report that grows with the file), and the `slowest` requests. Spans come one at
/// a time, so a file is streamed: a second pass ([`Tails`]) explains each route's slowest 1 %.
#[derive(Debug, Default)]
pub struct Latencies {
    spans: usize,
    routes: BTreeMap<String, RouteLatency>,
    slowest: Vec<Span>,
    slowest_wanted: usize,
    inflicted: InflictedSum,
}

#[derive(Debug, Default)]
struct RouteLatency {
    durations_ns: Vec<u64>,
    enriched: usize,
    /// Where the route came from (its first request's `route_source`).
    source: Option<String>,
}

impl Latencies {
    /// Keeps the `slowest` slowest requests whole, to explain one by one.
    pub fn new(slowest: usize) -> Latencies {
        Latencies { slowest_wanted: slowest, ..Default::default() }
    }

    pub fn add(&mut self, s: &Span) {
        self.spans += 1;
        if !s.entry {
            return;
        }
        let route = match self.routes.get_mut(s.route_or_name()) {
            Some(r) => r,
            None => self.routes.entry(s.route_or_name().to_string()).or_default(),
        };
        if route.durations_ns.is_empty() {
            route.source = s.route_source.clone();
        }
        route.durations_ns.push(s.duration_ns);
        route.enriched += usize::from(s.joined.is_some());
        self.inflicted.add(s);
        // The slowest first, ties by trace id, then in file order (a stable sort of them all).
        let after = |k: &Span| k.duration_ns > s.duration_ns || (k.duration_ns == s.duration_ns && k.trace_id <= s.trace_id);
        let at = self.slowest.partition_point(after);
        if at < self.slowest_wanted {
            self.slowest.insert(at, s.clone());
            self.slowest.truncate(self.slowest_wanted);
        }
    }

    /// The latency of every route, and what the second pass must explain: per route, the
    /// requests from its slowest 1 %'s shortest duration up. Of the requests that last exactly
    /// that long, the tail holds the last ones met (as a stable sort by duration would).
    pub fn tails(self) -> Tails {
        let routes = self
            .routes
            .into_iter()
            .map(|(route, mut r)| {
                let reqs = &mut r.durations_ns;
                reqs.sort_unstable();
                let n = reqs.len();
                let ms = |ns: u64| ns as f64 / 1e6;
                let q = |p: f64| ms(reqs[((p * n as f64).ceil() as usize).clamp(1, n) - 1]);
                let tail = n.div_ceil(100);
                let from = reqs[n - tail];
                let equal_in_tail = reqs[n - tail..].iter().take_while(|&&d| d == from).count();
                let equal = reqs.partition_point(|&d| d <= from) - reqs.partition_point(|&d| d < from);
                let report = RouteReport {
                    route: route.clone(),
                    route_source: r.source.clone(),
                    requests: n,
                    enriched: r.enriched,
                    p50_ms: q(0.5),
                    p90_ms: q(0.9),
                    p99_ms: q(0.99),
                    max_ms: q(1.0),
                    slowest: Explanation::default(),
                    slowest_from_ms: ms(from),
                };
                (route, RouteTail { report, from_ns: from, skip_equal: equal - equal_in_tail, sum: ExplanationSum::default() })
            })
            .collect();
        Tails { spans: self.spans, routes, slowest: self.slowest, inflicted: self.inflicted }
    }
}

/// A report's second pass: the same spans again, in the same order, each route's slowest 1 %
/// summed as they come.
#[derive(Debug)]
pub struct Tails {
    spans: usize,
    routes: BTreeMap<String, RouteTail>,
    slowest: Vec<Span>,
    inflicted: InflictedSum,
}

#[derive(Debug)]
struct RouteTail {
    report: RouteReport,
    from_ns: u64,
    /// Requests of exactly `from_ns` still to pass over before the tail's own.
    skip_equal: usize,
    sum: ExplanationSum,
}

impl Tails {
    pub fn add(&mut self, s: &Span) {
        if !s.entry {
            return;
        }
        let Some(r) = self.routes.get_mut(s.route_or_name()) else { return };
        if s.duration_ns < r.from_ns {
            return;
        }
        if s.duration_ns == r.from_ns && r.skip_equal > 0 {
            r.skip_equal -= 1;
            return;
        }
        r.sum.add(s);
    }

    pub fn finish(self, top: usize) -> Report {
        let mut routes: Vec<RouteReport> = self.routes.into_values().map(|r| RouteReport { slowest: r.sum.finish(top), ..r.report }).collect();
        routes.sort_by(|a, b| b.requests.cmp(&a.requests).then_with(|| a.route.cmp(&b.route)));
        let slowest = self
            .slowest
            .into_iter()
            .map(|s| {
                let e = Explanation::of(&[&s], top);
                (s, e)
            })
            .collect();
        let (inflicted, waiting_ms) = self.inflicted.finish(top);
        Report { spans: self.spans, routes, inflicted, waiting_ms, slowest }
    }
}

/// What the report says of a route the connector named because its spans had no `http.route`.
pub fn route_source_note(source: Option<&str>) -> Option<&'static str> {
    match source? {
        "samples" => Some("no http.route on its spans: the route is the one their samples carried"),
        "path" => Some("no http.route on its spans: the route is their method and templated path"),
        "graphql" => Some("no http.route on its spans: the route is the GraphQL operation they executed"),
        _ => None,
    }
}

impl Report {
    /// The report as text.
    pub fn render(&self, source: &str) -> String {
        let requests: usize = self.routes.iter().map(|r| r.requests).sum();
        let enriched: usize = self.routes.iter().map(|r| r.enriched).sum();
        let mut out =
            format!("{source}: {} spans, {requests} requests of {} routes ({enriched} enriched by spanprofiles)\n\n", self.spans, self.routes.len());
        out += &format!("{:<32}{:>9}{:>10}{:>10}{:>10}{:>10}\n", "ROUTE", "REQUESTS", "p50 ms", "p90 ms", "p99 ms", "max ms");
        for r in &self.routes {
            out += &format!("{:<32}{:>9}{:>10.1}{:>10.1}{:>10.1}{:>10.1}\n", r.route, r.requests, r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms);
        }
        if !self.inflicted.is_empty() {
            out += &format!(
                "\nwho made others wait: the time requests waited on their thread while other requests held it ({:.1} ms in all), by holder\n",
                self.waiting_ms
            );
            out += &format!("{:<32}{:<44}{:>14}{:>10}{:>8}\n", "HOLDER ROUTE", "TOP LINE", "INFLICTED ms", "DELAYED", "SHARE");
            for r in &self.inflicted {
                let frame = r.frame.as_deref().unwrap_or("-");
                out += &format!("{:<32}{:<44}{:>14.1}{:>10}{:>6.0} %\n", r.route, frame, r.ms, r.delayed, 100.0 * r.share);
            }
        }
        for r in &self.routes {
            let e = &r.slowest;
            out += &format!(
                "\n{}: the slowest 1 % ({} request{}, {:.1} ms and more): where their time went, per request\n",
                r.route,
                e.requests,
                if e.requests == 1 { "" } else { "s" },
                r.slowest_from_ms
            );
            if let Some(note) = route_source_note(r.route_source.as_deref()) {
                out += &format!("  ({note})\n");
            }
            out += &e.render("  ");
        }
        if !self.slowest.is_empty() {
            out += &format!("\nthe {} slowest requests:\n", self.slowest.len());
            for (s, e) in &self.slowest {
                out += &format!("\n  {:.1} ms  {}  {}  trace {}\n", s.duration_ms(), s.service, s.route_or_name(), s.trace_id);
                out += &e.render("    ");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(route: &str, ms: f64, joined: Option<Joined>) -> Span {
        Span {
            trace_id: format!("{:032x}", (ms * 1000.0) as u64),
            span_id: "00f067aa0ba902b7".into(),
            parent_span_id: String::new(),
            service: "shop".into(),
            name: format!("GET {route}"),
            route: Some(route.into()),
            route_source: None,
            entry: true,
            start_unix_ns: 1,
            duration_ns: (ms * 1e6) as u64,
            joined,
        }
    }

    fn waited(ms: f64) -> Joined {
        Joined {
            cpu_span_ms: Some(1.0),
            cpu_trace_ms: Some(1.0),
            cpu_other_traces_ms: Some(ms * 0.6),
            cpu_no_span_ms: Some(0.0),
            off_cpu_other_traces_ms: Some(ms * 0.1),
            off_cpu_no_span_ms: Some(ms * 0.3 - 1.0),
            off_cpu_trace_ms: Some(0.0),
            samples: Some(4),
            top_frames: vec!["respond (service.js:40) 100%".into()],
            held_by: vec![format!("/hog 4bf92f3577b34da6a3ce929d0e0e4736 {:.1}ms: hogCPU (service.js:24)", ms * 0.7)],
            ..Default::default()
        }
    }

    #[test]
    fn holders_and_frames_parse_as_the_connector_writes_them() {
        let h = parse_holder("GET /api/users/:id 4bf92f3577b34da6a3ce929d0e0e4736 12.5ms: hogCPU (service.js:24)").unwrap();
        assert_eq!(
            h,
            Holder {
                who: "GET /api/users/:id".into(),
                trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
                ms: 12.5,
                frame: "hogCPU (service.js:24)".into()
            }
        );
        assert_eq!(parse_holder("(unknown) 4bf92f3577b34da6a3ce929d0e0e4736 0.4ms: (no stack)").unwrap().who, "(unknown)");
        assert_eq!(parse_holder("no trace id here 1ms: x"), None);
        assert_eq!(parse_frame("hogCPU (service.js:24) 75%"), Some(("hogCPU (service.js:24)".into(), 0.75)));
        assert_eq!(parse_frame("gc <1%"), Some(("gc".into(), 0.005)));
        assert_eq!(parse_frame("nopercent"), None);
    }

    #[test]
    fn per_route_latency_and_the_slowest_one_percent_explained() {
        let mut spans: Vec<Span> = (1..=200).map(|i| span("/wait", 30.0 + i as f64 * 0.1, Some(waited(30.0)))).collect();
        spans.push(span("/wait", 120.0, Some(waited(120.0))));
        spans.push(span("/wait", 110.0, Some(waited(110.0))));
        spans.push(span("/hog", 25.0, None));
        spans.push(Span { entry: false, name: "db".into(), route: None, ..span("/x", 500.0, None) });
        let r = report(&spans, 1, 3);
        assert_eq!(r.spans, 204);
        assert_eq!(r.routes.iter().map(|r| (r.route.as_str(), r.requests)).collect::<Vec<_>>(), [("/wait", 202), ("/hog", 1)]);
        let wait = &r.routes[0];
        assert_eq!((wait.max_ms, wait.p50_ms), (120.0, 40.1));
        // 202 requests: the slowest 1 % is 3 of them.
        assert_eq!(wait.slowest.requests, 3);
        assert!((wait.slowest.duration_ms - (120.0 + 110.0 + 50.0)).abs() < 1e-6);
        assert_eq!(wait.slowest.held_by[0].0, "/hog");
        assert_eq!(wait.slowest.held_by[0].2, "hogCPU (service.js:24)");
        assert_eq!(wait.slowest.own_frames[0].0, "respond (service.js:40)");
        assert_eq!(r.routes[1].slowest.enriched, 0, "the hog span was not enriched");
        assert_eq!(r.slowest.len(), 1);
        assert_eq!(r.slowest[0].0.duration_ms(), 120.0, "entry spans only: the 500 ms db span is not a request");
        let text = r.render("traces.pb");
        assert!(text.contains("/wait: the slowest 1 % (3 requests, 50.0 ms and more)"), "{text}");
        assert!(text.contains("other requests on its thread, on CPU"), "{text}");
        assert!(text.contains("/hog 60.7 ms in hogCPU (service.js:24)"), "{text}");
        assert!(text.contains("not enriched"), "{text}");
        assert!(text.contains("allocated                             not measured: the agent ran without --alloc"), "{text}");
        assert!(!text.contains("without --off-cpu"), "off-CPU time was measured: {text}");
    }

    /// A request held by three routes, one past the span's top ones: `held_by_routes` rolls the
    /// other requests' time up by route, so the report's "held by" line adds up to it, and the
    /// who-made-others-wait table sums it over the requests.
    fn held(ms_hog: f64, ms_block: f64, rest: f64) -> Joined {
        Joined {
            cpu_span_ms: Some(0.0),
            cpu_trace_ms: Some(0.0),
            cpu_other_traces_ms: Some(ms_hog),
            cpu_no_span_ms: Some(0.0),
            off_cpu_other_traces_ms: Some(ms_block + rest),
            off_cpu_trace_ms: Some(0.0),
            off_cpu_no_span_ms: Some(1.0),
            off_cpu_runnable_ms: Some(2.0),
            held_by: vec![format!("/hog 4bf92f3577b34da6a3ce929d0e0e4736 {ms_hog:.1}ms: hogCPU (service.js:24)")],
            held_by_others: 2,
            held_by_others_ms: ms_block + rest,
            held_by_routes: vec![
                format!("/hog {ms_hog:.1}ms in 1 requests: hogCPU (service.js:24)"),
                format!("GET /block {ms_block:.1}ms in 1 requests: blockFor (service.js:35)"),
                format!("(1 other routes) {rest:.1}ms in 1 requests"),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn route_holds_parse_as_the_connector_writes_them() {
        assert_eq!(
            parse_route_hold("GET /block 12.5ms in 3 requests: blockFor (service.js:35)"),
            Some(RouteHold { route: "GET /block".into(), ms: 12.5, requests: 3, frame: Some("blockFor (service.js:35)".into()) })
        );
        assert_eq!(
            parse_route_hold("(4 other routes) 1.5ms in 6 requests"),
            Some(RouteHold { route: OTHER_ROUTES.into(), ms: 1.5, requests: 6, frame: None })
        );
        assert_eq!(parse_route_hold("/x 1ms in many requests: f"), None);
        assert_eq!(parse_route_hold("/x 1.0ms in 2 requests"), None, "a route without its frame");
    }

    #[test]
    fn held_by_adds_up_and_who_made_others_wait() {
        let spans = [span("/wait", 100.0, Some(held(30.0, 20.0, 0.5))), span("/wait", 90.0, Some(held(50.0, 0.0, 1.5)))];
        let e = Explanation::of(&spans.iter().collect::<Vec<_>>(), 2);
        let text = e.render("");
        // Per request: /hog 40, /block 10, others 1: 51 = (30 + 20.5 + 50 + 1.5) / 2.
        assert!(text.contains("held by                               /hog 40.0 ms in hogCPU (service.js:24), GET /block 10.0 ms in blockFor (service.js:35), others 1.0 ms (= 51.0 ms)"), "{text}");
        assert!(text.contains("waiting for a CPU (preempted, throttled)"), "{text}");
        let total = (e.other_requests_cpu_ms + e.other_requests_off_cpu_ms) / 2.0;
        assert!((total - 51.0).abs() < 1e-9);

        let r = report(&spans, 0, 2);
        assert!((r.waiting_ms - 102.0).abs() < 1e-9);
        let rows: Vec<(&str, Option<&str>, f64, u64)> = r.inflicted.iter().map(|i| (i.route.as_str(), i.frame.as_deref(), i.ms, i.delayed)).collect();
        assert_eq!(
            rows,
            [
                ("/hog", Some("hogCPU (service.js:24)"), 80.0, 2),
                ("GET /block", Some("blockFor (service.js:35)"), 20.0, 2),
                ("(others)", None, 2.0, 2)
            ]
        );
        assert!((r.inflicted.iter().map(|i| i.share).sum::<f64>() - 1.0).abs() < 1e-9, "the rows add up to all the waiting");
        let text = r.render("traces.pb");
        assert!(text.contains("who made others wait"), "{text}");
        assert!(
            text.contains("/hog                            hogCPU (service.js:24)                                80.0         2    78 %"),
            "{text}"
        );
    }

    /// Without --off-cpu the off-CPU parts are missing from the spans: the report says they were
    /// not measured instead of showing 0 ms, and means are over the spans that had each part.
    #[test]
    fn parts_the_agent_did_not_measure_say_so() {
        let cpu_only = Joined { off_cpu_other_traces_ms: None, off_cpu_no_span_ms: None, off_cpu_trace_ms: None, ..waited(40.0) };
        let with_alloc = Joined { alloc_bytes: Some(3_000_000), ..cpu_only.clone() };
        let spans = [span("/wait", 40.0, Some(cpu_only)), span("/wait", 41.0, Some(with_alloc))];
        let e = Explanation::of(&spans.iter().collect::<Vec<_>>(), 3);
        assert_eq!((e.enriched, e.off_cpu_measured, e.alloc_measured), (2, 0, 1));
        let text = e.render("");
        assert!(text.contains("off CPU                               not measured: the agent ran without --off-cpu"), "{text}");
        assert!(!text.contains("idle (waiting"), "{text}");
        assert!(text.contains("allocated                                  3.00 MB"), "the mean over the one span that measured it: {text}");
    }

    /// A span whose thread no sample supported carries no CPU field: the report says the CPU
    /// was not measured rather than 0 ms; holders that round to 0.0 ms count in `others`; a
    /// route the connector named says where it came from.
    #[test]
    fn unmeasured_cpu_tiny_holders_and_named_routes_say_so() {
        let no_cpu = Joined {
            cpu_span_ms: None,
            cpu_trace_ms: None,
            cpu_other_traces_ms: None,
            cpu_no_span_ms: None,
            samples: None,
            held_by: vec!["(unknown) 4bf92f3577b34da6a3ce929d0e0e4736 0.0ms: (no stack)".into()],
            ..waited(40.0)
        };
        let mut s = span("/quote/:sku", 40.0, Some(no_cpu));
        s.route_source = Some("samples".into());
        let r = report(&[s], 0, 3);
        assert_eq!(r.routes[0].slowest.cpu_measured, 0);
        let text = r.render("traces.pb");
        assert!(text.contains("CPU                                   not measured: no sample of their thread supported a figure"), "{text}");
        assert!(!text.contains("own CPU"), "{text}");
        assert!(!text.contains("(unknown)"), "{text}");
        assert!(text.contains("(no http.route on its spans: the route is the one their samples carried)"), "{text}");
    }

    #[test]
    fn hops_parse_as_the_connector_writes_them() {
        let h = parse_hop("waiting on inventory /stock/:sku 60.0ms: cpu 20.0ms in recomputeStockLevels (inventory.js:13); waiting for a CPU 15.0ms")
            .unwrap();
        assert_eq!(h.hop, "waiting on inventory /stock/:sku");
        assert_eq!(h.ms, 60.0);
        assert_eq!(h.cause.as_deref(), Some("cpu 20.0ms in recomputeStockLevels (inventory.js:13); waiting for a CPU 15.0ms"));
        assert_eq!(
            parse_hop("network to inventory /stock/:sku 10.0ms"),
            Some(Hop { hop: "network to inventory /stock/:sku".into(), ms: 10.0, cause: None })
        );
        assert_eq!(parse_hop("gateway query (anonymous) 3.5ms: no samples").unwrap().hop, "gateway query (anonymous)");
        assert_eq!(parse_hop("no figure here"), None);
        assert_eq!(parse_hop("12.0ms"), None, "a hop has a name");
    }

    /// The slowest 1 % of a GraphQL operation, across services: each hop's mean over the requests
    /// that carried a path, with the cause of its heaviest instance.
    #[test]
    fn the_path_across_services_is_summed_per_route() {
        let path = |stock: f64, own: f64| Joined {
            path: vec![
                format!("waiting on inventory /stock/:sku {stock:.1}ms: cpu {:.1}ms in recomputeStockLevels (inventory.js:13)", stock / 2.0),
                format!("gateway query ProductPage {own:.1}ms: cpu 2.0ms in resolve (gateway.js:38)"),
            ],
            ..waited(stock + own)
        };
        let spans = [
            Span { route_source: Some("graphql".into()), ..span("query ProductPage", 100.0, Some(path(80.0, 20.0))) },
            Span { route_source: Some("graphql".into()), ..span("query ProductPage", 50.0, Some(path(20.0, 30.0))) },
            Span { route_source: Some("graphql".into()), ..span("query ProductPage", 40.0, Some(waited(40.0))) },
        ];
        let e = Explanation::of(&spans.iter().collect::<Vec<_>>(), 3);
        assert_eq!(e.path_requests, 2);
        assert_eq!(e.path[0], ("waiting on inventory /stock/:sku".into(), 100.0, "cpu 40.0ms in recomputeStockLevels (inventory.js:13)".into()));
        assert_eq!(e.path[1].0, "gateway query ProductPage");
        let text = e.render("  ");
        assert!(text.contains("path across services (2 of 3 requests"), "{text}");
        assert!(text.contains("idle (its calls below, I/O, timers)"), "the idle time is the calls' too: {text}");
        assert!(text.contains("waiting on inventory /stock/:sku") && text.contains("50.0 ms") && text.contains("recomputeStockLevels"), "{text}");
        let r = report(&spans, 0, 3);
        assert!(r.render("traces.pb").contains("the route is the GraphQL operation they executed"), "{}", r.render("traces.pb"));
    }
}
