//! Allocation samples, out of process: a uprobe on V8's
//! `SamplingHeapProfiler::SampleObject`, which runs once per allocation V8's
//! sampling heap profiler picks (turned on in the service by the package's
//! `allocations` option), reads the sampled size, the user stack and the
//! thread's record with the CPU sampler's own reader (bpf/alloc_probe.bpf.h).
//!
//! - [`symbol`]: the probe's file offset in one ELF file (`.dynsym` or `.symtab`);
//! - [`site`]: which object of a process holds V8, cached per build id;
//! - [`attachments`]: one uprobe per object, for as long as a tracked process maps it;
//! - [`scale`]: the bytes a sample stands for, at the interval the process publishes.

pub mod attachments;
mod program;
pub mod scale;
pub mod site;
pub mod symbol;

pub use attachments::{Added, ProbeAttachments};
pub use program::AllocCounters;

/// One uprobe attached by [`Sampler::attach_alloc_probe`](crate::Sampler::attach_alloc_probe); dropping it detaches the probe.
pub type ProbeLink = libbpf_rs::Link;
pub use scale::{published_interval, unbiased_bytes, DEFAULT_INTERVAL, HEAP_SAMPLING_INTERVAL_KEY};
pub use site::{ObjectKey, ProbeSite, ProbeSiteError, ProbeSites};
pub use symbol::{probe_offset_in_file, ProbeOffset, ProbeSymbolError, SymbolTableKind, SAMPLE_OBJECT};
