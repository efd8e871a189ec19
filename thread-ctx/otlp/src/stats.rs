//! What the exporter did, for the agent's status line.

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;

/// Requests, and the `Sample` messages they carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    pub requests: u64,
    pub samples: u64,
}

impl Count {
    /// One request: its number of samples.
    pub fn of(request: &ExportProfilesServiceRequest) -> Count {
        let samples =
            request.resource_profiles.iter().flat_map(|r| &r.scope_profiles).flat_map(|s| &s.profiles).map(|p| p.samples.len() as u64).sum();
        Count { requests: 1, samples }
    }

    pub(crate) fn add(&mut self, other: Count) {
        self.requests += other.requests;
        self.samples += other.samples;
    }
}

/// Counters since the exporter started. Every request handed to the exporter ends in exactly
/// one of `sent`, `failed` or a `dropped_*`, or is still `queued` / `in_flight`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExporterStats {
    /// Taken by the endpoint (see `rejected_profiles` for parts it refused).
    pub sent: Count,
    /// Refused for good by the endpoint (a permanent error: not retried).
    pub failed: Count,
    /// Attempts that failed transiently and were made again.
    pub retries: u64,
    /// Pushed out of the full queue by newer requests (the endpoint was slower than the data).
    pub dropped_queue_full: Count,
    /// Given up after [`RetryPolicy::max_elapsed`](super::RetryPolicy) of transient failures.
    pub dropped_retries_exhausted: Count,
    /// Still queued or being sent when the shutdown deadline passed, or exported after shutdown
    /// began (or after the exporter thread failed).
    pub dropped_shutdown: Count,
    /// Profiles inside sent requests that the endpoint reported it rejected (OTLP partial
    /// success).
    pub rejected_profiles: u64,
    /// Waiting to be sent now.
    pub queued: Count,
    /// Being sent (or waiting to be retried) now.
    pub in_flight: Count,
    /// The current problem: the latest failure, retry or partial rejection, cleared when a
    /// request is then taken whole.
    pub last_error: Option<String>,
}

impl ExporterStats {
    /// Everything dropped, whatever the reason.
    pub fn dropped(&self) -> Count {
        let mut total = self.dropped_queue_full;
        total.add(self.dropped_retries_exhausted);
        total.add(self.dropped_shutdown);
        total
    }
}

impl std::fmt::Display for ExporterStats {
    /// The exporter's part of the agent's status line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.dropped();
        write!(
            f,
            "exported {} requests ({} OTLP Sample messages: one per stack, thread and span), {} retries, dropped {} (queue full {}, gave up {}, at shutdown {}), refused {} ({} profiles rejected in part); {} queued now",
            self.sent.requests,
            self.sent.samples,
            self.retries,
            d.requests,
            self.dropped_queue_full.requests,
            self.dropped_retries_exhausted.requests,
            self.dropped_shutdown.requests,
            self.failed.requests,
            self.rejected_profiles,
            self.queued.requests + self.in_flight.requests
        )
    }
}
