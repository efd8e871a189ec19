//! What a profile becomes: the per-span summary table of `record`
//! ([`summary`], with [`top`] frames per span), gzipped pprof ([`pprof`]),
//! folded stacks and SVG flame graphs ([`flame`]).

pub mod flame;
pub mod otlp;
pub mod pprof;
pub mod summary;
pub mod top;
