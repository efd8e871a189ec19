//! `agent --endpoint`: each window becomes one OTLP export request, encoded once and queued on the
//! [`Exporter`] (which never blocks the agent).

use super::encode::{export_request, ProcessWindow};
use super::Exporter;
use thread_ctx_model::sink::{SinkError, WindowSink};
use thread_ctx_model::window::Window;

pub struct OtlpSink {
    pub exporter: Exporter,
}

impl WindowSink for OtlpSink {
    fn write(&mut self, w: &Window) -> Result<(), SinkError> {
        if w.processes.is_empty() {
            return Ok(());
        }
        let windows: Vec<ProcessWindow> = w
            .processes
            .iter()
            .map(|p| ProcessWindow {
                resource: &p.resource,
                profile: &p.profile,
                start_unix_ns: w.start_unix_ns,
                duration_ns: w.duration_ns,
                throttling: p.cpu_throttling.as_ref(),
            })
            .collect();
        self.exporter.export(export_request(&windows));
        Ok(())
    }
}
