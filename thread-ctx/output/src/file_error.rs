//! Errors of the files `thread-ctx` writes and reads back: pprof profiles, folded stacks, flame
//! graphs, and what a Collector's file exporter received. Each names the file or the part of it
//! that is wrong; a file read back is not trusted, so a bad one is an error, never a panic.

use std::io;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{action} {path}: {cause}")]
    Io { action: &'static str, path: String, cause: io::Error },

    #[error("{path}: bad gzip data: {cause}")]
    Gzip { path: String, cause: io::Error },

    #[error("{what}: {cause}")]
    Decode { what: String, cause: prost::DecodeError },

    /// Content that decodes but is not what the reader expects (an index out of range, a sample
    /// type it does not know, a format it was not asked for).
    #[error("{0}")]
    Invalid(String),

    /// Nothing to draw: a flame graph of no samples says nothing, so none is written.
    #[error("no samples match {0} in this profile; no flame graph written")]
    NoSamples(String),

    #[error("rendering {path}: {reason}")]
    Render { path: String, reason: String },

    /// An error inside a file, with the file's name and what it was expected to be.
    #[error("{path}: {expected}: {inner}")]
    InFile { path: String, expected: &'static str, inner: Box<FileError> },
}

pub type Result<T> = std::result::Result<T, FileError>;

impl FileError {
    pub fn io(action: &'static str, path: &Path, cause: io::Error) -> Self {
        FileError::Io { action, path: path.display().to_string(), cause }
    }

    pub fn in_file(path: &Path, expected: &'static str) -> impl FnOnce(FileError) -> FileError {
        let path = path.display().to_string();
        move |inner| FileError::InFile { path, expected, inner: Box::new(inner) }
    }
}
