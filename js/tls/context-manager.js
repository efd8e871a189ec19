'use strict';
// TlsContextManager: the manager of schema 'tls'. An @opentelemetry/api ContextManager that
// delegates context storage to another manager (AsyncLocalStorageContextManager by default) and
// keeps this thread's OTEP 4947 record equal to the span of the active context: around with(), and
// (asyncTracking, the default) around every async callback, so that between callbacks the record
// shows none. The record itself belongs to the thread's writer (js/tls/thread-writer.js); the
// enabled manager is its owner, and the newest enable() takes ownership from the previous one.
// The manager of schema 'nodejs' (js/nodejs/frame-context-manager.js) extends this class for that
// lifecycle and stores and publishes contexts its own way. Which of the two
// `new ThreadContextManager(options)` returns is chosen in js/manager/thread-context-manager.js,
// which also validates the options.

const { EventEmitter } = require('events');
const { threadWriter } = require('./thread-writer');
const { entryForContext } = require('./span-entries');
const { detectMechanism, trackAsyncCallbacks } = require('./hooks');
const { bindEventEmitter } = require('./bind-emitter');
const { prepareProcessContext, announceSchema } = require('../process-context/process-context');
const { followProviderResource } = require('../process-context/sdk-resource');
const { describe } = require('../describe');
const { checkAllocations, resolveAllocations, startAllocationSampling, allocationSamplingInfo } = require('../profiling/allocations');

function defaultDelegate() {
  const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
  return new AsyncLocalStorageContextManager();
}

class TlsContextManager {
  /** @param options checked by js/manager/thread-context-manager.js (checkOptions) */
  constructor(options) {
    this._schemaFallback = null;
    this._commitProcessContext = prepareProcessContext(options);
    this._delegate = options.contextManager === undefined ? defaultDelegate() : options.contextManager;
    this._asyncTracking = options.asyncTracking !== false;
    this._tlsSchemaVersion = options.tlsSchemaVersion ?? 'tlsdesc_v1_dev';
    this._allocations = resolveAllocations(checkAllocations(options.allocations));
    this._enabled = false;
    // Taken over by a newer manager: calls are forwarded to the thread's enabled manager, so an
    // API that still holds this one (NodeSDK cannot unregister it) keeps working.
    this._superseded = false;
    this._untrack = null;
    this._writer = null;
    if (typeof this._delegate.attach === 'function') this.attach = attach;
  }

  /** The schema this manager publishes with: 'tls' here ('nodejs' in FrameContextManager). */
  get schema() {
    return 'tls';
  }

  /** Why schema 'nodejs' was asked for and 'tls' is in effect, or null. */
  get schemaFallback() {
    return this._schemaFallback;
  }

  /** The threadlocal.schema_version announced while publishing with 'tls'. */
  get tlsSchemaVersion() {
    return this._tlsSchemaVersion;
  }

  /** The hook mechanism used on this runtime, or 'none' without async tracking. */
  get mechanism() {
    return this._asyncTracking ? detectMechanism().name : 'none';
  }

  get enabled() {
    return this._enabled;
  }

  /** This thread's allocation sampling (started by enable() when the option or environment asks). */
  get allocations() {
    return allocationSamplingInfo();
  }

  active() {
    if (this._superseded) return successor(this).active();
    return this._delegate.active();
  }

  // No rest parameter and no spread when there are no extra arguments (startActiveSpan, bound
  // functions called without any): they allocate an array and take V8's slow call path.
  with(context, fn, thisArg) {
    if (typeof fn !== 'function') throw new TypeError(`fn: expected a function, got ${describe(fn)}`);
    if (!this._enabled) {
      const next = this._superseded ? successor(this) : this._delegate;
      return arguments.length <= 3 ? next.with(context, fn, thisArg) : next.with.apply(next, arguments);
    }
    const writer = this._writer;
    const epoch = writer.epoch;
    const previous = writer.switchTo(entryForContext(writer, context));
    try {
      const delegate = this._delegate;
      return arguments.length <= 3 ? delegate.with(context, fn, thisArg) : delegate.with.apply(delegate, arguments);
    } finally {
      // An entry whose arena slot was reused inside fn (thousands of spans built there) is built
      // again from the context now current, rather than shown as none.
      writer.switchBack(writer.isLive(previous) ? previous : entryForContext(writer, this._delegate.active()), epoch);
    }
  }

  // Implemented here, not forwarded: the delegate's bind() would call the delegate's with().
  bind(context, target) {
    if (this._superseded) return successor(this).bind(context, target);
    if (target instanceof EventEmitter) return bindEventEmitter(this, context, target);
    if (typeof target !== 'function') return target;
    return boundFunction(this, context, target);
  }

  /**
   * Enables the delegate and the hooks, and takes the thread's record over: the manager enabled
   * before it on this thread, if any, is disabled and forwards its calls here from then on. Also
   * publishes the process context (the environment's until the SDK's resource is seen, or
   * options.resource) and registers options.attributes; a failure there is a warning.
   */
  enable() {
    if (this._enabled) return this;
    const writer = threadWriter();
    if (writer.owner !== null) writer.owner._supersede();
    this._delegate.enable();
    writer.reset();
    if (this._asyncTracking) {
      const delegate = this._delegate;
      this._untrack = trackAsyncCallbacks(
        function active() { return delegate.active(); },
        function enter(context) { writer.enter(entryForContext(writer, context)); },
        function exit() { writer.exit(); },
      );
    }
    writer.owner = this;
    this._writer = writer;
    this._superseded = false;
    this._enabled = true;
    this._announce(this._tlsSchemaVersion);
    return this;
  }

  /**
   * What enabling publishes, whichever the schema: its threadlocal.schema_version, the process
   * context, the SDK's resource once the provider has it, and allocation sampling if asked for.
   */
  _announce(schemaVersion) {
    announceSchema(schemaVersion);
    this._commitProcessContext();
    followProviderResource();
    startAllocationSampling(this._allocations);
  }

  /** Removes the hooks, publishes none and disables the delegate. */
  disable() {
    this._superseded = false;
    if (!this._enabled) return this;
    this._stop();
    this._writer.owner = null;
    this._writer.reset();
    this._delegate.disable();
    return this;
  }

  // A newer manager takes the record over (it resets the writer itself).
  _supersede() {
    this._stop();
    this._superseded = true;
    this._delegate.disable();
  }

  _stop() {
    if (this._untrack !== null) this._untrack();
    this._untrack = null;
    this._enabled = false;
  }
}

// Where a superseded manager's calls go: the thread's enabled manager, or its own (disabled)
// delegate when there is none.
function successor(manager) {
  const owner = threadWriter().owner;
  return owner !== null && owner !== manager ? owner : manager._delegate;
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
  if (this._superseded) {
    const next = successor(this);
    if (typeof next.attach === 'function') return next.attach(context);
  }
  const token = this._delegate.attach(context);
  if (!this._enabled) return token;
  const manager = this;
  const writer = this._writer;
  writer.switchTo(entryForContext(writer, context));
  let disposed = false;
  return {
    dispose() {
      if (disposed) return;
      disposed = true;
      token.dispose();
      if (manager._enabled) writer.switchTo(entryForContext(writer, manager._delegate.active()));
    },
  };
}

/** The ThreadContextManager enabled on this thread (the owner of its record), or null. */
function enabledThreadContextManager() {
  return threadWriter().owner;
}

module.exports = { TlsContextManager, enabledThreadContextManager, successor, attach };
