//! One process recorded once, as `thread-ctx record` does it: the [`Pipeline`] with its
//! symbolize stage inline, tracking one process (or one of its threads), polled until the time
//! is up, the caller stops it or the target exits; then the recording's one window as a
//! [`Profile`]. Each sample is shown to an [`Observer`] as it is decoded (the summary and the
//! jsonl lines are built from it), so the recording names and decodes every sample once. The
//! continuous counterpart, many processes and a window every interval, is `thread_ctx_agent`.

use crate::pipeline::{process_alive, Identity, Pipeline, PipelineError, Symbolize, TrackedProcess};
use crate::{Profile, Sample};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thread_ctx_discovery::error::ErrorKind;
use thread_ctx_discovery::host_scan::ProcessKey;
use thread_ctx_discovery::Discovery;
use thread_ctx_sampler::{Event, SamplerOptions, V8Sites};

/// How often the loop looks at the clock, the caller's stop request and the target.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Why a recording ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Its duration was up.
    Deadline,
    /// The observer stopped it (Ctrl-C, or nobody reads its output any more).
    Stopped,
    TargetExited,
    /// The one thread recorded exited (its process may go on).
    ThreadExited,
}

/// What sees each sample of the recording as it is decoded, and may end the recording early.
pub trait Observer {
    /// One sample: `event` as the sampler sent it, `sample` as the decode stage made it. The
    /// process gives access to its inline symbolize stage ([`TrackedProcess::name_now`]).
    fn sample(&mut self, process: &mut TrackedProcess, event: &Event, sample: &Sample);

    /// True once the recording should end.
    fn stopped(&self) -> bool;
}

/// What stopped a recording; its message includes the pipeline's (no source of its own).
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("starting the eBPF sampler: {0}")]
    Start(PipelineError),
    #[error("process {pid} exited before it could be sampled")]
    Exited { pid: u32 },
    #[error("sampling process {pid}: {cause}")]
    Sampling { pid: u32, cause: PipelineError },
}

impl RecordingError {
    /// What the error means for the caller (no permission to load eBPF, a target gone, ...).
    pub fn kind(&self) -> ErrorKind {
        match self {
            RecordingError::Start(e) | RecordingError::Sampling { cause: e, .. } => e.kind(),
            RecordingError::Exited { .. } => ErrorKind::TargetGone,
        }
    }
}

/// What a finished recording holds.
#[derive(Debug)]
pub struct Recorded {
    /// The recording's window (None when nothing symbolizes: no stacks were captured).
    pub profile: Option<Profile>,
    pub end: End,
    pub seconds: f64,
    /// Wall-clock start, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Samples lost because the ring buffer was full.
    pub dropped: u64,
}

pub struct Recording {
    pipeline: Pipeline,
    pid: u32,
    tid: Option<u32>,
    started: Instant,
    start_unix_ns: u64,
}

impl Recording {
    /// Loads the sampler and tracks process `discovery.pid` (only its thread `tid`, when
    /// given) through what discovery found; with allocations on, probes its `node`.
    pub fn start(
        opts: SamplerOptions,
        symbolize: Symbolize,
        discovery: &Discovery,
        identity: Identity,
        tid: Option<u32>,
    ) -> Result<Recording, RecordingError> {
        let pid = discovery.pid as u32;
        let key = ProcessKey::of(pid).ok_or(RecordingError::Exited { pid })?;
        let mut pipeline = Pipeline::start(opts, symbolize).map_err(RecordingError::Start)?;
        // The recording starts when tracking does: taken after it, a sample the kernel sent while
        // this thread was switched out between the two would carry a time before the profile's start.
        let start_unix_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let started = Instant::now();
        // Its V8 layout (its node binary's symbols), to read and name its JS frames; or why not,
        // which its symbolize stage says once.
        let v8 = V8Sites::new().process(pid);
        pipeline.track(key, discovery, identity, v8).map_err(|cause| RecordingError::Sampling { pid, cause })?;
        if let Some(tid) = tid {
            pipeline.keep_only_thread(pid, tid);
        }
        pipeline.probe_allocations(pid, None);
        Ok(Recording { pipeline, pid, tid, started, start_unix_ns })
    }

    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    pub fn pipeline_mut(&mut self) -> &mut Pipeline {
        &mut self.pipeline
    }

    /// The one thread recorded, when only one is.
    pub fn tid(&self) -> Option<u32> {
        self.tid
    }

    /// The tracked process (its symbolize stage, to warn early about frames it cannot name).
    pub fn process(&self) -> Option<&TrackedProcess> {
        self.pipeline.get(self.pid)
    }

    /// Samples for `duration` at most, showing each sample to `observer`; returns why it ended.
    pub fn run(&mut self, duration: Duration, observer: &mut dyn Observer) -> Result<End, RecordingError> {
        let deadline = self.started + duration;
        let pid = self.pid;
        let end = loop {
            if Instant::now() >= deadline {
                break End::Deadline;
            }
            if observer.stopped() {
                break End::Stopped;
            }
            if !process_alive(pid) {
                break End::TargetExited;
            }
            if self.tid.is_some_and(|t| !std::path::Path::new(&format!("/proc/{pid}/task/{t}")).exists()) {
                break End::ThreadExited;
            }
            let wait = POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now()));
            self.poll(wait, observer)?;
        };
        // What the ring buffer still holds belongs to the recording.
        self.poll(Duration::ZERO, observer)?;
        Ok(end)
    }

    fn poll(&mut self, wait: Duration, observer: &mut dyn Observer) -> Result<(), RecordingError> {
        let pid = self.pid;
        self.pipeline.poll(wait, &mut |p, e, s| observer.sample(p, e, s)).map_err(|cause| RecordingError::Sampling { pid, cause })?;
        Ok(())
    }

    /// Ends the recording: its samples become its window's profile.
    pub fn finish(&mut self, end: End) -> Result<Recorded, RecordingError> {
        let seconds = self.started.elapsed().as_secs_f64();
        let pid = self.pid;
        let dropped = self.pipeline.sampler().counters().map_err(|e| RecordingError::Sampling { pid, cause: e.into() })?.all_dropped();
        self.pipeline.end_window(self.start_unix_ns, (seconds * 1e9) as u64);
        let profile = self.pipeline.take_windows().into_iter().flat_map(|w| w.processes).map(|p| p.profile).next();
        Ok(Recorded { profile, end, seconds, start_unix_ns: self.start_unix_ns, dropped })
    }
}
