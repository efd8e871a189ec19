//! The pipeline every sampling command runs: discovered processes are
//! tracked by one [`Sampler`], whose events are routed to a
//! [`ProfileBuilder`] per process; the caller takes each process's profile
//! when it wants (once for `record`, every window for the agent) and hands it
//! to an output.

use crate::discovery::Discovery;
use crate::profile::{Profile, ProfileBuilder, ProfileSettings, Symbolizer};
use crate::sampler::{Event, EventKind, Sampler, SamplerError, SamplerOptions};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::time::Duration;

/// One tracked process.
pub struct Tracked {
    pub pid: u32,
    /// What discovery found when tracking started (writers, process context).
    pub discovery: Discovery,
    /// Aggregates its samples; None when no stacks are captured (nothing to symbolize).
    pub builder: Option<ProfileBuilder>,
    /// Events delivered since tracking started: CPU samples and off-CPU intervals.
    pub cpu_samples: u64,
    pub off_cpu_intervals: u64,
}

pub struct Pipeline {
    sampler: Sampler,
    settings: ProfileSettings,
    /// Tracked processes get a [`ProfileBuilder`] (else events only reach `poll`'s sink).
    build_profiles: bool,
    processes: BTreeMap<u32, Tracked>,
    events: Vec<Event>,
    /// Events of processes no longer tracked (arrived after `untrack`).
    pub late_events: u64,
    /// Ring-buffer records that did not decode (an ABI mismatch: should stay 0).
    pub undecodable: u64,
}

impl Pipeline {
    /// Loads and attaches the sampler; nothing is sampled until [`Pipeline::track`].
    pub fn start(opts: SamplerOptions) -> Result<Pipeline, SamplerError> {
        Self::start_with(opts, true)
    }

    /// Like [`Pipeline::start`], but builds no profiles and never reads the
    /// targets: events only reach `poll`'s sink (the agent symbolizes on
    /// another thread, where a target that blocks a read cannot stall sampling).
    pub fn start_unsymbolized(opts: SamplerOptions) -> Result<Pipeline, SamplerError> {
        Self::start_with(opts, false)
    }

    fn start_with(opts: SamplerOptions, build_profiles: bool) -> Result<Pipeline, SamplerError> {
        let sampler = Sampler::start(opts)?;
        let settings = ProfileSettings { hz: opts.hz, user_stacks: opts.user_stacks, kernel_stacks: opts.kernel_stacks, off_cpu: opts.off_cpu };
        Ok(Pipeline { sampler, settings, build_profiles, processes: BTreeMap::new(), events: Vec::new(), late_events: 0, undecodable: 0 })
    }

    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    pub fn sampler_mut(&mut self) -> &mut Sampler {
        &mut self.sampler
    }

    pub fn settings(&self) -> ProfileSettings {
        self.settings
    }

    /// Starts sampling a discovered process: its threads' records are read
    /// through its sampled writer's access (stacks only when it has none).
    /// Errors when its writers exist but none resolved, or the process is gone.
    pub fn track(&mut self, discovery: Discovery) -> Result<()> {
        let pid = discovery.pid as u32;
        let reach = discovery.sampled_writer().map_err(anyhow::Error::msg)?.and_then(|w| w.record_reach());
        let builder = if self.build_profiles && (self.settings.user_stacks || self.settings.kernel_stacks) {
            let symbolizer = Symbolizer::new(discovery.pid)?;
            Some(ProfileBuilder::new(symbolizer, discovery.key_map(), self.settings))
        } else {
            None
        };
        self.sampler.track_reach(pid, reach).with_context(|| format!("sampling process {pid}"))?;
        self.processes.insert(pid, Tracked { pid, discovery, builder, cpu_samples: 0, off_cpu_intervals: 0 });
        Ok(())
    }

    /// Stops sampling `pid`, delivers what it still has in the ring buffer,
    /// and hands the process back (its last profile is in its builder).
    pub fn untrack(&mut self, pid: u32, sink: &mut dyn FnMut(&Tracked, &Event)) -> Result<Option<Tracked>, SamplerError> {
        if !self.processes.contains_key(&pid) {
            return Ok(None);
        }
        self.sampler.untrack(pid)?;
        self.poll(Duration::ZERO, sink)?;
        Ok(self.processes.remove(&pid))
    }

    pub fn get(&self, pid: u32) -> Option<&Tracked> {
        self.processes.get(&pid)
    }

    pub fn get_mut(&mut self, pid: u32) -> Option<&mut Tracked> {
        self.processes.get_mut(&pid)
    }

    /// Waits up to `timeout` for events, routes each to its process's builder
    /// and shows it to `sink`. Returns how many events were delivered.
    pub fn poll(&mut self, timeout: Duration, sink: &mut dyn FnMut(&Tracked, &Event)) -> Result<usize, SamplerError> {
        self.undecodable += self.sampler.poll(timeout, &mut self.events)?;
        let n = self.events.len();
        for e in self.events.drain(..) {
            let Some(t) = self.processes.get_mut(&e.pid) else {
                self.late_events += 1;
                continue;
            };
            match e.kind {
                EventKind::Cpu => t.cpu_samples += 1,
                EventKind::OffCpu => t.off_cpu_intervals += 1,
            }
            if let Some(b) = t.builder.as_mut() {
                b.add(&e);
            }
            sink(t, &e);
        }
        for b in self.processes.values_mut().filter_map(|t| t.builder.as_mut()) {
            b.flush_if_due();
        }
        Ok(n)
    }

    /// The profile of `pid` so far; its builder starts a new one.
    pub fn take_profile(&mut self, pid: u32) -> Option<Profile> {
        self.processes.get_mut(&pid)?.builder.as_mut().map(ProfileBuilder::take)
    }
}

/// The process exists (it may be a zombie whose threads are gone).
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks existence/permission.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 || *libc::__errno_location() != libc::ESRCH }
}
