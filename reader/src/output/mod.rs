//! What a profile becomes: the per-span summary table of `record`
//! ([`summary`], with [`top`] frames per span), gzipped pprof ([`pprof`]),
//! folded stacks and SVG flame graphs ([`flame`]); [`printable`] makes a
//! target's strings safe for a terminal.

pub mod flame;
pub mod otlp;
pub mod pprof;
pub mod printable;
pub mod summary;
pub mod top;
