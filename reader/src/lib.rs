//! `thread-ctx`: a standard OTEP 4947 thread-context reader, an eBPF sampler
//! that tags CPU samples with the span each thread published, and the outputs
//! that turn those samples into profiles. It shares no code with the writer.
//!
//! One pipeline, used by every command of the `thread-ctx` binary:
//!
//! 1. [`discovery`]: [`discover`] walks /proc/PID/maps, opens each mapped
//!    ELF object, finds `otel_thread_ctx_v1` (or `otel_thread_ctx_nodejs_v1`)
//!    in `.dynsym` ([`discovery::elf_tls_symbol`]), classifies the access model
//!    by the relocation that reaches it and resolves it in the live process
//!    into a [`TlsAccess`] ([`discovery::tls_model`]); it also reads the OTEP
//!    4719 process context ([`discovery::process_context`]) and, for a
//!    `nodejs_v1_dev` writer, the V8 layout of the walk from its struct to the
//!    record through the async-context frame ([`nodejs`]).
//! 2. [`sampler`]: eBPF programs on per-CPU cpu-clock events (and
//!    sched_switch for off-CPU time) read each sampled thread's record
//!    ([`ctx_record`]) through that access and send it with its stacks.
//! 3. [`profile`]: samples are symbolized (ELF symbols, the V8 perf map,
//!    kallsyms) and aggregated per stack × thread × span × attributes.
//! 4. [`output`]: the per-span summary, pprof, folded stacks and flame graphs.
//!
//! [`pipeline::Pipeline`] runs 2 and 3 for any number of discovered processes.
//!
//! [`ptrace`] is the other way to read records: stop each thread and read its
//! slot (what `dump` and `validate` do, without eBPF).
//!
//! Limits: x86-64 with glibc only (glibc's TCB/DTV layout: dtv at tp+8,
//! 16-byte entries, length at dtv[-1]); no musl, no aarch64; local dynamic is
//! not supported (OTEP 4947 excludes it).

pub mod agent;
pub mod alloc_probe;
pub mod ctx_record;
pub mod discovery;
pub mod error;
pub mod ids;
pub mod nodejs;
pub mod otlp;
pub mod output;
pub mod pipeline;
pub mod profile;
pub mod ptrace;
pub mod sampler;
pub mod target_file;

pub use discovery::tls_access::TlsAccess;
pub use discovery::{discover, Discovery};
