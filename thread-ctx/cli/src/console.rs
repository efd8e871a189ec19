//! stdout and stderr as a command in a pipeline uses them. A reader that has gone away
//! (`thread-ctx record PID 2>&1 | head`) ends the output quietly, as it ends `grep`: EPIPE is
//! not an error to report, and there is nobody left to report it to, where `println!` and
//! `eprintln!` would panic (and the release build abort). A note is said once however many
//! stages find it.

use std::fmt::Arguments;
use std::io::{ErrorKind, Write};

/// One line on stderr, formatted as `format!` would; a closed stderr is ignored.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::console::stderr_line(format_args!($($arg)*))
    };
}
pub(crate) use say;

/// One line on stderr after the time it is said (RFC 3339, UTC, milliseconds): what a
/// long-running command (the agent) says is read later, in a journal or a pod's log, beside
/// other programs' lines.
macro_rules! say_stamped {
    ($($arg:tt)*) => {
        $crate::console::stderr_line(format_args!("{} {}", $crate::console::now_rfc3339(), format_args!($($arg)*)))
    };
}
pub(crate) use say_stamped;

/// Now, as `2026-12-07T10:57:43.123Z`.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The line on stderr, whole (one write of a locked stderr); any failure is ignored: the
/// user cannot be told on a stream that is gone.
pub fn stderr_line(line: Arguments) {
    let text = format!("{line}\n");
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `note` on stderr after `prefix` (`thread-ctx: warning: `), unless it was said before: a note
/// several stages give (the start of a recording warns, its profile notes the same) reaches the
/// user once.
#[cfg(feature = "ebpf")]
pub fn say_once(prefix: &str, note: &str) {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.get_or_insert_with(HashSet::new).insert(note.to_string()) {
        stderr_line(format_args!("{prefix}{note}"));
    }
}

/// `text` on stdout, flushed. A reader that has gone away is not an error: what it did not read
/// it did not want. Any other failure (a full disk under a redirection) is.
pub fn print_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// [`print_stdout`] with a newline.
pub fn println_stdout(text: &str) -> std::io::Result<()> {
    print_stdout(&format!("{text}\n"))
}
