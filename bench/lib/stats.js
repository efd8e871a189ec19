'use strict';
// Statistics for per-round benchmark samples: order statistics, and the median of paired ratios
// (a mode against a base measured in the same round) with a bootstrap 95 % interval. The
// bootstrap resamples rounds with a fixed-seed generator, so a saved run re-renders identically.

function sorted(values) {
  if (values.length === 0) throw new RangeError('values: expected at least one sample, got none');
  return [...values].sort((x, y) => x - y);
}

function median(values) {
  const s = sorted(values);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

function spread(values) {
  const s = sorted(values);
  return { median: median(s), min: s[0], max: s[s.length - 1] };
}

// mulberry32: small, fast, good enough to pick resampling indices.
function seededRandom(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function quantile(sortedValues, q) {
  const at = (sortedValues.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sortedValues[lo] + (sortedValues[hi] - sortedValues[lo]) * (at - lo);
}

/**
 * Median of `values` with a percentile-bootstrap confidence interval (default 95 %, 10,000
 * resamples). With fewer than 3 values there is no interval worth the name: lo/hi are min/max.
 */
function medianInterval(values, { level = 0.95, resamples = 10000, seed = 0x5eed } = {}) {
  const s = sorted(values);
  const m = median(s);
  if (s.length < 3) return { median: m, lo: s[0], hi: s[s.length - 1], n: s.length };
  const random = seededRandom(seed);
  const medians = new Float64Array(resamples);
  const sample = new Float64Array(s.length);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < s.length; i++) sample[i] = s[Math.floor(random() * s.length)];
    sample.sort();
    const mid = s.length >> 1;
    medians[r] = s.length % 2 === 1 ? sample[mid] : (sample[mid - 1] + sample[mid]) / 2;
  }
  medians.sort();
  const tail = (1 - level) / 2;
  return { median: m, lo: quantile(medians, tail), hi: quantile(medians, 1 - tail), n: s.length };
}

/**
 * Per round, value(mode) / value(base) of that round (the two ran next to each other in time),
 * summarised as the median with its bootstrap interval. `inNoise` is true when the interval
 * contains 1: the difference is not resolved by this run.
 * @param samples [{ round, mode, ... }]  @param metric (sample) => number
 */
function pairedRatio(samples, mode, base, metric) {
  const baseByRound = new Map(samples.filter((s) => s.mode === base).map((s) => [s.round, metric(s)]));
  const ratios = samples.filter((s) => s.mode === mode && baseByRound.has(s.round))
    .map((s) => metric(s) / baseByRound.get(s.round));
  if (ratios.length === 0) return null;
  const interval = medianInterval(ratios);
  return { ...interval, inNoise: interval.lo <= 1 && interval.hi >= 1 };
}

/** Per round, value(mode) − value(base), summarised like pairedRatio (inNoise: contains 0). */
function pairedDifference(samples, mode, base, metric) {
  const baseByRound = new Map(samples.filter((s) => s.mode === base).map((s) => [s.round, metric(s)]));
  const diffs = samples.filter((s) => s.mode === mode && baseByRound.has(s.round))
    .map((s) => metric(s) - baseByRound.get(s.round));
  if (diffs.length === 0) return null;
  const interval = medianInterval(diffs);
  return { ...interval, inNoise: interval.lo <= 0 && interval.hi >= 0 };
}

module.exports = { median, spread, medianInterval, pairedRatio, pairedDifference };
