//! What a profile becomes: the per-span summary table of `record`
//! ([`summary`], with [`top`] frames per span, and [`alloc_summary`] for
//! allocations), gzipped pprof ([`pprof`],
//! one file per window with [`pprof_dir`]), folded stacks and SVG flame graphs
//! ([`flame`]), and back from what a Collector received ([`otlp_read`]).
//! [`sink`] is where the pipeline's windows go (OTLP's sink is in `otlp`);
//! [`printable`] makes a target's strings safe for a terminal.

pub mod alloc_summary;
pub mod file_error;
pub mod flame;
pub mod otlp_read;
pub mod pprof;
pub mod pprof_dir;
pub mod printable;
pub mod selection;
pub mod sink;
pub mod summary;
pub mod top;
