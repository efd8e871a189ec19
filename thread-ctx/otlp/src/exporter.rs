//! The exporter: a bounded queue of requests, and one background thread that sends them.
//!
//! The caller (the agent's sampling loop) must never wait for the network, so [`Exporter::export`]
//! only queues: it takes a lock held for a few instructions, and when the queue is full it drops
//! the oldest request (counted) instead of blocking. A dedicated thread runs a single-threaded
//! Tokio runtime, which tonic and reqwest need: one thread, no worker pool, so that exporting a
//! window every few seconds costs the host one mostly idle thread. It sends one request at a
//! time, in order, retrying transient failures with backoff.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use tokio::sync::{watch, Notify};

use super::config::ExporterConfig;
use super::outcome::{Delivered, SendError};
use super::retry::RetryPolicy;
use super::stats::{Count, ExporterStats};
use super::transport::Transport;
use super::transport_error::TransportError;

/// Sends OTLP profiles requests in the background. See the module documentation.
pub struct Exporter {
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
    description: String,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled whenever a request is settled, and when the worker ends.
    settled: Condvar,
    /// Wakes the worker: a new request, or shutdown.
    wake: Notify,
    /// The shutdown deadline, once shutdown began: the worker gives up at that instant.
    deadline: watch::Sender<Option<tokio::time::Instant>>,
    capacity: usize,
}

#[derive(Default)]
struct State {
    queue: VecDeque<(ExportProfilesServiceRequest, Count)>,
    stats: ExporterStats,
    closing: bool,
    worker_done: bool,
}

/// The exporter could not start.
#[derive(Debug, thiserror::Error)]
#[error("OTLP exporter for {endpoint}: {cause}")]
pub struct StartError {
    pub endpoint: String,
    pub cause: StartCause,
}

#[derive(Debug, thiserror::Error)]
pub enum StartCause {
    #[error("Tokio runtime: {0}")]
    Runtime(std::io::Error),
    #[error("thread: {0}")]
    Thread(std::io::Error),
    #[error(transparent)]
    Transport(#[from] TransportError),
}

impl Exporter {
    /// Starts the background thread. Nothing is sent (nor connected) until a request is queued.
    pub fn start(config: ExporterConfig) -> Result<Exporter, StartError> {
        let description = config.to_string();
        let fail = |cause: StartCause| StartError { endpoint: description.clone(), cause };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| fail(StartCause::Runtime(e)))?;
        let transport = {
            let _in_runtime = runtime.enter(); // tonic's lazy channel spawns its task here
            Transport::new(&config).map_err(|e| fail(e.into()))?
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            settled: Condvar::new(),
            wake: Notify::new(),
            deadline: watch::Sender::new(None),
            capacity: config.queue_capacity.max(1),
        });
        let worker_shared = Arc::clone(&shared);
        let retry = config.retry;
        let worker = std::thread::Builder::new()
            .name("otlp-exporter".into())
            .spawn(move || {
                let run = AssertUnwindSafe(|| runtime.block_on(run(&worker_shared, transport, retry)));
                let panicked = std::panic::catch_unwind(run).is_err();
                let mut state = worker_shared.lock();
                state.worker_done = true;
                if panicked {
                    // A bug, not a network problem: say so, and let export() drop from now on.
                    state.stats.last_error = Some("the exporter thread failed (a bug): nothing more is sent".into());
                    if state.stats.in_flight.requests > 0 {
                        let lost = std::mem::take(&mut state.stats.in_flight);
                        state.stats.dropped_shutdown.add(lost);
                    }
                }
                // Whatever is left missed the deadline.
                while let Some((_, count)) = state.queue.pop_front() {
                    state.stats.dropped_shutdown.add(count);
                }
                state.stats.queued = Count::default();
                drop(state);
                worker_shared.settled.notify_all();
            })
            .map_err(|e| fail(StartCause::Thread(e)))?;
        Ok(Exporter { shared, worker: Some(worker), description })
    }

    /// Queues a request and returns at once. When the queue is full the oldest waiting request
    /// is dropped (counted in `dropped_queue_full`); after shutdown began the request itself is
    /// dropped (counted in `dropped_shutdown`).
    pub fn export(&self, request: ExportProfilesServiceRequest) {
        let count = Count::of(&request);
        let mut state = self.shared.lock();
        if state.closing || state.worker_done {
            state.stats.dropped_shutdown.add(count);
            return;
        }
        if state.queue.len() >= self.shared.capacity {
            if let Some((_, oldest)) = state.queue.pop_front() {
                state.stats.dropped_queue_full.add(oldest);
            }
        }
        state.queue.push_back((request, count));
        state.stats.queued = queued(&state.queue);
        drop(state);
        self.shared.wake.notify_one();
    }

    /// The counters now.
    pub fn stats(&self) -> ExporterStats {
        self.shared.lock().stats.clone()
    }

    /// Waits until every request queued so far is settled (sent, failed or dropped), at most
    /// `within`. Returns whether it got there.
    pub fn flush(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut state = self.shared.lock();
        loop {
            if state.worker_done || (state.queue.is_empty() && state.stats.in_flight == Count::default()) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.shared.settled.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Sends what is queued for at most `within` (retrying as usual), then stops the thread.
    /// What is still queued or in flight then is dropped and counted in `dropped_shutdown`.
    /// Returns the final counters.
    pub fn shutdown(mut self, within: Duration) -> ExporterStats {
        self.stop(within);
        self.stats()
    }

    /// `grpc http://host:4317/ (gzip)`: where this exporter sends.
    pub fn description(&self) -> &str {
        &self.description
    }

    fn stop(&mut self, within: Duration) {
        let Some(worker) = self.worker.take() else { return };
        self.shared.lock().closing = true;
        let deadline = tokio::time::Instant::from_std(Instant::now() + within);
        self.shared.deadline.send_replace(Some(deadline));
        self.shared.wake.notify_one();
        // The worker bounds every wait by the deadline, so this join is bounded too.
        let _ = worker.join();
    }
}

impl Drop for Exporter {
    /// Dropping without `shutdown` abandons what is queued at once.
    fn drop(&mut self) {
        self.stop(Duration::ZERO);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not take the caller down with it: the counters stay usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn queued(queue: &VecDeque<(ExportProfilesServiceRequest, Count)>) -> Count {
    let mut total = Count::default();
    queue.iter().for_each(|(_, c)| total.add(*c));
    total
}

/// How a request ended.
enum Settled {
    Sent(Delivered),
    Failed(String),
    GaveUp(String),
    Shutdown,
}

/// The worker: takes requests in order and settles each, until shutdown.
async fn run(shared: &Shared, mut transport: Transport, retry: RetryPolicy) {
    loop {
        let next = {
            let mut state = shared.lock();
            let next = state.queue.pop_front();
            if let Some((_, count)) = &next {
                state.stats.in_flight = *count;
                state.stats.queued = queued(&state.queue);
            } else if state.closing {
                return;
            }
            next
        };
        let Some((request, count)) = next else {
            // A notify_one() between the check above and this wait leaves a permit: no lost wakeup.
            shared.wake.notified().await;
            continue;
        };
        let outcome = deliver(shared, &mut transport, request, retry).await;
        let mut state = shared.lock();
        let stats = &mut state.stats;
        stats.in_flight = Count::default();
        match outcome {
            Settled::Sent(delivered) => {
                stats.sent.add(count);
                stats.rejected_profiles += delivered.rejected_profiles;
                stats.last_error = (delivered.rejected_profiles > 0 || !delivered.message.is_empty())
                    .then(|| format!("the endpoint rejected {} profiles: {}", delivered.rejected_profiles, delivered.message));
            }
            Settled::Failed(reason) => {
                stats.failed.add(count);
                stats.last_error = Some(format!("refused, not retried: {reason}"));
            }
            Settled::GaveUp(reason) => {
                stats.dropped_retries_exhausted.add(count);
                stats.last_error = Some(format!("gave up retrying: {reason}"));
            }
            Settled::Shutdown => stats.dropped_shutdown.add(count),
        }
        drop(state);
        shared.settled.notify_all();
    }
}

/// Attempts one request until it is taken, refused, out of retry budget, or past the shutdown
/// deadline.
async fn deliver(shared: &Shared, transport: &mut Transport, request: ExportProfilesServiceRequest, policy: RetryPolicy) -> Settled {
    let prepared = transport.prepare(request);
    let first_attempt = Instant::now();
    let mut retries = 0u32;
    loop {
        let Some(result) = before_deadline(shared, transport.send(&prepared)).await else {
            return Settled::Shutdown;
        };
        let (reason, retry_after) = match result {
            Ok(delivered) => return Settled::Sent(delivered),
            Err(SendError::Permanent { reason }) => return Settled::Failed(reason),
            Err(SendError::Retryable { reason, retry_after }) => (reason, retry_after),
        };
        // The server's delay when it names one, else backoff.
        let delay = retry_after.unwrap_or_else(|| policy.delay(retries));
        if first_attempt.elapsed() + delay > policy.max_elapsed {
            return Settled::GaveUp(format!("{reason} (for {} s)", first_attempt.elapsed().as_secs()));
        }
        {
            let mut state = shared.lock();
            state.stats.retries += 1;
            state.stats.last_error = Some(format!("retrying in {} ms: {reason}", delay.as_millis()));
        }
        retries += 1;
        if before_deadline(shared, tokio::time::sleep(delay)).await.is_none() {
            return Settled::Shutdown;
        }
    }
}

/// `work`, unless the shutdown deadline (set now or later) passes first.
async fn before_deadline<F: Future>(shared: &Shared, work: F) -> Option<F::Output> {
    tokio::pin!(work);
    let mut deadline = shared.deadline.subscribe();
    loop {
        let at = *deadline.borrow_and_update();
        let expiry = async move {
            match at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            out = &mut work => return Some(out),
            _ = expiry => return None,
            _ = deadline.changed() => continue,
        }
    }
}
