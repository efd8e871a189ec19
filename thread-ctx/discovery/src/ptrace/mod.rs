//! Reading records without eBPF: stop each thread with ptrace, take its
//! thread pointer, find its `otel_thread_ctx_v1` slot and copy its record
//! (`thread-ctx dump` and `validate`).

pub mod ptrace_stop;
pub mod thread_reader;
pub mod tls_slot;

pub use thread_reader::{read_all_threads, State, ThreadRecord};
