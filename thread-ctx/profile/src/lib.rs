//! The profile stages every sample goes through, in order:
//!
//! 1. [`decode`]: a sampler event of a tracked process becomes a [`Sample`]
//!    (ids, attributes named through the key map, kind and weight, stacks);
//! 2. [`aggregate`]: samples merge by kind x raw stack x thread x span x
//!    attributes, and each address and thread is handed out for naming once
//!    per window;
//! 3. [`builder`]: the [`Symbolizer`] names those addresses (native frames
//!    from the mapped objects' ELF symbols, parsed once per object for all
//!    processes by [`NativeSymbols`]; JS frames from V8's jitdump or perf map;
//!    kernel frames from kallsyms), and each window's aggregate becomes a
//!    [`Profile`] ([`symbolized`]): what every output renders.
//!
//! Stages 1 and 2 never read the target; stage 3 does. A [`Filter`] selects
//! entries for an output. What they make (samples, profiles, windows and the
//! sink they end in) is the data model of `thread-ctx-model`, re-exported here. The [`pipeline`] runs the stages for many processes;
//! a [`recording`] runs it for one process, once (`thread-ctx record`).

pub mod aggregate;
pub mod builder;
pub mod decode;
pub mod jitdump;
pub mod js_key;
pub mod js_names;
pub mod native_symbols;
pub mod perf_map;
pub mod perf_map_reader;
pub mod pipeline;
pub mod recording;
pub mod source_map;
pub mod source_map_budget;
pub mod source_map_parse;
pub mod symbol_pages;
pub mod symbolizer;

pub use aggregate::Aggregate;
pub use builder::ProfileBuilder;
pub use decode::{Decoder, StackLosses};
pub use native_symbols::NativeSymbols;
pub use symbolizer::Symbolizer;

// The data model the stages make, under the paths this crate's users have always named it by.
pub use thread_ctx_model::{filter, frame, js_naming, sample, sink, symbolized, window};
pub use thread_ctx_model::{
    Entry, Filter, Frame, FrameKind, Generated, JsNaming, Measure, Profile, Sample, SampleKind, SourcePos, Value, Window, WindowProcess,
};
