//! What a profile becomes: the per-span summary table of `record`
//! ([`summary`], with [`top`] frames per span), gzipped pprof ([`pprof`]),
//! folded stacks and SVG flame graphs ([`flame`]), OTLP/Profiles ([`otlp`]) and
//! back from what a Collector received ([`otlp_read`]); [`printable`] makes a
//! target's strings safe for a terminal.

pub mod flame;
pub mod otlp;
pub mod otlp_read;
pub mod pprof;
pub mod printable;
pub mod summary;
pub mod top;
