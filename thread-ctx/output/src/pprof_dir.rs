//! `agent --pprof-dir DIR`: one gzipped pprof file per process per window,
//! named `SERVICE-PID-START.pb.gz`, 0600 in a 0700 directory: they name every
//! profiled user's functions and source files, which other users may not read.

use super::pprof;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use thread_ctx_model::sink::{SinkError, WindowSink};
use thread_ctx_model::window::Window;

pub struct PprofDir {
    pub dir: PathBuf,
}

impl PprofDir {
    /// The sink for `dir`, made 0700 when group or others could list or enter it; the note
    /// says so (None when it already was).
    pub fn open(dir: PathBuf) -> std::io::Result<(PprofDir, Option<String>)> {
        let mode = std::fs::metadata(&dir)?.permissions().mode() & 0o7777;
        let mut note = None;
        if mode & 0o077 != 0 {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
            note = Some(format!("--pprof-dir: {} was mode {mode:04o}, now 0700: its files name other users' code", dir.display()));
        }
        Ok((PprofDir { dir }, note))
    }
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
            if let Err(e) = pprof::write_private_file(&self.dir.join(&name), &p.profile, &meta) {
                first.get_or_insert(SinkError::Write { sink: "--pprof-dir", reason: format!("{e:#}") });
            }
        }
        first.map_or(Ok(()), Err)
    }
}

fn file_safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use thread_ctx_discovery::process_context_proto::Resource;
    use thread_ctx_model::window::WindowProcess;
    use thread_ctx_model::Profile;

    fn mode(p: &std::path::Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    // A directory others could enter becomes 0700 (said once), a file that was there 0644 is
    // rewritten 0600, a new one is created 0600; a directory already private is left alone.
    #[test]
    fn files_are_0600_in_a_0700_directory() {
        let dir = std::env::temp_dir().join(format!("pprof-dir-modes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let stale = dir.join("shop-7-1.pb.gz");
        std::fs::write(&stale, b"old").unwrap();
        std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o644)).unwrap();

        let (mut sink, note) = PprofDir::open(dir.clone()).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert!(note.unwrap().contains("was mode 0755, now 0700"));
        let process = |pid| WindowProcess {
            pid,
            service_name: "shop".into(),
            resource: Resource::default(),
            profile: Profile::new(pid as i32),
            exited: false,
            cpu_throttling: None,
            finish_ns: 0,
        };
        let w = Window { start_unix_ns: 1_000_000_000, duration_ns: 1_000_000_000, processes: vec![process(7), process(8)] };
        sink.write(&w).unwrap();
        for name in ["shop-7-1.pb.gz", "shop-8-1.pb.gz"] {
            assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
        }
        assert!(crate::pprof::read_file(&stale).is_ok(), "rewritten as a profile");
        let (_, again) = PprofDir::open(dir.clone()).unwrap();
        assert_eq!(again, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
