//! `agent --pprof-dir DIR`: one gzipped pprof file per process per window,
//! named `SERVICE-PID-START.pb.gz`, each 0600: they name every profiled user's
//! functions and source files, which other users may not read. The directory is
//! the operator's: its mode is never changed (made 0700 it would break a shared
//! directory such as `/tmp`, or a test's scratch directory other users enter),
//! and one line says when others may list it (the names give services and pids).

use super::pprof;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use thread_ctx_model::sink::{SinkError, WindowSink};
use thread_ctx_model::window::Window;

pub struct PprofDir {
    pub dir: PathBuf,
}

impl PprofDir {
    /// The sink for `dir`; the note says when group or others may list it (None when only
    /// its owner may).
    pub fn open(dir: PathBuf) -> std::io::Result<(PprofDir, Option<String>)> {
        let mode = std::fs::metadata(&dir)?.permissions().mode() & 0o7777;
        let note = (mode & 0o077 != 0).then(|| {
            format!(
                "--pprof-dir: {} is mode {mode:04o}: other users may list its file names (service, pid, time); \
                 the files themselves are 0600. A directory of mode 0700 keeps the names private too",
                dir.display()
            )
        });
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

    // A directory others may enter is left as it is (said once), a file that was there 0644 is
    // rewritten 0600, a new one is created 0600; a private directory is not mentioned.
    #[test]
    fn files_are_0600_and_the_directory_is_left_as_it_is() {
        let dir = std::env::temp_dir().join(format!("pprof-dir-modes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let stale = dir.join("shop-7-1.pb.gz");
        std::fs::write(&stale, b"old").unwrap();
        std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o644)).unwrap();

        let (mut sink, note) = PprofDir::open(dir.clone()).unwrap();
        assert_eq!(mode(&dir), 0o755, "the operator's directory keeps its mode");
        assert!(note.unwrap().contains("is mode 0755: other users may list its file names"));
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
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let (_, private) = PprofDir::open(dir.clone()).unwrap();
        assert_eq!(private, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
