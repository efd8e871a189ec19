'use strict';
// Binds every listener added to an EventEmitter to a context, through the given manager's
// bind() (so through its publishing with()), keeping removeListener/off working.
//
// instrumentation-http binds each request and response, so this runs twice per request: the
// patched methods are shared functions that find their state on the emitter (one object per
// emitter) instead of eight new closures per emitter.

const { EventEmitter } = require('events');

const ADD_METHODS = ['addListener', 'on', 'once', 'prependListener', 'prependOnceListener'];
const REMOVE_METHODS = ['removeListener', 'off'];
const kBinding = Symbol('otel-thread-ctx emitter binding');

class Binding {
  constructor(manager, context, emitter) {
    this.manager = manager;
    this.context = context;
    // event name -> WeakMap(listener -> bound listener), created on the first listener.
    this.boundByEvent = null;
    // `once` adds through `on`: bind only at the outermost call.
    this.adding = false;
    // The emitter's methods before patching (own or inherited).
    this.originals = Object.create(null);
    for (const name of ADD_METHODS) this.originals[name] = emitter[name];
    for (const name of REMOVE_METHODS) this.originals[name] = emitter[name];
    this.originals.removeAllListeners = emitter.removeAllListeners;
  }
}

// The method of the emitter the patched method was called on, or EventEmitter's own when it was
// called on an object we never patched (a patched method copied elsewhere).
function original(emitter, name) {
  const binding = emitter == null ? undefined : emitter[kBinding];
  return binding === undefined ? EventEmitter.prototype[name] : binding.originals[name];
}

function makeAdd(name) {
  return function addBoundListener(event, listener) {
    const binding = this == null ? undefined : this[kBinding];
    if (binding === undefined) return EventEmitter.prototype[name].call(this, event, listener);
    const add = binding.originals[name];
    if (binding.adding || typeof listener !== 'function') return add.call(this, event, listener);
    const bound = binding.manager.bind(binding.context, listener);
    if (binding.boundByEvent === null) binding.boundByEvent = new Map();
    let listeners = binding.boundByEvent.get(event);
    if (listeners === undefined) binding.boundByEvent.set(event, (listeners = new WeakMap()));
    listeners.set(listener, bound);
    binding.adding = true;
    try {
      return add.call(this, event, bound);
    } finally {
      binding.adding = false;
    }
  };
}

function makeRemove(name) {
  return function removeBoundListener(event, listener) {
    const binding = this == null ? undefined : this[kBinding];
    const bound = binding === undefined || binding.boundByEvent === null ? undefined : binding.boundByEvent.get(event)?.get(listener);
    return original(this, name).call(this, event, bound === undefined ? listener : bound);
  };
}

function removeAllBoundListeners(event) {
  const binding = this == null ? undefined : this[kBinding];
  if (binding !== undefined && binding.boundByEvent !== null) {
    if (arguments.length === 0) binding.boundByEvent = null;
    else binding.boundByEvent.delete(event);
  }
  return original(this, 'removeAllListeners').apply(this, arguments);
}

const PATCHED = Object.create(null);
for (const name of ADD_METHODS) PATCHED[name] = makeAdd(name);
for (const name of REMOVE_METHODS) PATCHED[name] = makeRemove(name);
PATCHED.removeAllListeners = removeAllBoundListeners;
const PATCHED_NAMES = Object.keys(PATCHED);

function bindEventEmitter(manager, context, emitter) {
  if (emitter[kBinding] !== undefined) return emitter;
  const binding = new Binding(manager, context, emitter);
  emitter[kBinding] = binding;
  for (const name of PATCHED_NAMES) {
    if (typeof binding.originals[name] === 'function') emitter[name] = PATCHED[name];
  }
  return emitter;
}

module.exports = { bindEventEmitter };
