'use strict';
// traceActive(): for apps that keep another context manager. Runs tracer.startActiveSpan and keeps
// this thread's record equal to the span for the duration of fn, including its awaits, through a
// private ThreadContextManager (its own AsyncLocalStorage, not installed globally).

const { trace, ROOT_CONTEXT } = require('@opentelemetry/api');
const { ThreadContextManager } = require('./thread-context-manager');
const { enabledThreadContextManager } = require('../tls/context-manager');
const { describe } = require('../describe');

let tracker = null;

// The private manager, enabled only while no other ThreadContextManager owns this thread's record
// (one enabled later takes the record over from it).
function publishingManager() {
  const enabled = enabledThreadContextManager();
  if (enabled !== null) return enabled === tracker ? tracker : null;
  if (tracker === null) tracker = new ThreadContextManager();
  return tracker.enable();
}

/**
 * traceActive(tracer, name, [options, [context]], fn): like tracer.startActiveSpan(name, ...).
 * When a ThreadContextManager is already enabled on this thread (e.g. through register()), it
 * publishes the span itself and this is plain startActiveSpan.
 */
function traceActive(tracer, name, ...rest) {
  if (tracer === null || typeof tracer !== 'object' || typeof tracer.startActiveSpan !== 'function') {
    throw new TypeError(`tracer: expected an @opentelemetry/api Tracer (with startActiveSpan), got ${describe(tracer)}`);
  }
  if (typeof name !== 'string') throw new TypeError(`name: expected a string, got ${describe(name)}`);
  if (rest.length < 1 || rest.length > 3) {
    throw new RangeError(`arguments: expected (tracer, name, [options, [context]], fn), got ${rest.length + 2} arguments`);
  }
  const fn = rest[rest.length - 1];
  if (typeof fn !== 'function') throw new TypeError(`fn: expected a function as the last argument, got ${describe(fn)}`);
  const manager = publishingManager();
  if (manager === null) return tracer.startActiveSpan(name, ...rest);
  const startArgs = rest.slice(0, -1);
  return tracer.startActiveSpan(name, ...startArgs, (span) =>
    manager.with(trace.setSpan(ROOT_CONTEXT, span), fn, undefined, span));
}

module.exports = { traceActive };
