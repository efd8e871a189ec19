//! The Collector file exporter's `proto` output (each message preceded by its size, 4 bytes big
//! endian) read one message at a time, so that memory holds one message however large the file:
//! `report --traces` (805 MB of RSS for a 139 MB file when it was read whole) and `report --otlp`
//! (881 MiB for a 3 MB profiles file, 8.4 GB for 28 MB) both read through here.
//!
//! The data is not ours: a size past the end is an incomplete tail (the Collector may still be
//! writing), a size past any batch is damage, and a file that holds bytes but no whole message
//! is an error saying what it looks like instead.

use prost::Message;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use thread_ctx_output::file_error::{FileError, Result};

/// What a pass over a framed file read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Framed {
    pub messages: usize,
    /// Bytes of whole messages read: a second pass reads exactly these, however much the
    /// Collector has written since.
    pub whole_bytes: u64,
    /// Bytes at the end that are not a whole message yet (the Collector may still be writing).
    pub incomplete_tail: u64,
}

/// The largest message read: a file exporter writes one export batch per message, and OTLP
/// receivers take 4 MiB by default; a size past this is not a batch but damage, and must not
/// make the reader allocate it.
pub const MAX_MESSAGE_BYTES: u64 = 256 << 20;

/// What a framed file of OTLP `M` messages holds, for errors: `what` names the message
/// ("TracesData"), `not_it` says what a message that does not decode is not, `expected` is the
/// sentence the other errors end with.
pub struct Format {
    pub what: &'static str,
    pub not_it: &'static str,
    pub expected: &'static str,
}

/// Reads the framed messages of `path` (at most `limit` bytes: a second pass gives the first
/// pass's `whole_bytes`), decodes each as an `M` and gives it to `visit` with its byte offset.
pub fn read_framed<M: Message + Default>(
    path: &Path,
    limit: Option<u64>,
    format: &Format,
    mut visit: impl FnMut(u64, M) -> Result<()>,
) -> Result<Framed> {
    let file = File::open(path).map_err(|e| FileError::io("reading", path, e))?;
    let size = file.metadata().map_err(|e| FileError::io("reading", path, e))?.len();
    let end = limit.map_or(size, |l| l.min(size));
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut read = Framed::default();
    let mut message = Vec::new();
    let mut first = [0u8; 4];
    let expected = format.expected;
    while end - read.whole_bytes >= 4 {
        reader.read_exact(&mut first).map_err(|e| FileError::io("reading", path, e))?;
        if read.whole_bytes == 0 && first[0] == b'{' {
            return Err(FileError::Invalid(format!(
                "{}: looks like the file exporter's json format (`format: json`; set `format: proto`): {expected}",
                path.display()
            )));
        }
        let len = u64::from(u32::from_be_bytes(first));
        if end - read.whole_bytes - 4 < len {
            break;
        }
        if len > MAX_MESSAGE_BYTES {
            return Err(FileError::Invalid(format!(
                "{}: the message at byte {} claims {len} bytes, more than any Collector batch ({} MiB): {expected}",
                path.display(),
                read.whole_bytes,
                MAX_MESSAGE_BYTES >> 20
            )));
        }
        message.resize(len as usize, 0);
        reader.read_exact(&mut message).map_err(|e| FileError::io("reading", path, e))?;
        let at = read.whole_bytes;
        let data = M::decode(message.as_slice()).map_err(|cause| {
            FileError::in_file(path, format.not_it)(FileError::Decode {
                what: format!("the message at byte {at} ({len} bytes) is not an OTLP {}", format.what),
                cause,
            })
        })?;
        read.messages += 1;
        read.whole_bytes += 4 + len;
        visit(at, data)?;
        // A message can be large (a batch); do not keep its buffer past a megabyte.
        if message.capacity() > 1 << 20 {
            message = Vec::new();
        }
    }
    read.incomplete_tail = end - read.whole_bytes;
    if read.messages == 0 && end > 0 {
        return Err(FileError::Invalid(format!("{}: {}: {expected}", path.display(), no_whole_message(&first, end))));
    }
    Ok(read)
}

/// Why a file of `len` bytes starting with `head` holds no whole message.
fn no_whole_message(head: &[u8; 4], len: u64) -> String {
    match head {
        _ if len < 4 => format!("holds {len} bytes, less than one message's 4-byte size"),
        [0x1f, 0x8b, ..] => "is gzip data (a pprof profile? `thread-ctx flamegraph FILE` draws one), not a single whole message".into(),
        _ => format!("holds {len} bytes, and its first message claims {} after its 4-byte size: no whole message", u32::from_be_bytes(*head)),
    }
}
