//! The profile data model: what every output takes and nothing in it needs the sampler, so
//! reading back what a Collector received (`thread-ctx report`) builds without eBPF.
//!
//! A decoded [`Sample`] (its [`SampleKind`], the [`CtxState`] its thread's record was in, the
//! [`JsFrameSlots`] the sampler read), a symbolized [`Profile`] of [`Entry`]s and [`Frame`]s, the
//! [`Filter`] that selects entries for an output, and the [`Window`] of profiles every
//! [`WindowSink`](sink::WindowSink) takes. The stages that make them from sampler events are
//! `thread-ctx-profile`'s.

pub mod ctx_state;
pub mod filter;
pub mod frame;
pub mod js_frame;
pub mod js_naming;
pub mod sample;
pub mod sink;
pub mod symbolized;
pub mod window;

pub use ctx_state::CtxState;
pub use filter::Filter;
pub use frame::{Frame, FrameKind, Generated, JsTier, SourcePos};
pub use js_frame::JsFrameSlots;
pub use js_naming::JsNaming;
pub use sample::{Measure, Sample, SampleKind, Value};
pub use symbolized::{Entry, Profile};
pub use window::{Window, WindowProcess};
