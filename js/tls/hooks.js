'use strict';
// Async callback tracking: calls enter(context) when any callback starts (promise reaction,
// timer, immediate, nextTick, I/O, AsyncResource scope) with the context it runs in, and exit()
// when it ends. The mechanism is the cheapest correct one of this runtime, chosen by probing
// behaviour (never by version string).

const { AsyncLocalStorage, AsyncResource, createHook } = require('async_hooks');
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
    detected = { name: 'async_hooks', promiseHooks: false, scopesInside: false, trackPromises: true };
  } else if (createHookHasTrackPromises()) {
    // AsyncContextFrame with trackPromises (Node 24+): promise reactions through v8.promiseHooks
    // (the frame is already the continuation's in `before`), everything else through async_hooks;
    // AsyncResource scopes entered again inside runInAsyncScope (they emit `before` in the
    // caller's frame).
    detected = { name: 'promiseHooks+async_hooks', promiseHooks: true, scopesInside: true, trackPromises: false };
  } else {
    // AsyncContextFrame without trackPromises (Node 22 with the flag): async_hooks sees promises
    // anyway, so it handles them too; AsyncResource scopes as above.
    detected = { name: 'async_hooks+scopes', promiseHooks: false, scopesInside: true, trackPromises: true };
  }
  return detected;
}

// Under AsyncContextFrame, AsyncResource#runInAsyncScope emits `before` while the caller's frame
// is current and switches to the resource's frame only after: the context a scope runs in is
// visible inside it, not in the hook. So the scope's function is entered once more, inside, by
// wrapping runInAsyncScope (AsyncResource.bind, AsyncLocalStorage.bind and .snapshot all go
// through it). This replaced capturing each AsyncResource's context in an `init` hook, which
// fired for every timer, immediate and fs request: ~4,000 instructions per request of the span
// workload on Node 24, a quarter of the whole hook dispatch.
let scopeTracking = null; // { active, enter, exit } while tracking
let runInAsyncScopeBelow = null; // the runInAsyncScope wrapped (Node's, or another wrapper)

function runInAsyncScope(fn, thisArg, ...args) {
  const tracking = scopeTracking;
  if (tracking === null || typeof fn !== 'function') return Reflect.apply(runInAsyncScopeBelow, this, [fn, thisArg, ...args]);
  return Reflect.apply(runInAsyncScopeBelow, this, [runScope, tracking, fn, thisArg, args]);
}

// Runs inside the resource's frame (`this`: the tracking that was current when the scope began).
// A scope whose tracking was stopped inside it (the manager disabled, or taken over by a newer
// one) does not exit: that tracking's restore stack is gone, and an exit would overwrite what was
// written since (a direct write, or the newer manager's context) with a stale entry.
function runScope(fn, thisArg, args) {
  this.enter(this.active());
  try {
    return Reflect.apply(fn, thisArg, args);
  } finally {
    if (scopeTracking === this) this.exit();
  }
}

function trackScopes(tracking) {
  const proto = AsyncResource.prototype;
  if (proto.runInAsyncScope !== runInAsyncScope) {
    runInAsyncScopeBelow = proto.runInAsyncScope;
    proto.runInAsyncScope = runInAsyncScope;
  }
  scopeTracking = tracking;
  return function untrackScopes() {
    if (scopeTracking === tracking) scopeTracking = null;
    // Unwrapped unless something wrapped it since (then ours stays, passing through).
    if (scopeTracking === null && proto.runInAsyncScope === runInAsyncScope) proto.runInAsyncScope = runInAsyncScopeBelow;
  };
}

// Installs the tracking; returns a function that removes every hook it installed.
// `active()` returns the current context; enter/exit must never throw (a throwing hook is fatal).
function trackAsyncCallbacks(active, enter, exit) {
  const mechanism = detectMechanism();
  const stops = [];
  const before = function before() { enter(active()); };
  const hook = createHook({ before, after: exit, trackPromises: mechanism.trackPromises });
  hook.enable();
  stops.push(() => hook.disable());
  if (mechanism.scopesInside) stops.push(trackScopes({ active, enter, exit }));
  if (mechanism.promiseHooks) {
    stops.push(promiseHooks.onBefore(before));
    stops.push(promiseHooks.onAfter(exit));
  }
  return function untrack() {
    for (const stop of stops) stop();
  };
}

module.exports = { detectMechanism, trackAsyncCallbacks };
