//! What the sampler takes besides CPU samples: flags `record` and `agent` share, declared once
//! (flattened into each command's arguments) so that both say and do the same.

use thread_ctx_sampler::SamplerOptions;

#[derive(clap::Args, Debug, Default, Clone)]
pub struct SamplingArgs {
    /// Also capture kernel stacks (symbolized from /proc/kallsyms).
    #[arg(long)]
    pub kernel: bool,
    /// Also trace off-CPU time (sched_switch): how long each thread was switched out, attributed
    /// to the span it had published when it left the CPU, as blocked (it waited: sleep, I/O, a
    /// lock) or preempted (runnable, it waited for a CPU). record: the summary's BLOCKED and
    /// PREEMPTED columns, and --kind off-cpu or cpu+off-cpu draws it; agent: a second profile per
    /// process (sample attribute thread.off_cpu.state); pprof: label off_cpu.
    #[arg(long)]
    pub off_cpu: bool,
    /// Also take allocation samples: V8's sampling heap profiler must run in the target (the
    /// package's `allocations` option, or OTEL_THREAD_CTX_ALLOCATIONS=1); a uprobe on its `node`
    /// reads each sample's size, stack and span, linked to trace and span like CPU samples.
    /// record: jsonl lines of kind `alloc` with `size` (the sampled object) and `bytes` (what
    /// the sample stands for, scaled by the interval the process publishes), an allocation
    /// table in bytes, and --kind alloc draws them; agent: two more profiles per process;
    /// pprof: alloc_objects/count and alloc_space/bytes. A `node` without the symbol (stripped)
    /// is named once; its CPU profile goes on.
    #[arg(long)]
    pub alloc: bool,
}

impl SamplingArgs {
    /// The sampler's options at `hz`, with user stacks or without.
    pub fn options(&self, hz: u32, user_stacks: bool) -> SamplerOptions {
        SamplerOptions { hz, user_stacks, kernel_stacks: self.kernel, off_cpu: self.off_cpu, alloc: self.alloc }
    }
}
