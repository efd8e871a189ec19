//! Library error type: every variant names what was being read and why it failed, and
//! [`Error::kind`] says what that means for whoever acts on it ([`ErrorKind`]).

use std::io;

/// What an error means for whoever acts on it (an exit code, a process skipped), whichever step
/// met it: every crate of the reader says it of its own errors in these terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The reader may not read the target, or may not load eBPF.
    NoPermission,
    /// The target does not exist, or exited while it was being read.
    TargetGone,
    /// The target has no thread-context writer object.
    NoWriter,
    Other,
}

impl ErrorKind {
    /// The kind of an OS error met while reading a target.
    pub fn of_io(e: &io::Error) -> ErrorKind {
        match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => ErrorKind::NoPermission,
            Some(libc::ENOENT | libc::ESRCH) => ErrorKind::TargetGone,
            _ => ErrorKind::Other,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no process {pid} (expected the pid of a running process)")]
    NoProcess { pid: i32 },

    #[error("process {pid} not found or not readable ({path}): {cause}")]
    Process { pid: i32, path: String, cause: io::Error },

    #[error("reading {path}: {cause}")]
    Io { path: String, cause: io::Error },

    #[error("{path}: malformed /proc maps line {line:?}")]
    MapsLine { path: String, line: String },

    #[error("{path}: not a usable ELF object: {reason}")]
    Elf { path: String, reason: String },

    #[error("process {pid}: reading {len} bytes at {addr:#x} ({what}): {cause}")]
    RemoteRead { pid: i32, addr: u64, len: usize, what: String, cause: io::Error },

    #[error("{path}: cannot resolve otel_thread_ctx_v1: {reason}")]
    Resolve { path: String, reason: String },

    #[error("process context mapping {mapping} at {addr:#x}: {reason}")]
    ProcessContext { mapping: String, addr: u64, reason: String },

    #[error("thread {tid}: ptrace {op} failed: {cause}{hint}")]
    Ptrace { tid: i32, op: &'static str, cause: io::Error, hint: &'static str },

    #[error("thread {tid} exited while being read")]
    ThreadExited { tid: i32 },

    /// Target-controlled data larger than the reader reads.
    #[error("{what} is larger than the {limit}-byte limit")]
    TooLarge { what: String, limit: u64 },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn io(path: impl Into<String>, cause: io::Error) -> Self {
        Error::Io { path: path.into(), cause }
    }

    /// What the error means: every read here is of a target (its /proc files, its memory, the
    /// objects it maps), so an OS error's number says whether access was refused or the
    /// target went away.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NoProcess { .. } | Error::ThreadExited { .. } => ErrorKind::TargetGone,
            Error::Process { cause, .. } | Error::Io { cause, .. } | Error::RemoteRead { cause, .. } | Error::Ptrace { cause, .. } => {
                ErrorKind::of_io(cause)
            }
            _ => ErrorKind::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_of_target_reads_give_the_kind() {
        let os = io::Error::from_raw_os_error;
        let denied = Error::Process { pid: 1, path: "/proc/1/maps".into(), cause: os(libc::EACCES) };
        assert_eq!(denied.kind(), ErrorKind::NoPermission);
        let gone = Error::Ptrace { tid: 5, op: "PTRACE_SEIZE", cause: os(libc::ESRCH), hint: "" };
        assert_eq!(gone.kind(), ErrorKind::TargetGone);
        assert_eq!(Error::NoProcess { pid: 9 }.kind(), ErrorKind::TargetGone);
        assert_eq!(Error::ThreadExited { tid: 9 }.kind(), ErrorKind::TargetGone);
        let fault = Error::RemoteRead { pid: 1, addr: 0, len: 8, what: "x".into(), cause: os(libc::EFAULT) };
        assert_eq!(fault.kind(), ErrorKind::Other);
        assert_eq!(Error::TooLarge { what: "x".into(), limit: 1 }.kind(), ErrorKind::Other);
    }
}
