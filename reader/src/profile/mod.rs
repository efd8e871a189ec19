//! Profile outputs of `thread-ctx record`: pprof, flame graphs and the
//! per-span top-frames summary, from samples that carry the span context the
//! sampler read with each stack.
//!
//! Flow: the sampler's events become [`Sample`]s (stacks as raw addresses,
//! leaf first); [`Symbolizer`] names each address for one pid (native frames
//! through blazesym's process source, JS frames from V8's `/tmp/perf-PID.map`,
//! kernel frames from kallsyms); [`Profile::build`] symbolizes and aggregates
//! them into one entry per (stack × thread × span × attrs), which the outputs
//! (pprof, flame graph, summary: not written yet) render, restricted by a
//! [`Filter`] where asked.

pub mod aggregate;
pub mod filter;
pub mod frame;
pub mod perf_map;
pub mod sample;
pub mod symbolizer;

pub use aggregate::{Entry, Profile};
pub use filter::Filter;
pub use frame::{Frame, FrameKind};
pub use sample::Sample;
pub use symbolizer::Symbolizer;
