//! Profile outputs of `thread-ctx record`: pprof, flame graphs and the
//! per-span top-frames summary, from samples that carry the span context the
//! sampler read with each stack.
//!
//! Flow: [`Collector`] turns the sampler's events into [`Sample`]s (stacks as
//! raw addresses, leaf first); [`Symbolizer`] names each address for one pid
//! (native frames through blazesym's process source, JS frames from V8's
//! `/tmp/perf-PID.map`, kernel frames from kallsyms); [`Profile::add`]
//! symbolizes and aggregates them, batch by batch while recording, into one
//! entry per (kind × stack × thread × span × attrs), which the outputs render,
//! restricted by a [`Filter`] where asked: [`pprof`], [`flame`] (SVG and
//! folded), [`top`] (the summary's top frames per span). [`cli`] holds
//! `record`'s flags for all this.

pub mod aggregate;
pub mod cli;
pub mod collector;
pub mod filter;
pub mod flame;
pub mod frame;
pub mod perf_map;
pub mod pprof;
pub mod pprof_proto;
pub mod sample;
pub mod symbolizer;
pub mod top;

pub use aggregate::{Entry, Profile};
pub use collector::Collector;
pub use filter::Filter;
pub use frame::{Frame, FrameKind};
pub use sample::{Sample, SampleKind};
pub use symbolizer::Symbolizer;
