'use strict';
// The manager of schema 'nodejs' (what `new ThreadContextManager({ schema: 'nodejs' })` returns
// where the schema is available, js/nodejs/availability.js). Contexts are stored in the thread's
// AsyncLocalStorage as holders (js/nodejs/frame-writer.js): V8's AsyncContextFrame carries them
// across every await and callback, and readers find the span's record from the frame, so there are
// no async hooks at all. active() returns exactly the context given to with(). The lifecycle is the
// 'tls' manager's, inherited: the newest enabled manager on a thread owns it (whatever either's
// schema), a superseded one forwards its calls there, and a manager that is not enabled stores
// contexts in its own AsyncLocalStorageContextManager and publishes nothing.

const { threadWriter } = require('../tls/thread-writer');
const { TlsContextManager, successor, attach: delegateAttach } = require('../tls/context-manager');
const { describe } = require('../describe');

class FrameContextManager extends TlsContextManager {
  /** @param frames this thread's checked frame writer (js/nodejs/availability.js) */
  constructor(options, frames) {
    super(options);
    this._frames = frames;
    if (this.attach !== undefined) this.attach = frameAttach;
  }

  get schema() {
    return 'nodejs';
  }

  /** No hooks: V8 switches the frame. */
  get mechanism() {
    return 'AsyncContextFrame';
  }

  active() {
    if (this._enabled) return this._frames.active();
    return this._superseded ? successor(this).active() : this._delegate.active();
  }

  // AsyncLocalStorageContextManager#with, on the thread's storage with the context's holder.
  with(context, fn, thisArg, ...args) {
    if (typeof fn !== 'function') throw new TypeError(`fn: expected a function, got ${describe(fn)}`);
    if (!this._enabled) {
      const next = this._superseded ? successor(this) : this._delegate;
      return next.with(context, fn, thisArg, ...args);
    }
    const frames = this._frames;
    const callback = thisArg === undefined || thisArg === null ? fn : fn.bind(thisArg);
    return frames.als.run(frames.holderFor(context), callback, ...args);
  }

  /**
   * Takes the thread over (the manager enabled before, of either schema, forwards here from
   * now on), publishes otel_thread_ctx_nodejs_v1 for this thread, announces nodejs_v1_dev in the
   * process context and publishes it (a failure there is a warning).
   */
  enable() {
    if (this._enabled) return this;
    const writer = threadWriter();
    if (writer.owner !== null) writer.owner._supersede();
    writer.reset(); // the TLS record shows none while this schema publishes
    this._frames.publish();
    writer.owner = this;
    this._writer = writer;
    this._superseded = false;
    this._enabled = true;
    this._announce('nodejs_v1_dev');
    return this;
  }

  /**
   * Publishes none: the thread's struct is unpublished (readers find nothing here, also in
   * continuations that still hold a holder), and the running frame's context is cleared (as
   * AsyncLocalStorageContextManager#disable does).
   */
  disable() {
    this._superseded = false;
    if (!this._enabled) return this;
    this._enabled = false;
    this._writer.owner = null;
    this._frames.unpublish();
    this._frames.als.disable();
    return this;
  }

  // A newer manager owns the thread: a tls one publishes through its own record, and a nodejs one
  // publishes the struct again.
  _supersede() {
    this._enabled = false;
    this._superseded = true;
    this._frames.unpublish();
  }
}

// attach(context): the running execution switches to `context` until the token is disposed
// (AsyncLocalStorage#withScope where Node has it, else enterWith and back).
function frameAttach(context) {
  if (!this._enabled) return delegateAttach.call(this, context);
  const als = this._frames.als;
  const holder = this._frames.holderFor(context);
  if (typeof als.withScope === 'function') return als.withScope(holder);
  const previous = als.getStore();
  als.enterWith(holder);
  let disposed = false;
  return {
    dispose() {
      if (disposed) return;
      disposed = true;
      als.enterWith(previous);
    },
  };
}

module.exports = { FrameContextManager };
