//! The `nodejs_v1_dev` schema: a JS thread publishes no record pointer but a
//! small TLS struct (`otel_thread_ctx_nodejs_v1`) from which a reader finds the
//! OTEP 4947 record through V8's async-context frame at sample time.
//!
//! - [`layout`]: which V8 layout facts the walk uses (published by the writer
//!   in the process context, or this schema's defaults for the target's V8
//!   version) and the checks that refuse an unknown or implausible one.
//! - [`walk`]: the walk itself over the target's memory (ptrace `dump`); the
//!   BPF program does the same steps (`bpf/nodejs_record.bpf.h`) with the
//!   same bounds, and both count what stopped a walk as a [`walk::Miss`].

pub mod layout;
pub mod walk;

pub use layout::{NodejsLayout, SCHEMA_VERSION};
