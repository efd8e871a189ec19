//! What the commands share: their exit codes, and finding the writers of a live process.

use thread_ctx::discovery::{discover, Discovery};
use anyhow::{bail, Context, Result};

/// `validate` found a malformed record.
pub const EXIT_MALFORMED: u8 = 1;
/// The process has no `otel_thread_ctx_v1` (inspect, dump, validate, record).
pub const EXIT_NO_SYMBOL: u8 = 2;
/// The reader itself failed (process gone, permission denied, ...).
pub const EXIT_READER_FAILED: u8 = 3;
/// A setting cannot be used (as clap's own usage errors).
pub const EXIT_USAGE: u8 = 2;

/// Discovery of `otel_thread_ctx_v1` in a process that must exist now.
pub fn discover_live(pid: i32) -> Result<Discovery> {
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        bail!("PID {pid}: no such process (expected the pid of a running process)");
    }
    discover(pid).with_context(|| format!("discovering otel_thread_ctx_v1 in process {pid}"))
}

/// Says on stderr that the process has no writer; the caller exits with EXIT_NO_SYMBOL.
pub fn report_no_symbol(pid: i32) {
    eprintln!("thread-ctx: process {pid} has no otel_thread_ctx_v1 (no mapped ELF object defines it)");
}
