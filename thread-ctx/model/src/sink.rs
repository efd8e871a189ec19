//! Where a finished window goes: every window of the pipeline ends in a
//! [`WindowSink`] (OTLP export in `thread_ctx_otlp::OtlpSink`, pprof files in
//! `thread_ctx_output::pprof_dir::PprofDir`, several at once with [`Sinks`]).
//! The trait is all the sinks share, so no output crate depends on another.

use crate::window::Window;

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("{sink}: {reason}")]
    Write { sink: &'static str, reason: String },
}

pub trait WindowSink {
    /// Takes one finished window; an error is reported and the next window is taken as usual.
    fn write(&mut self, window: &Window) -> Result<(), SinkError>;
}

/// Every sink in turn; the first error is returned after all were given the window.
#[derive(Default)]
pub struct Sinks<'a>(pub Vec<&'a mut dyn WindowSink>);

impl WindowSink for Sinks<'_> {
    fn write(&mut self, window: &Window) -> Result<(), SinkError> {
        let mut first = None;
        for s in &mut self.0 {
            if let Err(e) = s.write(window) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}
