//! Library error type: every variant names what was being read and why it failed.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum Error {
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
}
