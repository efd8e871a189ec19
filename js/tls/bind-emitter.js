'use strict';
// Binds every listener added to an EventEmitter to a context, through the given manager's
// bind() (so through its publishing with()), keeping removeListener/off working.
//
// instrumentation-http binds each request and response, so this runs twice per request and on
// every listener added to them; bench:http's CPU profile put it at ~4 us per request when it kept
// eight closures per emitter and a WeakMap per event. Now the patched methods are shared
// functions that find their state on the emitter (one fixed-shape object), and a bound listener
// carries the original as `.listener`, the property Node's own removeListener() and listeners()
// already understand (they use it for once() wrappers): no map from listeners to bound ones.

const { EventEmitter } = require('events');

const ADD_METHODS = ['addListener', 'on', 'once', 'prependListener', 'prependOnceListener'];
const REMOVE_METHODS = ['removeListener', 'off'];
const METHODS = [...ADD_METHODS, ...REMOVE_METHODS];
const kBinding = Symbol('otel-thread-ctx emitter binding');

class Binding {
  constructor(manager, context, emitter) {
    this.manager = manager;
    this.context = context;
    // `once` adds through `on`: bind only at the outermost call.
    this.adding = false;
    // The emitter's methods before patching (own or inherited), by index in METHODS.
    this.originals = METHODS.map((name) => emitter[name]);
  }
}

function bindingOf(emitter) {
  return emitter == null ? undefined : emitter[kBinding];
}

// The method the patched one stands for: the emitter's own from before patching, or
// EventEmitter's when the patched method is called on an object we never patched.
function original(binding, index) {
  return binding === undefined ? EventEmitter.prototype[METHODS[index]] : binding.originals[index];
}

function makeAdd(index) {
  return function addBoundListener(event, listener) {
    const binding = bindingOf(this);
    const add = original(binding, index);
    if (binding === undefined || binding.adding || typeof listener !== 'function') return add.call(this, event, listener);
    const bound = binding.manager.bind(binding.context, listener);
    bound.listener = listener;
    binding.adding = true;
    try {
      return add.call(this, event, bound);
    } finally {
      binding.adding = false;
    }
  };
}

// Node's removeListener() finds a bound listener by its `.listener`. A bound once() listener is
// wrapped once more by Node (wrapper.listener = bound), which only our lookup finds.
function makeRemove(index) {
  return function removeBoundListener(event, listener) {
    const binding = bindingOf(this);
    const remove = original(binding, index);
    if (binding === undefined || typeof listener !== 'function') return remove.call(this, event, listener);
    const count = this.listenerCount(event);
    const result = remove.call(this, event, listener);
    if (count === 0 || this.listenerCount(event) !== count) return result;
    for (const raw of this.rawListeners(event)) {
      if (raw.listener !== undefined && raw.listener !== null && raw.listener.listener === listener) return remove.call(this, event, raw.listener);
    }
    return result;
  };
}

const PATCHED = METHODS.map((name, index) => (index < ADD_METHODS.length ? makeAdd(index) : makeRemove(index)));

function bindEventEmitter(manager, context, emitter) {
  if (emitter[kBinding] !== undefined) return emitter;
  const binding = new Binding(manager, context, emitter);
  emitter[kBinding] = binding;
  for (let i = 0; i < METHODS.length; i++) {
    if (typeof binding.originals[i] === 'function') emitter[METHODS[i]] = PATCHED[i];
  }
  return emitter;
}

module.exports = { bindEventEmitter };
