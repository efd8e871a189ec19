//! The agent's own metrics in the Prometheus text format (version 0.0.4): the figures of the
//! status line as counters and gauges with stable names, so that an operator can graph and
//! alert on the agent without reading its log. Updated once a window by the sampling loop,
//! read by the metrics endpoint's thread (metrics_server.rs) at each scrape.

use std::fmt::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thread_ctx_agent::WindowStats;
use thread_ctx_otlp::ExporterStats;

/// Running totals since the agent started, and the gauges as of the last window.
#[derive(Debug, Default, Clone)]
pub struct AgentMetrics {
    windows: u64,
    cpu_samples: u64,
    with_span: u64,
    off_cpu: u64,
    alloc: u64,
    ring_drops: u64,
    tracked: u64,
    exited: u64,
    refused: u64,
    stuck: u64,
    delivered: u64,
    /// The last window's figures (the pipeline's own counters are already running totals).
    last: WindowStats,
    export: Option<ExporterStats>,
    outstanding: usize,
    last_window_unix: f64,
}

impl AgentMetrics {
    /// Adds one window's status-line figures; `outstanding`: windows still being symbolized.
    pub fn add_window(&mut self, w: &WindowStats, export: Option<&ExporterStats>, outstanding: usize) {
        self.windows += 1;
        self.cpu_samples += w.cpu_samples;
        self.with_span += w.with_span;
        self.off_cpu += w.off_cpu_intervals;
        self.alloc += w.alloc_samples;
        self.ring_drops += w.dropped_ring_full;
        self.tracked += w.new as u64;
        self.exited += w.exited as u64;
        self.refused += w.skipped as u64;
        self.stuck += w.stuck as u64;
        self.delivered += w.delivered as u64;
        self.last = w.clone();
        self.export = export.cloned();
        self.outstanding = outstanding;
        self.last_window_unix = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs_f64();
    }

    /// The exposition; `rss_bytes`: the agent's resident memory now.
    pub fn render(&self, rss_bytes: u64) -> String {
        let mut m = Exposition::default();
        let c = &self.last.counters;
        m.one("windows_total", "counter", "Windows ended (one status line each).", self.windows as f64);
        m.family(
            "samples_total",
            "counter",
            "Samples the kernel delivered, by kind (off_cpu: intervals off CPU; alloc: allocation samples).",
            "kind",
            &[("cpu", self.cpu_samples as f64), ("off_cpu", self.off_cpu as f64), ("alloc", self.alloc as f64)],
        );
        m.one("samples_with_span_total", "counter", "CPU samples whose thread had published a span.", self.with_span as f64);
        m.one("ring_drops_total", "counter", "Events lost because the BPF ring buffer was full.", self.ring_drops as f64);
        m.family(
            "dropped_total",
            "counter",
            "Samples or addresses left out after the ring buffer, by reason.",
            "reason",
            &[("stack_cap", c.dropped_entry_cap as f64), ("symbolization_behind", c.dropped_behind as f64)],
        );
        m.one("processes", "gauge", "Processes sampled now.", self.last.processes as f64);
        m.one("processes_tracked_total", "counter", "Processes that started being sampled.", self.tracked as f64);
        m.one("processes_exited_total", "counter", "Sampled processes that exited.", self.exited as f64);
        m.one(
            "refused_total",
            "counter",
            "Publishing processes not sampled (unreadable, over the target limit, or stuck).",
            (self.refused + self.stuck) as f64,
        );
        m.one("stuck_total", "counter", "Processes skipped because a read of them blocked past --process-timeout.", self.stuck as f64);
        m.family(
            "cache_evictions_total",
            "counter",
            "Entries dropped from the bounded caches, by cache.",
            "cache",
            &[
                ("js_names", c.js_names_evicted as f64),
                ("native_names", c.native_names_evicted as f64),
                ("attribute_sets", c.attrs_evicted as f64),
                ("thread_names", c.thread_names_evicted as f64),
                ("kept_names", c.names.evicted as f64),
            ],
        );
        let n = &c.names;
        m.family(
            "kept_names_total",
            "counter",
            "Names kept across windows: JS frames and native addresses named (misses) or found named in an earlier window (hits), kept JS names checked against the target's heap and found stale.",
            "outcome",
            &[
                ("js_named", n.js_named as f64),
                ("js_reused", n.js_reused as f64),
                ("js_checked", n.js_checked as f64),
                ("js_stale", n.js_stale as f64),
                ("native_named", n.native_named as f64),
                ("native_reused", n.native_reused as f64),
            ],
        );
        m.one(
            "js_naming_batches_total",
            "counter",
            "Rounds of JS frame naming (one read of a target's heap for all their checks).",
            n.batches as f64,
        );
        let k = &c.cached;
        m.family(
            "cache_entries",
            "gauge",
            "Entries the bounded caches hold, by cache.",
            "cache",
            &[
                ("native_names", k.native_names as f64),
                ("objects_open", k.objects_open as f64),
                ("js_functions", k.js_functions as f64),
                ("v8_heap", k.v8_entries as f64),
                ("attribute_sets", k.attr_sets as f64),
                ("thread_names", k.thread_names as f64),
                ("kept_frames", k.kept_frames as f64),
                ("kept_names", k.kept_names as f64),
            ],
        );
        let source_maps = thread_ctx_profile::source_map_budget::global().lock().map_or(0, |s| s.held());
        m.family(
            "cache_bytes",
            "gauge",
            "Bytes the bounded caches hold, by cache.",
            "cache",
            &[("native_names", k.native_name_bytes as f64), ("v8_heap", k.v8_bytes as f64), ("source_maps", source_maps as f64)],
        );
        m.one(
            "symbolization_lag_seconds",
            "gauge",
            "Longest time a window delivered since the last status line took from its end to the sinks.",
            self.last.delivery_lag_ns as f64 / 1e9,
        );
        let slowest: Vec<_> = self.last.slowest.iter().map(|(service, ns)| (service.as_str(), *ns as f64 / 1e9)).collect();
        m.family(
            "process_symbolization_seconds",
            "gauge",
            "Time the symbolization thread took to finish a service's profile in the windows delivered since the last status line (the slowest services only).",
            "service",
            &slowest,
        );
        m.one("symbolization_windows_outstanding", "gauge", "Windows ended and not yet symbolized.", self.outstanding as f64);
        m.one("windows_delivered_total", "counter", "Windows symbolized and handed to the sinks (OTLP, pprof files).", self.delivered as f64);
        m.one("last_window_timestamp_seconds", "gauge", "When the last window ended (Unix time).", self.last_window_unix);
        m.family(
            "heap_bytes",
            "gauge",
            "The allocator's bytes: allocated (in_use) and free but kept (free).",
            "state",
            &[("in_use", self.last.heap.in_use as f64), ("free", self.last.heap.free as f64)],
        );
        m.one("resident_memory_bytes", "gauge", "The agent's resident set size.", rss_bytes as f64);
        if let Some(e) = &self.export {
            let outcomes = [
                ("sent", e.sent),
                ("failed", e.failed),
                ("dropped_queue_full", e.dropped_queue_full),
                ("dropped_retries_exhausted", e.dropped_retries_exhausted),
                ("dropped_shutdown", e.dropped_shutdown),
            ];
            let requests: Vec<_> = outcomes.iter().map(|(o, n)| (*o, n.requests as f64)).collect();
            let samples: Vec<_> = outcomes.iter().map(|(o, n)| (*o, n.samples as f64)).collect();
            m.family("exports_total", "counter", "OTLP export requests by outcome (failed: refused for good by the endpoint).", "outcome", &requests);
            m.family("export_samples_total", "counter", "OTLP Sample messages in those requests, by outcome.", "outcome", &samples);
            m.one("export_retries_total", "counter", "Export attempts that failed transiently and were made again.", e.retries as f64);
            m.one(
                "export_rejected_profiles_total",
                "counter",
                "Profiles the endpoint rejected inside accepted requests.",
                e.rejected_profiles as f64,
            );
            m.one("export_queued", "gauge", "Export requests queued or being sent now.", (e.queued.requests + e.in_flight.requests) as f64);
        }
        m.0
    }
}

/// The agent's resident set size, from /proc/self/statm (pages); 0 when unreadable.
pub fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf only reads a system constant.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64
}

/// Text format 0.0.4: a HELP and a TYPE line per family, every name under `thread_ctx_agent_`.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    fn one(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.header(name, kind, help);
        let _ = writeln!(self.0, "thread_ctx_agent_{name} {value}");
    }

    fn family(&mut self, name: &str, kind: &str, help: &str, label: &str, series: &[(&str, f64)]) {
        self.header(name, kind, help);
        for (value_of_label, value) in series {
            // A label value is any UTF-8 but for these three, escaped (a service names itself).
            let escaped = value_of_label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            let _ = writeln!(self.0, "thread_ctx_agent_{name}{{{label}=\"{escaped}\"}} {value}");
        }
    }

    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP thread_ctx_agent_{name} {help}\n# TYPE thread_ctx_agent_{name} {kind}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_up_over_windows_and_every_series_has_its_family() {
        let mut m = AgentMetrics::default();
        let w = WindowStats { cpu_samples: 100, with_span: 90, dropped_ring_full: 2, new: 1, ..Default::default() };
        m.add_window(&w, Some(&ExporterStats::default()), 0);
        m.add_window(&w, None, 1);
        let text = m.render(4096);
        for line in ["thread_ctx_agent_windows_total 2", "thread_ctx_agent_samples_total{kind=\"cpu\"} 200", "thread_ctx_agent_ring_drops_total 4"] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        let mut named = WindowStats::default();
        named.finished("a \"quoted\\ name\n", 1_500_000_000);
        m.add_window(&named, None, 0);
        let text = m.render(4096);
        assert!(text.contains("thread_ctx_agent_process_symbolization_seconds{service=\"a \\\"quoted\\\\ name\\n\"} 1.5\n"), "escaped:\n{text}");
        assert!(!text.contains("exports_total"), "no exporter in the last window: no export series:\n{text}");
        for series in text.lines().filter(|l| !l.starts_with('#')) {
            let name = series.split(['{', ' ']).next().unwrap();
            assert!(text.contains(&format!("# TYPE {name} ")), "{name} has a TYPE line:\n{text}");
        }
    }
}
