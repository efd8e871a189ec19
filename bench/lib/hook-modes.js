'use strict';
// Benchmark-only hook sets that mirror the ThreadContextManager's async-callback tracking
// (js/tls/hooks.js) on each mechanism, so that a benchmark can split the manager's cost:
//   floor:  the same hook points with empty bodies (what the runtime charges to dispatch them);
//   lookup: the same hooks finding the context each callback runs in, as the manager does,
//           without publishing anything.
// Kept here, not imported from js/, so the benchmarks do not break when the package's internals
// move; the mechanism itself comes from the package's public `ThreadContextManager#mechanism`.
// Variants question the floor itself: `after: false` hooks only `before` (a lazy restore that
// relies on the next before); `init: false` drops the init hook where the manager has one.

const { AsyncResource, createHook, executionAsyncResource } = require('node:async_hooks');
const { promiseHooks } = require('node:v8');

// Each mechanism the package has had (a revision measured through OTEL_THREAD_CTX_BENCH_REV may
// name an older one): whether promise reactions go through v8.promiseHooks, and whether
// AsyncResource contexts are captured in an async_hooks `init` hook (the package did until it
// entered AsyncResource scopes inside runInAsyncScope instead, which this workload does not call).
const MECHANISM_HOOKS = {
  async_hooks: { promiseHooks: false, initCapture: false },
  'promiseHooks+async_hooks': { promiseHooks: true, initCapture: false },
  'async_hooks+scopes': { promiseHooks: false, initCapture: false },
  'promiseHooks+async_hooks(init)': { promiseHooks: true, initCapture: true },
  'async_hooks(init)': { promiseHooks: false, initCapture: true },
};
const MECHANISMS = Object.keys(MECHANISM_HOOKS);

function noop() {}

// Where a lookup's result goes, so the optimiser cannot drop it.
let sink;

/**
 * Installs the hooks; returns a function that removes them.
 * @param mechanism the manager's `mechanism` (one of MECHANISMS)
 * @param options.active null for empty bodies, or () => context to look the context up
 * @param options.after false: no `after` hook; options.init false: no `init` hook
 */
function installHooks(mechanism, { active = null, after = true, init = true } = {}) {
  if (!MECHANISMS.includes(mechanism)) {
    throw new TypeError(`mechanism: expected one of ${MECHANISMS.join(', ')}, got ${JSON.stringify(mechanism)}`);
  }
  const { promiseHooks: viaPromiseHooks, initCapture } = MECHANISM_HOOKS[mechanism];
  const hooks = {};
  let promiseBefore = noop;
  if (active === null) {
    hooks.before = noop;
    if (initCapture && init) hooks.init = noop;
  } else if (!initCapture) {
    hooks.before = function before() { sink = active(); };
    promiseBefore = hooks.before;
  } else {
    const captured = new WeakMap();
    hooks.before = function before() {
      const resource = executionAsyncResource();
      sink = resource instanceof AsyncResource && captured.has(resource) ? captured.get(resource) : active();
    };
    if (init) {
      hooks.init = function initHook(asyncId, type, triggerAsyncId, resource) {
        if (resource instanceof AsyncResource) captured.set(resource, active());
      };
    }
    promiseBefore = function before() { sink = active(); };
  }
  if (after) hooks.after = noop;
  if (viaPromiseHooks) hooks.trackPromises = false;
  const hook = createHook(hooks).enable();
  const stops = [() => hook.disable()];
  if (viaPromiseHooks) {
    stops.push(promiseHooks.onBefore(promiseBefore));
    if (after) stops.push(promiseHooks.onAfter(noop));
  }
  return function uninstall() {
    for (const stop of stops) stop();
    return sink;
  };
}

/**
 * Counting hooks on the same points, for calibration (never in a measured run): how many
 * callbacks per unit of work the manager's hooks see. Returns { counts, uninstall }.
 */
function installCountingHooks(mechanism) {
  const counts = { asyncHooksBefore: 0, promiseHooksBefore: 0, init: 0 };
  const hooks = {
    before() { counts.asyncHooksBefore++; },
    after: noop,
  };
  const { promiseHooks: viaPromiseHooks, initCapture } = MECHANISM_HOOKS[mechanism];
  if (initCapture) hooks.init = () => { counts.init++; };
  if (viaPromiseHooks) hooks.trackPromises = false;
  const hook = createHook(hooks).enable();
  const stops = [() => hook.disable()];
  if (viaPromiseHooks) {
    stops.push(promiseHooks.onBefore(() => { counts.promiseHooksBefore++; }));
  }
  return { counts, uninstall() { for (const stop of stops) stop(); } };
}

module.exports = { MECHANISMS, installHooks, installCountingHooks };
