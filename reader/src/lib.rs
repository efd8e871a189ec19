//! `thread-ctx`: a standard OTEP 4947 thread-context reader (discovery of
//! `otel_thread_ctx_v1` the way standard readers do it, ptrace-stopped reads of
//! every thread's record) and an OTEP 4719 process-context reader.

pub mod access;
pub mod discovery;
pub mod elf_writer;
pub mod error;
pub mod maps;
pub mod process_context;
pub mod proto;
pub mod ptrace_stop;
pub mod record;
pub mod remote_memory;
pub mod resolve;
pub mod thread_reader;
pub mod tls_slot;
