'use strict';
// The process context follows the OpenTelemetry SDK's own resource, so that the one-line wiring
// (`contextManager: new ThreadContextManager()` given to NodeSDK or provider.register()) publishes
// the service name, instance id and version the SDK has, with nothing else to call. The context
// manager never sees the tracer provider, but every SDK span carries its provider's resource:
// each new span's resource is compared by identity with the last one (once per span, when its
// entry is built) and a new one is published.
//
// Before the first span: NodeSDK.start() enables the context manager before it builds its tracer
// provider, and provider.register() may install either first; both in one synchronous call. So a
// microtask after enable() looks at the global tracer provider and adopts its resource: a profiler
// names the service from the start instead of unknown_service:node until the first request. The
// SDK keeps that resource in a field (`resource` in SDK 1.x, `_resource` in 2.x), read only when
// it looks like a Resource; a provider without one (the API's no-op, another SDK) is left alone and
// the first span's resource is adopted as before.
//
// One identity for spans and profiles: the process context always has a service.instance.id (the
// SDK's, else one the addon generated once per process), and a profiler's samples carry it as
// their resource. NodeSDK's default detectors give the SDK's resource none, so its spans could not
// be told from another process with the same pid and host name (two containers in PID namespaces
// of their own on one host, with the host's network). So the SDK's resource is given the published
// id when it has none (the one for every thread: the addon's is process-wide); one it has wins and
// is what gets published.
//
// Precedence: a resource given explicitly (register({ resource }), publishProcessContext(...),
// new ThreadContextManager({ resource })) is never replaced; the main thread's SDK resource wins
// over a worker's; a resource this thread already moved on from (an SDK that was shut down and
// replaced, whose late spans still run) is not adopted again.

const { isMainThread } = require('node:worker_threads');
const { publishedOrigin, publishResource, processContextInfo, settledAttributes } = require('./process-context');

const INSTANCE_ID = 'service.instance.id';

let current; // the resource of the spans this thread saw last
const replaced = new WeakSet();
let warned = false;

/** Called with each new span's `resource` (undefined for spans that have none). */
function noteSpanResource(resource) {
  if (resource === current || resource === undefined) return;
  adopt(resource);
}

/** Adopts the global tracer provider's resource a microtask after enable(), unless a span came first. */
function followProviderResource() {
  queueMicrotask(() => {
    if (current !== undefined) return;
    const resource = providerResource();
    if (resource !== undefined) adopt(resource);
  });
}

function providerResource() {
  try {
    let provider = require('@opentelemetry/api').trace.getTracerProvider();
    if (typeof provider.getDelegate === 'function') provider = provider.getDelegate();
    const resource = provider.resource ?? provider._resource;
    const looksLikeResource = resource !== null && typeof resource === 'object' &&
      (typeof resource.getRawAttributes === 'function' || (resource.attributes !== null && typeof resource.attributes === 'object'));
    return looksLikeResource ? resource : undefined;
  } catch {
    return undefined; // no @opentelemetry/api installed, or a provider whose getters throw
  }
}

function adopt(resource) {
  if (resource === null || typeof resource !== 'object' || replaced.has(resource)) return;
  if (current !== undefined) replaced.add(current);
  current = resource;
  // Runs inside async hooks: a failure becomes one warning, never a throw.
  try {
    const origin = publishedOrigin();
    if (origin !== 'explicit' && !(!isMainThread && origin === 'sdk')) publishResource(resource, 'sdk');
    shareInstanceId(resource);
  } catch (error) {
    if (warned) return;
    warned = true;
    process.emitWarning(`otel-thread-ctx: could not publish the SDK's resource as the process context (${error && error.message})`,
      { code: 'OTEL_THREAD_CTX_PROCESS_CONTEXT' });
  }
}

// Gives the SDK's resource the published service.instance.id when it has none.
function shareInstanceId(resource) {
  if (settledAttributes(resource)[INSTANCE_ID] !== undefined) return;
  const info = processContextInfo();
  const id = info === null ? undefined : info.serviceInstanceId;
  if (typeof id === 'string' && id !== '') addAttribute(resource, INSTANCE_ID, id);
}

// Adds an attribute to an SDK Resource in place: spans keep a reference to their provider's
// resource, so a copy would not reach them. SDK 2.x keeps [key, value] pairs (first one of a key
// wins) and memoizes `attributes`; SDK 1.x keeps a plain `attributes` object.
function addAttribute(resource, key, value) {
  if (Array.isArray(resource._rawAttributes)) {
    resource._rawAttributes.push([key, value]);
    resource._memoizedAttributes = undefined;
    return;
  }
  const attrs = resource.attributes;
  if (attrs !== null && typeof attrs === 'object' && Object.isExtensible(attrs)) attrs[key] = value;
}

module.exports = { followProviderResource, noteSpanResource };
