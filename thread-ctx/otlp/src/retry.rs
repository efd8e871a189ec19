//! When to try a request again: exponential backoff with jitter, bounded per request.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

/// Backoff between attempts of one request: `initial`, then ×2 per attempt up to `max`, each
/// delay scattered by ±25 % so that agents restarted together do not retry in lockstep. A
/// request is given up (dropped and counted) once `max_elapsed` has passed since its first
/// attempt, so a long outage costs the oldest data and never grows memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub initial: Duration,
    pub max: Duration,
    pub max_elapsed: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { initial: Duration::from_secs(1), max: Duration::from_secs(30), max_elapsed: Duration::from_secs(120) }
    }
}

impl RetryPolicy {
    /// The delay before attempt `retry + 1` (`retry` = 0 for the first retry), jittered.
    pub fn delay(&self, retry: u32) -> Duration {
        let base = self.initial.saturating_mul(1u32 << retry.min(20)).min(self.max);
        // ±25 %: a factor in [0.75, 1.25) from a per-call random value.
        let r = RandomState::new().hash_one(retry) % 1000;
        base.mul_f64(0.75 + r as f64 / 2000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_maximum_within_the_jitter() {
        let p = RetryPolicy { initial: Duration::from_millis(100), max: Duration::from_millis(1000), ..Default::default() };
        for (retry, base) in [(0, 100), (1, 200), (2, 400), (3, 800), (4, 1000), (30, 1000)] {
            for _ in 0..20 {
                let d = p.delay(retry).as_secs_f64() * 1000.0;
                assert!(d >= base as f64 * 0.75 - 0.001 && d < base as f64 * 1.25, "retry {retry}: {d} ms");
            }
        }
    }

    #[test]
    fn jitter_scatters_the_delays() {
        let p = RetryPolicy::default();
        let delays: std::collections::HashSet<_> = (0..20).map(|_| p.delay(3)).collect();
        assert!(delays.len() > 1);
    }
}
