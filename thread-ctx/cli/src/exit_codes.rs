//! Every exit code of `thread-ctx`, in one place (docs/cli.md and `--help` list
//! the same table), and the errors that carry them: a handler returns
//! [`Failure`] for what it can name (a usage error, a missing symbol), and
//! [`code_of`] classifies what comes up from the library (permission denied,
//! process gone) by its cause. Anything else is a reader failure.

use anyhow::Result;
use thread_ctx_agent::AgentError;
use thread_ctx_discovery::error::Error as LibError;
use thread_ctx_discovery::{discover, Discovery};
use thread_ctx_profile::pipeline::PipelineError;
use thread_ctx_sampler::SamplerError;

/// Success (`validate`: every record is well formed). Handlers say `ExitCode::SUCCESS`.
#[allow(dead_code)]
pub const EXIT_OK: u8 = 0;
/// `validate` found a malformed record.
pub const EXIT_MALFORMED: u8 = 1;
/// Bad arguments: an unknown flag, a malformed value, a selection that matches nothing.
/// (clap's own parse errors exit 2 as well.)
pub const EXIT_USAGE: u8 = 2;
/// The reader itself failed (eBPF could not load, a file could not be written, ...).
pub const EXIT_READER_FAILED: u8 = 3;
/// The target has no `otel_thread_ctx_v1` (the package is not loaded in it).
pub const EXIT_NO_SYMBOL: u8 = 4;
/// Not allowed to read the target, or to load eBPF.
pub const EXIT_NO_PERMISSION: u8 = 5;
/// The target does not exist (or exited before it could be read).
pub const EXIT_TARGET_GONE: u8 = 6;

/// The table `--help` prints after the commands (docs/cli.md has the same).
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success
  1  validate: a record is malformed
  2  usage error (bad flag or value; a selection that matches nothing)
  3  the reader failed (eBPF did not load, an output could not be written, ...)
  4  the target has no otel_thread_ctx_v1 or otel_thread_ctx_nodejs_v1 (no writer is loaded in it)
  5  no permission to read the target or to load eBPF (run as root)
  6  the target process does not exist (or exited before it could be read)";

/// An error whose exit code is known where it is raised.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// A usage error: `flag` and what was wrong with its value.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Failure { code: EXIT_USAGE, message: message.into() }.into()
}

/// A usage error unless `path` (given with `flag`) is a file.
pub fn existing_file(flag: &str, path: &std::path::Path) -> Result<()> {
    if path.is_file() {
        return Ok(());
    }
    let what = if path.exists() { "is not a file" } else { "does not exist" };
    Err(usage(format!("{flag}: {} {what}", path.display())))
}

/// The exit code for an error: the first cause in its chain that says.
pub fn code_of(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if let Some(f) = cause.downcast_ref::<Failure>() {
            return f.code;
        }
        if let Some(SamplerError::NeedsPrivilege { .. }) = sampler_error(cause) {
            return EXIT_NO_PERMISSION;
        }
        // Only what reads the target says "permission" or "gone": a file we fail to write is a reader failure.
        let os_error = match cause.downcast_ref::<LibError>() {
            Some(LibError::ThreadExited { .. }) => return EXIT_TARGET_GONE,
            Some(LibError::Process { cause, .. } | LibError::Ptrace { cause, .. } | LibError::RemoteRead { cause, .. }) => cause.raw_os_error(),
            Some(LibError::Io { path, cause }) if path.starts_with("/proc/") => cause.raw_os_error(),
            _ => None,
        };
        match os_error {
            Some(libc::EPERM | libc::EACCES) => return EXIT_NO_PERMISSION,
            Some(libc::ENOENT | libc::ESRCH) => return EXIT_TARGET_GONE,
            _ => {}
        }
    }
    EXIT_READER_FAILED
}

/// The sampler's error behind `cause`, also when the pipeline or the agent carries it.
fn sampler_error<'a>(cause: &'a (dyn std::error::Error + 'static)) -> Option<&'a SamplerError> {
    if let Some(s) = cause.downcast_ref::<SamplerError>() {
        return Some(s);
    }
    let pipeline = cause.downcast_ref::<PipelineError>().or(match cause.downcast_ref::<AgentError>() {
        Some(AgentError::Pipeline(p)) => Some(p),
        _ => None,
    });
    match pipeline {
        Some(PipelineError::Sampler(s)) => Some(s),
        _ => None,
    }
}

/// What to add to a permission error about process `pid`: who may read it.
pub fn permission_hint(pid: i32) -> String {
    match std::fs::metadata(format!("/proc/{pid}")) {
        Ok(m) => {
            use std::os::unix::fs::MetadataExt;
            format!("run thread-ctx as root (sudo) or as the target's user (uid {})", m.uid())
        }
        Err(_) => "run thread-ctx as root (sudo) or as the target's user".into(),
    }
}

/// The thread group a task id belongs to: `Some(pid)` when `tid` is a thread
/// other than its process's main thread (/proc/TID exists for every thread,
/// though only processes are listed in /proc).
pub fn thread_group_of(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid: i32 = status.lines().find_map(|l| l.strip_prefix("Tgid:"))?.trim().parse().ok()?;
    (tgid != tid).then_some(tgid)
}

/// Discovery of `otel_thread_ctx_v1` in a process that must exist now.
pub fn discover_live(pid: i32) -> Result<Discovery> {
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        return Err(Failure { code: EXIT_TARGET_GONE, message: format!("no process {pid} (expected the pid of a running process)") }.into());
    }
    let d = discover(pid).map_err(anyhow::Error::from);
    d.map_err(|e| match code_of(&e) {
        EXIT_NO_PERMISSION => {
            let what = match e.downcast_ref::<LibError>() {
                Some(LibError::Process { path, cause, .. } | LibError::Io { path, cause }) => format!("cannot read {path} ({cause})"),
                _ => format!("{e:#}"),
            };
            Failure { code: EXIT_NO_PERMISSION, message: format!("{what}: {}", permission_hint(pid)) }.into()
        }
        EXIT_TARGET_GONE => Failure { code: EXIT_TARGET_GONE, message: format!("process {pid} exited before it could be read ({e})") }.into(),
        _ => e.context(format!("discovering otel_thread_ctx_v1 in process {pid}")),
    })
}

/// The error for a process without a writer, with what to do about it. When some of its
/// objects could not be read for want of permission, that is the error (exit 5): the symbol
/// may be in one of them.
pub fn no_symbol(d: &Discovery) -> anyhow::Error {
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", d.pid)).map(|s| s.trim_end().to_string()).unwrap_or_default();
    let who = if comm.is_empty() { format!("process {}", d.pid) } else { format!("process {} ({comm})", d.pid) };
    let denied: Vec<&String> = d.skipped_objects.iter().filter(|o| is_permission_error(o)).collect();
    if let Some(first) = denied.first() {
        let more = if denied.len() > 1 { format!(" and {} more", denied.len() - 1) } else { String::new() };
        return Failure {
            code: EXIT_NO_PERMISSION,
            message: format!(
                "{who}: its mapped objects could not all be read to look for otel_thread_ctx_v1 ({first}{more}): {}; \
                 with capabilities instead of root, CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH",
                permission_hint(d.pid)
            ),
        }
        .into();
    }
    let unreadable = d.skipped_objects.iter().find(|o| o.contains("otel-thread-ctx"));
    let hint = match unreadable {
        Some(o) => format!("its otel-thread-ctx addon could not be read: {o}"),
        None => "load otel-thread-ctx in it: `require('otel-thread-ctx')` and install its context manager \
                 (`register()`, or `new ThreadContextManager()` passed to the SDK); its addon defines the symbol"
            .into(),
    };
    Failure {
        code: EXIT_NO_SYMBOL,
        message: format!("{who} has no otel_thread_ctx_v1 or otel_thread_ctx_nodejs_v1 (no mapped ELF object defines either): {hint}"),
    }
    .into()
}

/// An error text of EACCES or EPERM, as `io::Error` prints them.
fn is_permission_error(text: &str) -> bool {
    text.contains("(os error 13)") || text.contains("(os error 1)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_pick_the_code() {
        use std::io;
        let denied =
            anyhow::Error::from(LibError::Process { pid: 1, path: "/proc/1/maps".into(), cause: io::Error::from_raw_os_error(libc::EACCES) });
        assert_eq!(code_of(&denied.context("reading")), EXIT_NO_PERMISSION);
        let gone = anyhow::Error::from(LibError::Ptrace { tid: 5, op: "PTRACE_SEIZE", cause: io::Error::from_raw_os_error(libc::ESRCH), hint: "" });
        assert_eq!(code_of(&gone), EXIT_TARGET_GONE);
        let unwritable = anyhow::Error::from(io::Error::from_raw_os_error(libc::EACCES)).context("--pprof");
        assert_eq!(code_of(&unwritable), EXIT_READER_FAILED, "only reading the target says no permission");
        assert_eq!(code_of(&usage("--hz: too high").context("x")), EXIT_USAGE);
        assert_eq!(code_of(&anyhow::anyhow!("something else")), EXIT_READER_FAILED);
        let bpf = anyhow::Error::from(SamplerError::NeedsPrivilege { what: "loading".into() });
        assert_eq!(code_of(&bpf.context("starting the sampler")), EXIT_NO_PERMISSION);
        let through_pipeline = anyhow::Error::from(PipelineError::Sampler(SamplerError::NeedsPrivilege { what: "loading".into() }));
        assert_eq!(code_of(&through_pipeline.context("starting the eBPF sampler")), EXIT_NO_PERMISSION);
    }

    #[test]
    fn objects_unreadable_for_want_of_permission_are_a_permission_error() {
        let d = |skipped: &[&str]| Discovery {
            pid: i32::MAX,
            writers: vec![],
            skipped_objects: skipped.iter().map(|s| s.to_string()).collect(),
            process_context: None,
        };
        let denied = no_symbol(&d(&["reading /proc/9/root/srv/app/addon.node: Permission denied (os error 13)", "x: EOF"]));
        assert_eq!(code_of(&denied), EXIT_NO_PERMISSION);
        let text = denied.to_string();
        assert!(text.contains("addon.node: Permission denied") && text.contains("CAP_DAC_READ_SEARCH"), "{text}");
        assert_eq!(code_of(&no_symbol(&d(&["reading /proc/9/root/x.so: Operation not permitted (os error 1)"]))), EXIT_NO_PERMISSION);
        let absent = no_symbol(&d(&["reading /proc/9/root/x.so: No such file or directory (os error 2)"]));
        assert_eq!(code_of(&absent), EXIT_NO_SYMBOL);
        assert!(absent.to_string().contains("load otel-thread-ctx in it"), "{absent}");
    }

    #[test]
    fn codes_are_distinct_and_all_in_the_help() {
        let codes = [EXIT_OK, EXIT_MALFORMED, EXIT_USAGE, EXIT_READER_FAILED, EXIT_NO_SYMBOL, EXIT_NO_PERMISSION, EXIT_TARGET_GONE];
        for (i, c) in codes.iter().enumerate() {
            assert!(!codes[..i].contains(c), "exit code {c} used twice");
            assert!(EXIT_CODES_HELP.contains(&format!("\n  {c}  ")), "exit code {c} missing from the help");
        }
    }
}
