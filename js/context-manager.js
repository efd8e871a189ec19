'use strict';
// ThreadContextManager: an @opentelemetry/api ContextManager that delegates context storage to
// another manager (AsyncLocalStorageContextManager by default) and keeps this thread's OTEP 4947
// record equal to the span of the active context: around with(), and (asyncTracking, the
// default) around every async callback, so that between callbacks the record shows none.

const { EventEmitter } = require('events');
const { NONE, entryForContext, getThreadPublisher } = require('./publisher');
const { detectMechanism, trackAsyncCallbacks } = require('./hooks');
const { bindEventEmitter } = require('./bind-emitter');

const MANAGER_METHODS = ['active', 'with', 'bind', 'enable', 'disable'];

// Per-thread state (this module is loaded once per JS thread): the record has one writer, so at
// most one enabled manager; the stack holds what was published before each entered callback.
let enabledManager = null;
const stack = [];
let depth = 0;
// Bumped by enable() and disable(): a with() that spans either must not restore its old entry.
let epoch = 0;

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

function defaultDelegate() {
  const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
  return new AsyncLocalStorageContextManager();
}

function checkOptions(options) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`options: expected an object, got ${describe(options)}`);
  }
  const { contextManager, asyncTracking } = options;
  if (asyncTracking !== undefined && typeof asyncTracking !== 'boolean') {
    throw new TypeError(`options.asyncTracking: expected a boolean, got ${describe(asyncTracking)}`);
  }
  if (contextManager !== undefined) {
    if (contextManager === null || typeof contextManager !== 'object') {
      throw new TypeError('options.contextManager: expected a ContextManager object ' +
        `(active, with, bind, enable, disable), got ${describe(contextManager)}`);
    }
    const missing = MANAGER_METHODS.filter((m) => typeof contextManager[m] !== 'function');
    if (missing.length > 0) {
      throw new TypeError(`options.contextManager: expected a ContextManager, missing method(s) ${missing.join(', ')}`);
    }
    if (contextManager instanceof ThreadContextManager) {
      throw new TypeError('options.contextManager: expected the manager to delegate to, got a ThreadContextManager');
    }
  }
}

class ThreadContextManager {
  /**
   * @param {{ contextManager?: ContextManager, asyncTracking?: boolean }} [options]
   *   contextManager: where contexts are stored (default: a new AsyncLocalStorageContextManager).
   *   asyncTracking: false publishes only around with(): never a wrong span, none after an await.
   */
  constructor(options = {}) {
    checkOptions(options);
    this._delegate = options.contextManager === undefined ? defaultDelegate() : options.contextManager;
    this._asyncTracking = options.asyncTracking !== false;
    this._enabled = false;
    this._untrack = null;
    this._publisher = null;
    if (typeof this._delegate.attach === 'function') this.attach = attach;
  }

  /** The hook mechanism used on this runtime, or 'none' without async tracking. */
  get mechanism() {
    return this._asyncTracking ? detectMechanism().name : 'none';
  }

  get enabled() {
    return this._enabled;
  }

  active() {
    return this._delegate.active();
  }

  with(context, fn, thisArg, ...args) {
    if (typeof fn !== 'function') throw new TypeError(`fn: expected a function, got ${describe(fn)}`);
    if (!this._enabled) return this._delegate.with(context, fn, thisArg, ...args);
    const publisher = this._publisher;
    const previous = publisher.current;
    const started = epoch;
    publisher.publish(entryForContext(context));
    try {
      return this._delegate.with(context, fn, thisArg, ...args);
    } finally {
      if (epoch === started) publisher.publish(previous);
    }
  }

  // Implemented here, not forwarded: the delegate's bind() would call the delegate's with().
  bind(context, target) {
    if (target instanceof EventEmitter) return bindEventEmitter(this, context, target);
    if (typeof target !== 'function') return target;
    return boundFunction(this, context, target);
  }

  enable() {
    if (this._enabled) return this;
    if (enabledManager !== null) {
      throw new Error('ThreadContextManager.enable(): another ThreadContextManager is already ' +
        'enabled on this thread (the record has one writer); disable it first');
    }
    const publisher = getThreadPublisher();
    this._delegate.enable();
    publisher.clear();
    depth = 0;
    epoch++;
    if (this._asyncTracking) {
      const delegate = this._delegate;
      this._untrack = trackAsyncCallbacks(
        function active() { return delegate.active(); },
        function enter(context) {
          stack[depth++] = publisher.current;
          publisher.publish(entryForContext(context));
        },
        function exit() {
          // A callback that started before enable() has no entry: it ends in "none".
          publisher.publish(depth > 0 ? stack[--depth] : NONE);
        },
      );
    }
    this._publisher = publisher;
    this._enabled = true;
    enabledManager = this;
    return this;
  }

  disable() {
    if (!this._enabled) return this;
    if (this._untrack !== null) this._untrack();
    this._untrack = null;
    this._enabled = false;
    enabledManager = null;
    depth = 0;
    epoch++;
    stack.length = 0;
    this._publisher.clear();
    this._delegate.disable();
    return this;
  }
}

// A function that runs `target` through manager.with(context, ...). It keeps target.length
// (Express tells error middleware by an arity of 4): wrappers declared with that many parameters
// cover the usual arities without Object.defineProperty, which costs more than the rest of bind().
function boundFunction(manager, context, target) {
  switch (target.length) {
    case 0: return function boundToContext() { return manager.with(context, target, this, ...arguments); };
    case 1: return function boundToContext(a) { return manager.with(context, target, this, ...arguments); };
    case 2: return function boundToContext(a, b) { return manager.with(context, target, this, ...arguments); };
    case 3: return function boundToContext(a, b, c) { return manager.with(context, target, this, ...arguments); };
    case 4: return function boundToContext(a, b, c, d) { return manager.with(context, target, this, ...arguments); };
    default: {
      const bound = function boundToContext() { return manager.with(context, target, this, ...arguments); };
      Object.defineProperty(bound, 'length', { value: target.length, configurable: true });
      return bound;
    }
  }
}

// attach(context) (experimental in @opentelemetry/api): switches the current execution to
// `context` until the returned token is disposed; installed when the delegate has it.
function attach(context) {
  const token = this._delegate.attach(context);
  if (!this._enabled) return token;
  const manager = this;
  manager._publisher.publish(entryForContext(context));
  let disposed = false;
  return {
    dispose() {
      if (disposed) return;
      disposed = true;
      token.dispose();
      if (manager._enabled) manager._publisher.publish(entryForContext(manager._delegate.active()));
    },
  };
}

function enabledThreadContextManager() {
  return enabledManager;
}

module.exports = { ThreadContextManager, enabledThreadContextManager };
