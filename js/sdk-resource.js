'use strict';
// The process context follows the OpenTelemetry SDK's own resource, so that the one-line wiring
// (`contextManager: new ThreadContextManager()` given to NodeSDK or provider.register()) publishes
// the service name, instance id and version the SDK has, with nothing else to call. The context
// manager never sees the tracer provider, but every SDK span carries its provider's resource:
// each new span's resource is compared by identity with the last one (once per span, when its
// entry is built) and a new one is published.
//
// Precedence: a resource given explicitly (register({ resource }), publishProcessContext(...),
// new ThreadContextManager({ resource })) is never replaced; the main thread's SDK resource wins
// over a worker's; a resource this thread already moved on from (an SDK that was shut down and
// replaced, whose late spans still run) is not adopted again.

const { isMainThread } = require('node:worker_threads');
const { publishedOrigin, publishResource } = require('./process-context');

let current; // the resource of the spans this thread saw last
const replaced = new WeakSet();
let warned = false;

/** Called with each new span's `resource` (undefined for spans that have none). */
function noteSpanResource(resource) {
  if (resource === current || resource === undefined) return;
  adopt(resource);
}

function adopt(resource) {
  if (resource === null || typeof resource !== 'object' || replaced.has(resource)) return;
  if (current !== undefined) replaced.add(current);
  current = resource;
  // Runs inside async hooks: a failure becomes one warning, never a throw.
  try {
    const origin = publishedOrigin();
    if (origin === 'explicit' || (!isMainThread && origin === 'sdk')) return;
    publishResource(resource, 'sdk');
  } catch (error) {
    if (warned) return;
    warned = true;
    process.emitWarning(`otel-thread-ctx: could not publish the SDK's resource as the process context (${error && error.message})`,
      { code: 'OTEL_THREAD_CTX_PROCESS_CONTEXT' });
  }
}

module.exports = { noteSpanResource };
