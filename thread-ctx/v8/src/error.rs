//! Why a frame was not named (a [`Miss`], counted by kind, never fatal), and
//! why a node binary's layout was refused (a [`LayoutError`], said once per
//! binary: its processes' JS frames then fall back to the perf map and jitdump).

use crate::version::V8Version;

/// Why a read of the heap stopped. Each is counted (the namer's stats);
/// none is an error of the agent: targets change under the reader, and a
/// hostile one may lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Miss {
    /// A read faulted: unmapped memory, or the process is gone.
    Fault,
    /// The frame's read budget was spent.
    Budget,
    /// The frame's function slot does not lead to a SharedFunctionInfo: a
    /// native frame whose slots look like a JS frame's, or a moved object.
    NotJsFrame,
    /// A word that must be a tagged heap pointer (or a Smi) is not one.
    BadTag,
    /// An object is not of the type its field promises.
    WrongType,
    /// A length or index outside what V8 would write.
    BadLength,
    /// A string nested deeper (cons, sliced, thin) than the string reader follows.
    StringTooDeep,
    /// A source position or bytecode offset table that does not decode.
    BadTable,
    /// The pc is in JIT code, but no code object around it was found.
    NoCode,
    /// The code object found for the pc belongs to another function than the frame's.
    CodeMismatch,
}

impl Miss {
    pub const ALL: [Miss; 10] = [
        Miss::Fault,
        Miss::Budget,
        Miss::NotJsFrame,
        Miss::BadTag,
        Miss::WrongType,
        Miss::BadLength,
        Miss::StringTooDeep,
        Miss::BadTable,
        Miss::NoCode,
        Miss::CodeMismatch,
    ];

    pub fn index(self) -> usize {
        Miss::ALL.iter().position(|m| *m == self).unwrap_or(0)
    }

    /// Short name for counters and the status line.
    pub fn as_str(self) -> &'static str {
        match self {
            Miss::Fault => "fault",
            Miss::Budget => "budget",
            Miss::NotJsFrame => "not_js",
            Miss::BadTag => "bad_tag",
            Miss::WrongType => "wrong_type",
            Miss::BadLength => "bad_length",
            Miss::StringTooDeep => "string_depth",
            Miss::BadTable => "bad_table",
            Miss::NoCode => "no_code",
            Miss::CodeMismatch => "code_mismatch",
        }
    }
}

impl std::fmt::Display for Miss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the V8 layout of a node binary could not be trusted. The message is the
/// one line a user sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("{path}: not a readable ELF object ({reason})")]
    Elf { path: String, reason: String },
    #[error("{path}: no v8dbg symbols (a build without V8's postmortem metadata)")]
    NoSymbols { path: String },
    #[error("{path}: no V8 version symbols (v8::internal::Version::major_ ...): cannot tell which V8 layout it has")]
    NoVersion { path: String },
    /// `known`: the supported versions, as `supported::describe` says them.
    #[error("{path}: {version} has no known layout (this reader knows {known})")]
    UnknownVersion { path: String, version: V8Version, known: String },
    #[error("{path}: {version}: {symbol} = {published}, but that V8's layout says {expected}: refusing to read this V8's heap")]
    Mismatch { path: String, version: V8Version, symbol: String, published: i64, expected: i64 },
    #[error("{path}: {version}: the postmortem symbols lack {symbol}, which every build of that V8 carries: refusing to read this V8's heap")]
    Missing { path: String, version: V8Version, symbol: String },
}
