'use strict';
// Allocation sampling: V8's sampling heap profiler, turned on once per JS thread so that an
// outside reader (thread-ctx --alloc) can probe the function V8 calls for each sampled
// allocation and attribute it to the span the thread's record shows at that instant.
//
// V8 picks the allocations (one every samplingIntervalBytes on average, a Poisson process) and
// nothing runs in JavaScript per allocation. It is started through node:inspector's Session on
// the calling thread (workers have their own inspector), and that session is kept for the
// thread's life: closing it stops V8's sampler. Without the includeObjectsCollectedBy* flags V8
// keeps a sample only while its object lives, so the memory it holds is bounded by the live heap
// divided by the interval (~2,000 samples for 1 GiB at 512 KiB). The interval is published in
// the process context (v8.heap_sampling_interval_bytes), one per process: the first thread to
// start decides it, since a reader scales every sample of the process by it.

const native = require('../native/addon');
const { describe } = require('../describe');

const DEFAULT_INTERVAL = 512 * 1024;
// Below 1 KiB V8 would sample nearly every object (its stack walk per sample then dominates);
// above 1 GiB a busy service would see almost no samples.
const MIN_INTERVAL = 1024;
const MAX_INTERVAL = 1024 * 1024 * 1024;
const ENV = 'OTEL_THREAD_CTX_ALLOCATIONS';
const WARNING_CODE = 'OTEL_THREAD_CTX_ALLOCATIONS';

/**
 * Validates an `allocations` option and returns what it asks for: false, or
 * { samplingIntervalBytes }. undefined means "not given" (the environment decides later).
 */
function checkAllocations(value, arg = 'options.allocations') {
  if (value === undefined) return undefined;
  if (typeof value === 'boolean') return value ? { samplingIntervalBytes: DEFAULT_INTERVAL } : false;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${arg}: expected a boolean or { samplingIntervalBytes }, got ${describe(value)}`);
  }
  for (const key of Object.keys(value)) {
    if (key !== 'samplingIntervalBytes') throw new TypeError(`${arg}.${key}: unknown option (expected samplingIntervalBytes)`);
  }
  const bytes = value.samplingIntervalBytes;
  if (bytes === undefined) return { samplingIntervalBytes: DEFAULT_INTERVAL };
  if (typeof bytes !== 'number') {
    throw new TypeError(`${arg}.samplingIntervalBytes: expected a number of bytes, got ${describe(bytes)}`);
  }
  if (!Number.isInteger(bytes) || bytes < MIN_INTERVAL || bytes > MAX_INTERVAL) {
    throw new RangeError(`${arg}.samplingIntervalBytes: expected an integer from ${MIN_INTERVAL} to ${MAX_INTERVAL}, got ${bytes}`);
  }
  return { samplingIntervalBytes: bytes };
}

/**
 * What OTEL_THREAD_CTX_ALLOCATIONS asks for: unset, empty, 0 or false: off; 1 or true: on at the
 * default interval; an integer of bytes: on at that interval. Anything else is a warning and off:
 * a typo in the environment must not stop the service.
 */
function allocationsFromEnv(env = process.env) {
  const text = env[ENV];
  if (text === undefined) return false;
  const value = text.trim().toLowerCase();
  if (value === '' || value === '0' || value === 'false') return false;
  if (value === '1' || value === 'true') return { samplingIntervalBytes: DEFAULT_INTERVAL };
  if (/^[0-9]+$/.test(value)) {
    try {
      return checkAllocations({ samplingIntervalBytes: Number(value) }, ENV);
    } catch (error) {
      warn(`${error.message}; allocation sampling stays off`);
      return false;
    }
  }
  warn(`${ENV}: expected 1, true, 0, false or a sampling interval in bytes, got ${JSON.stringify(text)}; allocation sampling stays off`);
  return false;
}

/** The option as given, or else the environment's: false or { samplingIntervalBytes }. */
function resolveAllocations(checked) {
  return checked === undefined ? allocationsFromEnv() : checked;
}

// This thread's sampler, shared by every copy of the package loaded in the thread (each worker
// has its own globalThis, so its own entry).
const kState = Symbol.for('otel-thread-ctx.allocations');

function threadState() {
  let state = globalThis[kState];
  if (state === undefined) {
    state = { session: null, samplingIntervalBytes: null, error: null };
    Object.defineProperty(globalThis, kState, { value: state, enumerable: false });
  }
  return state;
}

/**
 * Starts V8's sampling heap profiler on the calling thread, once: later calls (other managers,
 * register(), a second copy of the package) change nothing. A failure is one warning, never a
 * throw. `config`: false (nothing to do) or { samplingIntervalBytes }.
 */
function startAllocationSampling(config) {
  if (config === false || config === undefined) return allocationSamplingInfo();
  const state = threadState();
  if (state.session !== null || state.error !== null) return allocationSamplingInfo();
  try {
    const interval = processInterval(config.samplingIntervalBytes);
    const { Session } = require('node:inspector');
    const session = new Session();
    session.connect();
    // A session of the calling thread answers synchronously, before post() returns.
    let answered = false;
    let failure = null;
    session.post('HeapProfiler.startSampling', { samplingInterval: interval }, (error) => {
      answered = true;
      failure = error;
    });
    if (!answered || failure) {
      session.disconnect();
      throw failure || new Error('HeapProfiler.startSampling did not answer');
    }
    state.session = session;
    state.samplingIntervalBytes = interval;
  } catch (error) {
    state.error = (error && error.message) || String(error);
    warn(`could not start V8's sampling heap profiler on this thread (${state.error}); allocations are not sampled here`);
  }
  return allocationSamplingInfo();
}

// The interval this process samples at: the first one published, so that one scale fits all of
// its samples; a thread that asked for another one is told, once.
function processInterval(asked) {
  if (!native.supported) return asked;
  const published = native.publishHeapSamplingInterval(asked);
  if (published !== asked) {
    warn(`samplingIntervalBytes ${asked} asked for, but this process already samples at ${published} bytes ` +
      '(one interval per process, so that readers scale every sample alike); using that');
  }
  return published;
}

/** The calling thread's allocation sampling: whether it runs, at what interval, or why not. */
function allocationSamplingInfo() {
  const state = globalThis[kState];
  if (state === undefined) return { active: false, samplingIntervalBytes: null, error: null };
  return { active: state.session !== null, samplingIntervalBytes: state.samplingIntervalBytes, error: state.error };
}

function warn(message) {
  process.emitWarning(`otel-thread-ctx: ${message}`, { code: WARNING_CODE });
}

module.exports = {
  checkAllocations,
  resolveAllocations,
  startAllocationSampling,
  allocationSamplingInfo,
  DEFAULT_SAMPLING_INTERVAL_BYTES: DEFAULT_INTERVAL,
};
