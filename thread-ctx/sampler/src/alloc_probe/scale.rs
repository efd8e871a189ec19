//! What one allocation sample stands for. V8's sampling heap profiler samples
//! allocated bytes as a Poisson process of mean interval I: an object of s
//! bytes is sampled with probability 1 − e^(−s/I), so each sample stands for
//! s / (1 − e^(−s/I)) bytes (pprof's heap scaling; never less than s, about I
//! for small objects). I comes from the process: the writer publishes it in
//! its process context.

use thread_ctx_discovery::process_context::ProcessContextInfo;
use thread_ctx_discovery::process_context_proto::any_value::Value;

/// The process-context attribute (outside the resource) holding V8's mean sampling interval.
pub const HEAP_SAMPLING_INTERVAL_KEY: &str = "v8.heap_sampling_interval_bytes";
/// The interval assumed for a process that publishes none: the package's default, 512 KiB.
pub const DEFAULT_INTERVAL: u64 = 512 * 1024;
/// A published interval outside [1, 1 TiB] is not one V8 was given: ignored as unknown.
const MAX_INTERVAL: u64 = 1 << 40;

/// The interval a process publishes, when it publishes a usable one.
pub fn published_interval(pc: &ProcessContextInfo) -> Option<u64> {
    let kv = pc.decoded.attributes.iter().rev().find(|kv| kv.key == HEAP_SAMPLING_INTERVAL_KEY)?;
    match kv.value.as_ref()?.value.as_ref()? {
        Value::IntValue(n) if (1..=MAX_INTERVAL as i64).contains(n) => Some(*n as u64),
        _ => None,
    }
}

/// The bytes one sample of an object of `size` bytes stands for at mean interval `interval`.
pub fn unbiased_bytes(size: u64, interval: u64) -> u64 {
    let interval = interval.max(1) as f64;
    if size == 0 {
        return interval as u64; // the limit as s → 0
    }
    let s = size as f64;
    let scaled = s / -(-s / interval).exp_m1();
    if scaled.is_finite() {
        scaled.round().min(u64::MAX as f64) as u64
    } else {
        size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_objects_stand_for_about_the_interval_large_ones_for_themselves() {
        let i = DEFAULT_INTERVAL;
        assert_eq!(unbiased_bytes(0, i), i);
        let small = unbiased_bytes(32, i);
        assert!((i..=i + 32).contains(&small), "{small}");
        assert_eq!(unbiased_bytes(64 << 20, i), 64 << 20, "a 64 MiB object is always sampled");
        // s = I: s / (1 - 1/e) = 1.582 I.
        assert_eq!(unbiased_bytes(i, i), (i as f64 / (1.0 - (-1.0f64).exp())).round() as u64);
        assert_eq!(unbiased_bytes(u64::MAX, 1), u64::MAX);
        assert_eq!(unbiased_bytes(100, 0), 100, "a zero interval is taken as 1 byte");
    }

    #[test]
    fn sums_of_scaled_samples_estimate_the_bytes_allocated() {
        // 512 objects of 64 KiB at I = 16 KiB: each sampled with p = 1 - e^-4; the expected
        // number of samples times the scale is the bytes allocated.
        let (s, i) = (64 * 1024u64, 16 * 1024u64);
        let p = 1.0 - (-(s as f64) / i as f64).exp();
        let estimate = (512.0 * p) * unbiased_bytes(s, i) as f64;
        assert!((estimate - 512.0 * s as f64).abs() < s as f64, "{estimate}");
    }
}
