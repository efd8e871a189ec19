//! `thread-ctx-discovery`: what a target process publishes and how a reader
//! finds and reads it, without eBPF. The first stage of `thread-ctx`'s
//! pipeline; every other crate of the workspace builds on it.
//!
//! - [`discover`] walks /proc/PID/maps, opens each mapped ELF object, finds
//!   `otel_thread_ctx_v1` (or `otel_thread_ctx_nodejs_v1`) in `.dynsym`
//!   ([`elf_tls_symbol`]), classifies the access model by the relocation that
//!   reaches it and resolves it in the live process into a [`TlsAccess`]
//!   ([`tls_model`]); it also reads the OTEP 4719 process context
//!   ([`process_context`]) and, for a `nodejs_v1_dev` writer, the V8 layout of
//!   the walk from its struct to the record through the async-context frame
//!   ([`nodejs`]).
//! - [`ptrace`] reads records without eBPF: stop each thread and read its slot
//!   (what `dump` and `validate` do).
//! - [`host_scan`] finds every publishing process on the host (the agent);
//!   [`resource`] names a process as profiles name it.
//! - Everything read from a target is bounded: [`remote_memory`],
//!   [`target_file`], [`elf_reader`], and [`printable`] makes its strings safe
//!   for a terminal.
//!
//! Limits: x86-64 with glibc only (glibc's TCB/DTV layout: dtv at tp+8,
//! 16-byte entries, length at dtv[-1]); no musl, no aarch64; local dynamic is
//! not supported (OTEP 4947 excludes it).

pub mod build_id;
pub mod cgroup_cpu;
pub mod container;
pub mod ctx_record;
mod discover;
pub mod elf_reader;
pub mod elf_tls_symbol;
pub mod error;
pub mod fs_credentials;
pub mod host_scan;
pub mod ids;
pub mod maps;
pub mod nodejs;
pub mod printable;
pub mod process;
pub mod process_context;
pub mod process_context_proto;
pub mod ptrace;
pub mod remote_memory;
pub mod resource;
pub mod target_file;
pub mod tls_access;
pub mod tls_model;
pub mod v8_version;

pub use discover::{discover, Discovery, NoWriter, RecordReach, SkippedObject, Unresolved, Unusable, Writer, WriterError};
pub use tls_access::TlsAccess;
