//! `agent --pprof-dir DIR`: one gzipped pprof file per process per window,
//! named `SERVICE-PID-START.pb.gz`.

use super::pprof;
use std::path::PathBuf;
use thread_ctx_model::sink::{SinkError, WindowSink};
use thread_ctx_model::window::Window;

pub struct PprofDir {
    pub dir: PathBuf,
}

impl WindowSink for PprofDir {
    fn write(&mut self, w: &Window) -> Result<(), SinkError> {
        let mut first = None;
        for p in &w.processes {
            let name = format!("{}-{}-{}.pb.gz", file_safe(&p.service_name), p.pid, w.start_unix_ns / 1_000_000_000);
            let meta = pprof::Meta {
                service_name: Some(p.service_name.clone()),
                start_unix_ns: w.start_unix_ns as i64,
                duration_ns: w.duration_ns as i64,
                comments: vec![format!("thread-ctx agent, pid {}", p.pid)],
            };
            if let Err(e) = pprof::write_file(&self.dir.join(&name), &p.profile, &meta) {
                first.get_or_insert(SinkError::Write { sink: "--pprof-dir", reason: format!("{e:#}") });
            }
        }
        first.map_or(Ok(()), Err)
    }
}

fn file_safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect()
}
