'use strict';
// Binds every listener added to an EventEmitter to a context, through the given manager's
// bind() (so through its publishing with()), keeping removeListener/off working.

const ADD_METHODS = ['addListener', 'on', 'once', 'prependListener', 'prependOnceListener'];
const REMOVE_METHODS = ['removeListener', 'off'];
const kBoundListeners = Symbol('otel-thread-ctx bound listeners');

function bindEventEmitter(manager, context, emitter) {
  if (emitter[kBoundListeners] !== undefined) return emitter;
  // event name -> WeakMap(listener -> bound listener)
  const boundByEvent = new Map();
  emitter[kBoundListeners] = boundByEvent;
  // `once` adds through `on`: bind only at the outermost call.
  let adding = false;

  for (const name of ADD_METHODS) {
    const original = emitter[name];
    if (typeof original !== 'function') continue;
    emitter[name] = function addBoundListener(event, listener) {
      if (adding || typeof listener !== 'function') return original.call(this, event, listener);
      const bound = manager.bind(context, listener);
      let listeners = boundByEvent.get(event);
      if (listeners === undefined) boundByEvent.set(event, (listeners = new WeakMap()));
      listeners.set(listener, bound);
      adding = true;
      try {
        return original.call(this, event, bound);
      } finally {
        adding = false;
      }
    };
  }
  for (const name of REMOVE_METHODS) {
    const original = emitter[name];
    if (typeof original !== 'function') continue;
    emitter[name] = function removeBoundListener(event, listener) {
      const bound = boundByEvent.get(event)?.get(listener);
      return original.call(this, event, bound === undefined ? listener : bound);
    };
  }
  const removeAll = emitter.removeAllListeners;
  if (typeof removeAll === 'function') {
    emitter.removeAllListeners = function removeAllBoundListeners(event) {
      if (arguments.length === 0) boundByEvent.clear();
      else boundByEvent.delete(event);
      return removeAll.apply(this, arguments);
    };
  }
  return emitter;
}

module.exports = { bindEventEmitter };
