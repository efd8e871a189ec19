//! The eBPF sampler: bpf/sampler.bpf.c, loaded through the libbpf-cargo
//! skeleton build.rs generates. One cpu-clock perf event per CPU serves every
//! tracked process: a BPF hash map holds each tracked tgid and how its threads
//! reach their OTEP 4947 record (the [`TlsAccess`](thread_ctx_discovery::TlsAccess) discovery
//! resolved, and for a `nodejs_v1_dev` writer the layout of the async-context
//! frame walk), so processes come and go at run time without new events. Each
//! sample carries the record it read and its stacks through one bounded ring
//! buffer (a full ring drops the sample and counts it). For a node process
//! whose V8 layout is known ([`v8_frames`]), the user stack is walked in BPF
//! with each JS frame's function and bytecode position read on the way.

pub mod alloc_probe;
pub mod bpf_sampler;
pub mod ctx_state;
pub mod error;
pub mod event;
mod nodejs_target;
pub mod perf_event;
mod skel;
pub mod v8_frames;

pub use alloc_probe::AllocCounters;
pub use bpf_sampler::{ExitFrameWalk, ProgramStats, Sampler, SamplerOptions, V8Walk, MAX_TARGETS};
pub use ctx_state::{Counters, CtxState};
pub use error::SamplerError;
pub use event::{Event, EventKind, JsFrameSlots};
pub use v8_frames::{V8FramesError, V8Process, V8Sites};
