//! What a profile becomes: the per-span summary table of `record`
//! ([`summary`], with [`top`] frames per span, and [`alloc_summary`] for
//! allocations), gzipped pprof ([`pprof`], one file per window with
//! [`pprof_dir`]), folded stacks and SVG flame graphs ([`flame`]) of the
//! samples a [`kind`] names, and `record`'s [`jsonl`] lines. [`pprof_dir`] is
//! a window sink (`thread_ctx_model::sink`); what a Collector received
//! comes back as a profile through `thread_ctx_otlp::into_profile`.

pub mod alloc_summary;
pub mod file_error;
pub mod flame;
pub mod group;
pub mod jsonl;
pub mod kind;
pub mod native_name;
pub mod pprof;
pub mod pprof_dir;
pub mod selection;
pub mod slow_requests;
pub mod summary;
pub mod top;
