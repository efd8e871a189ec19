'use strict';
// Async callback tracking: calls enter(context) when any callback starts (promise reaction,
// timer, immediate, nextTick, I/O, AsyncResource scope) with the context it runs in, and exit()
// when it ends. The mechanism is the cheapest correct one of this runtime, chosen by probing
// behaviour (never by version string).

const { AsyncLocalStorage, AsyncResource, createHook, executionAsyncResource } = require('async_hooks');
const { promiseHooks } = require('v8');

// Does an async_hooks `before` see the store of the resource being entered, even for
// AsyncResource.runInAsyncScope? True where AsyncLocalStorage rides on async_hooks resources;
// false with AsyncContextFrame, which emits before/after outside its frame switch.
function hooksSeeResourceStore() {
  const storage = new AsyncLocalStorage();
  let seen;
  const hook = createHook({ before() { seen = storage.getStore(); } }).enable();
  try {
    const resource = storage.run('resource', () => new AsyncResource('OTEL_THREAD_CTX_PROBE'));
    storage.run('caller', () => resource.runInAsyncScope(() => {}));
  } finally {
    hook.disable();
    storage.disable();
  }
  return seen === 'resource';
}

// createHook({ trackPromises: false }) lets promise reactions skip async_hooks. Where the option
// exists, a non-boolean value is rejected; elsewhere it is silently ignored.
function createHookHasTrackPromises() {
  try {
    createHook({ trackPromises: 'probe' });
    return false;
  } catch {
    return true;
  }
}

let detected = null;
function detectMechanism() {
  if (detected !== null) return detected;
  if (hooksSeeResourceStore()) {
    // AsyncLocalStorage on async_hooks (Node 18-22, 24+ without AsyncContextFrame): `before`
    // always sees the right store, promises included, whatever the hook order. v8.promiseHooks
    // would not be cheaper here and depend on running after Node's own promise hook.
    detected = { name: 'async_hooks', promiseHooks: false, captureAtInit: false, trackPromises: true };
  } else if (createHookHasTrackPromises()) {
    // AsyncContextFrame with trackPromises (Node 24+): promise reactions through v8.promiseHooks
    // (the frame is already the continuation's in `before`), everything else through async_hooks
    // with the store captured at init (AsyncResource scopes emit `before` in the caller's frame).
    detected = { name: 'promiseHooks+async_hooks(init)', promiseHooks: true, captureAtInit: true, trackPromises: false };
  } else {
    // AsyncContextFrame without trackPromises (Node 22 with the flag): async_hooks sees promises
    // anyway, so it handles them too; promise stores are read in `before`, others captured at init.
    detected = { name: 'async_hooks(init)', promiseHooks: false, captureAtInit: true, trackPromises: true };
  }
  return detected;
}

// Installs the tracking; returns a function that removes every hook it installed.
// `active()` returns the current context; enter/exit must never throw (a throwing hook is fatal).
function trackAsyncCallbacks(active, enter, exit) {
  const mechanism = detectMechanism();
  const stops = [];
  if (mechanism.captureAtInit) {
    // Only AsyncResource scopes need it (timers, ticks and native callbacks see their frame);
    // a WeakMap entry per timer would cost far more than the switch itself.
    const captured = new WeakMap();
    const before = function before() {
      const resource = executionAsyncResource();
      enter(resource instanceof AsyncResource && captured.has(resource) ? captured.get(resource) : active());
    };
    const init = function init(asyncId, type, triggerAsyncId, resource) {
      if (resource instanceof AsyncResource) captured.set(resource, active());
    };
    const hook = createHook({ init, before, after: exit, trackPromises: mechanism.trackPromises });
    hook.enable();
    stops.push(() => hook.disable());
  } else {
    const before = function before() { enter(active()); };
    const hook = createHook({ before, after: exit });
    hook.enable();
    stops.push(() => hook.disable());
  }
  if (mechanism.promiseHooks) {
    stops.push(promiseHooks.onBefore(function promiseBefore() { enter(active()); }));
    stops.push(promiseHooks.onAfter(exit));
  }
  return function untrack() {
    for (const stop of stops) stop();
  };
}

module.exports = { detectMechanism, trackAsyncCallbacks };
