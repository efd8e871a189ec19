//! Aggregation: samples that carry the span context the sampler read with
//! each stack, symbolized and merged into profiles the outputs render.
//!
//! Flow: [`ProfileBuilder`] turns the sampler's events of one process into
//! [`Sample`]s (stacks as raw addresses, leaf first); [`Symbolizer`] names each
//! address for that pid (native frames from the mapped objects' ELF symbols,
//! parsed once per object for all processes by [`NativeSymbols`]; JS frames
//! from V8's jitdump or `/tmp/perf-PID.map`; kernel frames from kallsyms);
//! [`Profile::add`] symbolizes and aggregates them, batch by batch while
//! recording, into one entry per (kind × stack × thread × span × attrs),
//! bounded in distinct entries. A [`Filter`] selects entries for an output.

pub mod aggregate;
pub mod builder;
pub mod filter;
pub mod frame;
pub mod jitdump;
pub mod native_symbols;
pub mod perf_map;
pub mod sample;
pub mod source_map;
pub mod symbolizer;

pub use aggregate::{Entry, Profile};
pub use builder::{ProfileBuilder, ProfileSettings};
pub use filter::Filter;
pub use frame::{Frame, FrameKind, Generated, SourcePos};
pub use native_symbols::NativeSymbols;
pub use sample::{Sample, SampleKind};
pub use symbolizer::Symbolizer;
