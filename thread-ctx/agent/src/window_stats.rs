//! What the agent says about each window: one status line on stderr.

use super::HeapStats;
use thread_ctx_otlp::ExporterStats;
use thread_ctx_profile::pipeline::PipelineCounters;
use thread_ctx_profile::JsNaming;

/// What happened during a window.
#[derive(Debug, Clone, Default)]
pub struct WindowStats {
    pub duration_ns: u64,
    /// Processes tracked at the window's end, and those that started or stopped being tracked in it.
    pub processes: usize,
    pub new: usize,
    pub exited: usize,
    /// Processes that publish but could not be tracked (with why), and over the target limit.
    pub skipped: usize,
    /// Processes skipped because reading them blocked past the timeout.
    pub stuck: usize,
    /// CPU samples delivered by the kernel in the window.
    pub cpu_samples: u64,
    /// CPU samples whose thread had published a span.
    pub with_span: u64,
    pub off_cpu_intervals: u64,
    /// Allocation samples delivered (agent --alloc).
    pub alloc_samples: u64,
    pub dropped_ring_full: u64,
    /// How the JS frames of the CPU samples in the windows symbolized since the last status
    /// line were named, counted once per sample (the symbolization thread finishes a window
    /// after its line: these are mostly the window before's).
    pub js_naming: JsNaming,
    /// Cache evictions and drops since the agent started, and what the caches hold now.
    pub counters: PipelineCounters,
    /// The agent's heap at the window's end.
    pub heap: HeapStats,
    /// Windows handed to the sinks since the last status line, and the longest time one of
    /// them took from its end to its hand-over (symbolization and queueing behind it), in ns.
    pub delivered: usize,
    pub delivery_lag_ns: u64,
    /// The services whose profiles took the symbolization thread longest to finish in those
    /// windows, slowest first: at most [`SLOWEST_SERVICES`], each with its longest time in ns.
    pub slowest: Vec<(String, u64)>,
}

/// How many services [`WindowStats::slowest`] keeps: bounds the metric's series per scrape.
pub const SLOWEST_SERVICES: usize = 10;

impl WindowStats {
    /// Counts `ns` for `service` among the slowest.
    pub fn finished(&mut self, service: &str, ns: u64) {
        match self.slowest.iter_mut().find(|(s, _)| s == service) {
            Some((_, t)) => *t = (*t).max(ns),
            None => self.slowest.push((service.to_string(), ns)),
        }
        self.slowest.sort_by_key(|(_, t)| std::cmp::Reverse(*t));
        self.slowest.truncate(SLOWEST_SERVICES);
    }
}

impl WindowStats {
    /// The status line, in labelled parts: what happened in this window (`window 10.0s:`
    /// processes, samples, ring-buffer drops), then the running counts (`since start:` drops
    /// past the stack cap or symbolization, cache evictions, and with `export` the exporter's
    /// counters), then gauges: what each bounded cache holds (`cached now:`) and what the
    /// allocator holds (`heap:`). The exporter's last error is added when it differs from
    /// `last_error` (which it then becomes).
    pub fn status_line(&self, export: Option<&ExporterStats>, last_error: &mut Option<String>) -> String {
        let c = &self.counters;
        let mut line = format!(
            "thread-ctx agent: window {:.1}s: {} processes ({} new, {} exited, {} skipped{}), {} CPU samples ({} with a span)",
            self.duration_ns as f64 / 1e9,
            self.processes,
            self.new,
            self.exited,
            self.skipped,
            if self.stuck > 0 { format!(", {} stuck", self.stuck) } else { String::new() },
            self.cpu_samples,
            self.with_span
        );
        if self.off_cpu_intervals > 0 {
            line += &format!(", {} off-CPU intervals", self.off_cpu_intervals);
        }
        if self.alloc_samples > 0 {
            line += &format!(", {} allocation samples", self.alloc_samples);
        }
        line += &format!(", dropped: {} ring buffer full", self.dropped_ring_full);
        if !self.js_naming.is_empty() {
            line += &format!(", JS frames in the CPU samples symbolized since the last line: {}", self.js_naming);
        }
        line += &format!("; since start: dropped {} over the distinct-stack cap", c.dropped_entry_cap);
        if c.dropped_behind > 0 {
            line += &format!(", {} addresses with symbolization behind", c.dropped_behind);
        }
        if c.js_heap_reads.calls > 0 {
            let r = c.js_heap_reads;
            line += &format!(", V8 heap reads: {} ({:.1} MiB)", r.calls, r.bytes as f64 / (1 << 20) as f64);
        }
        let unnamed_js = thread_ctx_profile::symbolizer::processes_with_unnamed_js();
        if unnamed_js > 0 {
            line += &format!(", {unnamed_js} processes with unnamed JS frames (no perf map or jitdump)");
        }
        let (over_share, past_time) =
            (thread_ctx_profile::source_map_budget::maps_over_share(), thread_ctx_profile::source_map_budget::windows_past_time_share());
        if over_share > 0 || past_time > 0 {
            line += &format!(", source maps not applied over their parsed-size share: {over_share}, process windows with map loading cut off at its time share: {past_time}");
        }
        line += &format!(
            ", evicted: {} JS names, {} native names, {} attribute sets, {} thread names, {} kept names",
            c.js_names_evicted, c.native_names_evicted, c.attrs_evicted, c.thread_names_evicted, c.names.evicted
        );
        let n = &c.names;
        if n.js_named + n.native_named > 0 {
            line += &format!(
                ", names kept across windows: JS frames {} named, {} reused ({} checked, {} stale) in {} batches, native {} named, {} reused",
                n.js_named, n.js_reused, n.js_checked, n.js_stale, n.batches, n.native_named, n.native_reused
            );
        }
        if let Some(stats) = export {
            line += &format!(", {stats}");
            if stats.last_error != *last_error {
                if let Some(e) = &stats.last_error {
                    line += &format!("; export error: {e}");
                }
                last_error.clone_from(&stats.last_error);
            }
        }
        let (k, mib) = (&c.cached, |b: u64| b as f64 / (1 << 20) as f64);
        let source_maps = thread_ctx_profile::source_map_budget::global().lock().map_or(0, |s| s.held());
        line += &format!(
            "; cached now: {} native functions ({:.1} MiB of names), {} objects open, {} JS functions, {} V8 heap entries ({:.1} MiB), \
             {} attribute sets, {} thread names, {:.1} MiB of parsed source maps, {} kept frames ({} kept names); heap: {:.1} MiB in use, {:.1} MiB free",
            k.native_names,
            mib(k.native_name_bytes),
            k.objects_open,
            k.js_functions,
            k.v8_entries,
            mib(k.v8_bytes),
            k.attr_sets,
            k.thread_names,
            mib(source_maps),
            k.kept_frames,
            k.kept_names,
            mib(self.heap.in_use),
            mib(self.heap.free)
        );
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_services_are_kept_bounded_each_at_its_longest() {
        let mut w = WindowStats::default();
        for i in 0..30u64 {
            w.finished(&format!("s{}", i % 15), i);
        }
        assert_eq!(w.slowest.len(), SLOWEST_SERVICES);
        assert_eq!(w.slowest[0], ("s14".to_string(), 29), "slowest first, at its longest: {:?}", w.slowest);
    }

    #[test]
    fn the_window_part_and_the_running_part_are_labelled_apart() {
        let w = WindowStats {
            duration_ns: 10_000_000_000,
            processes: 2,
            new: 1,
            cpu_samples: 372,
            with_span: 341,
            dropped_ring_full: 3,
            ..Default::default()
        };
        let line = w.status_line(Some(&ExporterStats::default()), &mut None);
        let (window, since) = line.split_once("; since start: ").expect(&line);
        assert_eq!(
            window,
            "thread-ctx agent: window 10.0s: 2 processes (1 new, 0 exited, 0 skipped), 372 CPU samples (341 with a span), dropped: 3 ring buffer full"
        );
        assert!(since.starts_with("dropped 0 over the distinct-stack cap, evicted: 0 JS names"), "{since}");
        assert!(since.contains(", exported 0 requests (0 OTLP Sample messages"), "the exporter's counts are running ones: {since}");
        assert!(since.contains("; 0 queued now; cached now: "), "a gauge says it is one: {since}");
        let (_, now) = since.split_once("; cached now: ").expect(since);
        assert!(now.starts_with("0 native functions (0.0 MiB of names), 0 objects open, 0 JS functions"), "{now}");
        assert!(now.contains("; heap: ") && now.ends_with(" MiB free"), "what the caches and the allocator hold, last: {now}");
    }
}
