//! Names a Node.js process's JS frames from V8's own frames and heap, with no
//! profiling flags on the target: function, script (file path, or `file://`
//! URL for ES modules), and the sampled line and column, in every tier
//! (interpreted, baseline, Maglev, TurboFan, with the functions TurboFan
//! inlined).
//!
//! The parts, in the order a frame passes them:
//! - [`symbols`]: what the node binary says about its V8 (its `v8dbg_*`
//!   postmortem symbols, version, bytecode sizes, where the bytecode handlers are);
//! - [`layout`]: the layout of that V8, from this crate's table of each
//!   supported V8 ([`supported`]), checked against every symbol the binary
//!   publishes (a disagreement refuses the binary: never a guess);
//! - [`frame`]: what the sampler captures of a JS frame (pc, the frame's
//!   SharedFunctionInfo, bytecode array and offset slots, the innermost frame's registers);
//! - [`namer`]: the names, read from the target's heap through [`memory::HeapMemory`]
//!   ([`function`], [`script`], [`string`], [`code`], [`position_table`],
//!   [`bytecode`]), with caches that check each entry against the heap before
//!   using it ([`cache`]).
//!
//! Every read is bounded ([`memory::Budget`]): a heap that lies (cycles, huge
//! lengths, wrong types) costs a bounded read and a counted [`Miss`], never a
//! hang or a panic. `image` (feature `test-support`, never in a build that
//! ships) holds heaps in memory for the tests and the fuzz targets.
//!
//! The crate reads the target only through [`memory::HeapMemory`]; the agent
//! gives it its reader of another process's memory.

pub mod batch_reads;
pub mod bytecode;
pub mod cache;
pub mod code;
pub mod dependencies;
pub mod error;
pub mod frame;
pub mod function;
pub mod heap;
#[cfg(any(test, feature = "test-support"))]
pub mod image;
pub mod layout;
pub mod memory;
pub mod namer;
pub mod position_table;
pub mod script;
pub mod snapshot;
pub mod string;
pub mod supported;
pub mod symbols;
pub mod tagged;
pub mod version;

pub use error::{LayoutError, Miss};
pub use frame::{FrameInput, JsFrame, LeafRegisters, NamedFrame, PcRegion};
pub use layout::Layout;
pub use namer::Namer;
pub use symbols::PostmortemSymbols;
pub use version::V8Version;
