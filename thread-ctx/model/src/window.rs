//! What the pipeline hands a sink at the end of each window: every tracked
//! process's profile over it, with the resource that names the process.

use crate::Profile;
use thread_ctx_discovery::cgroup_cpu::CpuThrottling;
use thread_ctx_discovery::process_context_proto::Resource;

/// One process's profile over one window.
pub struct WindowProcess {
    pub pid: u32,
    pub service_name: String,
    pub resource: Resource,
    pub profile: Profile,
    /// It exited during the window: this is its last profile.
    pub exited: bool,
    /// How long its cgroup's CPU quota throttled it during the window, where the agent read it
    /// (the agent sets it; the pipeline leaves it None).
    pub cpu_throttling: Option<CpuThrottling>,
    /// How long the symbolization thread took to finish this profile (naming what was not named
    /// yet, building it), in ns: 0 where it was finished inline.
    pub finish_ns: u64,
}

/// The profiles of one window.
pub struct Window {
    /// Wall clock, ns since the Unix epoch.
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    pub processes: Vec<WindowProcess>,
}
