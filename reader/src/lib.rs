//! `thread-ctx`: a standard OTEP 4947 thread-context reader and an OTEP 4719
//! process-context reader, sharing no code with the writer.
//!
//! Flow: [`discovery::discover`] walks /proc/PID/maps, opens each mapped ELF
//! object, finds `otel_thread_ctx_v1` in `.dynsym` ([`elf_writer`]), classifies
//! the access model by the relocation that reaches it and resolves it in the
//! live process into an [`access::TlsAccess`] ([`resolve`]):
//!
//! | model | relocation | resolved from | access |
//! |---|---|---|---|
//! | TLSDESC | `R_X86_64_TLSDESC` | descriptor argument word | negative 32-bit value: static; else pointer to {module, offset}: DTV |
//! | general dynamic | `R_X86_64_DTPMOD64` | GOT {module, offset} pair | DTV |
//! | initial exec | `R_X86_64_TPOFF64` | GOT offset | static |
//! | local exec | none, in an executable | PT_TLS: `sym - align_up(memsz, align)` | static |
//!
//! [`thread_reader::read_all_threads`] then ptrace-stops each thread, takes
//! fs_base, finds the slot ([`tls_slot`]), and reads and checks the record
//! ([`record`]). [`process_context`] reads the OTEL_CTX mapping.
//!
//! Limits: x86-64 with glibc only (glibc's TCB/DTV layout: dtv at tp+8,
//! 16-byte entries, length at dtv[-1]); no musl, no aarch64; local dynamic is
//! not supported (OTEP 4947 excludes it).

pub mod access;
pub mod cli_support;
pub mod discovery;
pub mod elf_writer;
pub mod error;
pub mod maps;
pub mod otlp;
pub mod process_context;
pub mod profile;
pub mod proto;
pub mod ptrace_stop;
pub mod record;
pub mod remote_memory;
pub mod resolve;
pub mod thread_reader;
pub mod tls_slot;
pub mod sampler;
pub mod record_cmd;
pub mod flamegraph_cmd;
