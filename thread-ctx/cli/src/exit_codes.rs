//! Every exit code of `thread-ctx`, in one place (docs/cli.md and `--help` list
//! the same table), and the one an error ends a command with. A usage error is
//! made by [`usage`], the one way every command reports one; any other error
//! exits by its kind ([`ErrorKind`]: no permission, the target gone, no writer
//! in it), which the library's typed errors say of themselves, whatever their
//! message. Anything else is a reader failure.

#[cfg(feature = "ebpf")]
use thread_ctx_agent::AgentError;
use thread_ctx_discovery::error::{Error as DiscoveryError, ErrorKind};
use thread_ctx_discovery::{NoWriter, WriterError};
#[cfg(feature = "ebpf")]
use thread_ctx_profile::{pipeline::PipelineError, recording::RecordingError};
#[cfg(feature = "ebpf")]
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

/// An error the command words for its user itself (what failed reading its target, and who may
/// read it), with the kind of the library error behind it.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct TargetError {
    pub kind: ErrorKind,
    pub message: String,
}

/// A usage error: which flag or value was wrong, and what was expected.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

/// A usage error (exit 2): `flag` and what was wrong with its value.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// A usage error: `command` is one of `record` and `agent`, which this build (without feature
/// `ebpf`) does not have, or a command that does not exist.
#[cfg(not(feature = "ebpf"))]
pub fn not_built(command: &str) -> anyhow::Error {
    match command {
        "record" | "agent" => usage(format!(
            "{command}: this thread-ctx was built without eBPF (cargo feature `ebpf`), so it cannot sample; \
             it reads what a Collector or `record` wrote (report, flamegraph) and processes by ptrace (inspect, dump, validate)"
        )),
        _ => usage(format!("unrecognized subcommand '{command}' (see thread-ctx --help)")),
    }
}

/// A usage error unless `path` (given with `flag`) is a file.
pub fn existing_file(flag: &str, path: &std::path::Path) -> anyhow::Result<()> {
    if path.is_file() {
        return Ok(());
    }
    let what = if path.exists() { "is not a file" } else { "does not exist" };
    Err(usage(format!("{flag}: {} {what}", path.display())))
}

/// The exit code for an error: the first cause in its chain whose kind says.
pub fn code_of(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if cause.is::<UsageError>() {
            return EXIT_USAGE;
        }
        match kind_of(cause) {
            Some(ErrorKind::NoPermission) => return EXIT_NO_PERMISSION,
            Some(ErrorKind::TargetGone) => return EXIT_TARGET_GONE,
            Some(ErrorKind::NoWriter) => return EXIT_NO_SYMBOL,
            Some(ErrorKind::Other) | None => {}
        }
    }
    EXIT_READER_FAILED
}

/// The kind a library error says of itself (None: not one of theirs).
fn kind_of(cause: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    fn said<E: std::error::Error + 'static>(cause: &(dyn std::error::Error + 'static), kind: fn(&E) -> ErrorKind) -> Option<ErrorKind> {
        cause.downcast_ref::<E>().map(kind)
    }
    let kind = said::<TargetError>(cause, |e| e.kind)
        .or_else(|| said(cause, DiscoveryError::kind))
        .or_else(|| said(cause, NoWriter::kind))
        .or_else(|| said(cause, WriterError::kind));
    #[cfg(feature = "ebpf")]
    let kind = kind
        .or_else(|| said(cause, SamplerError::kind))
        .or_else(|| said(cause, PipelineError::kind))
        .or_else(|| said(cause, RecordingError::kind))
        .or_else(|| said(cause, AgentError::kind));
    kind
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_pick_the_code() {
        use std::io;
        let denied =
            anyhow::Error::from(DiscoveryError::Process { pid: 1, path: "/proc/1/maps".into(), cause: io::Error::from_raw_os_error(libc::EACCES) });
        assert_eq!(code_of(&denied.context("reading")), EXIT_NO_PERMISSION);
        let gone =
            anyhow::Error::from(DiscoveryError::Ptrace { tid: 5, op: "PTRACE_SEIZE", cause: io::Error::from_raw_os_error(libc::ESRCH), hint: "" });
        assert_eq!(code_of(&gone), EXIT_TARGET_GONE);
        let unwritable = anyhow::Error::from(io::Error::from_raw_os_error(libc::EACCES)).context("--pprof");
        assert_eq!(code_of(&unwritable), EXIT_READER_FAILED, "only reading the target says no permission");
        assert_eq!(code_of(&usage("--hz: too high").context("x")), EXIT_USAGE);
        assert_eq!(code_of(&anyhow::anyhow!("something else")), EXIT_READER_FAILED);
    }

    #[cfg(feature = "ebpf")]
    #[test]
    fn sampling_errors_pick_the_code() {
        let bpf = anyhow::Error::from(SamplerError::NeedsPrivilege { what: "loading".into() });
        assert_eq!(code_of(&bpf.context("starting the sampler")), EXIT_NO_PERMISSION);
        let through_pipeline = anyhow::Error::from(PipelineError::Sampler(SamplerError::NeedsPrivilege { what: "loading".into() }));
        assert_eq!(code_of(&through_pipeline.context("starting the eBPF sampler")), EXIT_NO_PERMISSION);
        let through_recording = anyhow::Error::from(RecordingError::Start(PipelineError::Sampler(SamplerError::NeedsPrivilege { what: "x".into() })));
        assert_eq!(code_of(&through_recording), EXIT_NO_PERMISSION);
        assert_eq!(code_of(&anyhow::Error::from(RecordingError::Exited { pid: 4 })), EXIT_TARGET_GONE);
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
