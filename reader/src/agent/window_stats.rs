//! What the agent says about each window: one status line on stderr.

use crate::otlp::ExporterStats;
use crate::pipeline::PipelineCounters;

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
    pub dropped_ring_full: u64,
    /// Cache evictions and drops since the agent started.
    pub counters: PipelineCounters,
}

impl WindowStats {
    /// The status line; `export` adds the exporter's counters, and its last error when it
    /// differs from `last_error` (which it then becomes).
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
        line += &format!("; dropped: {} ring buffer full, {} over the distinct-stack cap", self.dropped_ring_full, c.dropped_entry_cap);
        if c.dropped_behind > 0 {
            line += &format!(", {} addresses with symbolization behind", c.dropped_behind);
        }
        let unnamed_js = crate::profile::symbolizer::processes_with_unnamed_js();
        if unnamed_js > 0 {
            line += &format!(", {unnamed_js} processes with unnamed JS frames (no perf map or jitdump)");
        }
        line += &format!(
            "; evicted: {} JS names, {} native names, {} attribute sets, {} thread names",
            c.js_names_evicted, c.native_names_evicted, c.attrs_evicted, c.thread_names_evicted
        );
        if let Some(stats) = export {
            line += &format!("; {stats}");
            if stats.last_error != *last_error {
                if let Some(e) = &stats.last_error {
                    line += &format!("; export error: {e}");
                }
                last_error.clone_from(&stats.last_error);
            }
        }
        line
    }
}
