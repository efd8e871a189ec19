//! eBPF CPU sampler (`thread-ctx record`): a perf-event BPF program (bpf/sampler.bpf.c)
//! reads each sampled thread's OTEP 4947 record through the TLS access discovery
//! resolved, and user space decodes and aggregates what it sends.

pub mod abi;
pub mod error;
pub mod loader;
pub mod perf_event;
pub mod sample;
pub mod summary;

pub use abi::CtxState;
pub use error::SamplerError;
pub use loader::{Counters, ProgramStats, RunEnd, RunOutcome, Sampler, SamplerOptions};
pub use sample::Sample;
pub use summary::Summary;
