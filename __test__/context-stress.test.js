'use strict';
// Interleaving stress: 200 concurrent "requests", each in its own span, each awaiting a random
// mix of timers, immediates, nextTicks and resolved promises; at every resumption the record
// must equal the request's own span.

const test = require('node:test');
const assert = require('node:assert/strict');
const { setupTracing, sameSpan, describeRecord, lib } = require('./context-helpers');

const { tracer } = setupTracing();

const REQUESTS = 200;
const STEPS = 520; // 200 x 520 = 104,000 resumptions

// Small deterministic PRNG (mulberry32), so a failure can be replayed.
function prng(seed) {
  return function next() {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const waits = [
  () => new Promise((resolve) => setTimeout(resolve, 0)),
  () => new Promise((resolve) => setImmediate(resolve)),
  () => new Promise((resolve) => process.nextTick(resolve)),
  () => Promise.resolve(),
  () => null,
];
// Timers are ~1 ms each: keep them rare so the test stays within a few seconds.
const WEIGHTS = [0.02, 0.28, 0.2, 0.3, 0.2];

test(`${REQUESTS} interleaved requests, >= 100,000 resumptions, zero mismatches`, async () => {
  const seed = Number(process.env.CONTEXT_STRESS_SEED || 4947);
  const random = prng(seed);
  let resumptions = 0;
  let mismatches = 0;
  const firstMismatches = [];

  function pick() {
    let r = random();
    for (let i = 0; i < WEIGHTS.length; i++) {
      if ((r -= WEIGHTS[i]) < 0) return waits[i];
    }
    return waits[waits.length - 1];
  }

  const request = (i) => tracer.startActiveSpan(`request ${i}`, async (span) => {
    const own = span.spanContext();
    for (let step = 0; step < STEPS; step++) {
      await pick()();
      resumptions++;
      const record = lib.getSpanContext();
      if (!sameSpan(record, own)) {
        mismatches++;
        if (firstMismatches.length < 5) {
          firstMismatches.push(`request ${i} step ${step}: expected span ${own.spanId}, record shows ${describeRecord(record)}`);
        }
      }
    }
    span.end();
  });

  await Promise.all(Array.from({ length: REQUESTS }, (_, i) => request(i)));
  assert.ok(resumptions >= 100000, `expected at least 100,000 resumptions, counted ${resumptions}`);
  assert.equal(mismatches, 0,
    `expected zero mismatches over ${resumptions} resumptions (seed ${seed}), saw ${mismatches}:\n${firstMismatches.join('\n')}`);
  assert.equal(lib.getSpanContext(), null, 'expected none after every request ended');
});
