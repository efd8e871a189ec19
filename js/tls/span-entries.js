'use strict';
// Which entry a context publishes: the entry of its span, built once per span and cached on the
// Context and Span objects; "none" once the span has ended. Called from async hooks, where a
// throw would end the process: anything unexpected in a context or span means "none".

const { trace } = require('@opentelemetry/api');
const { threadWriter, NONE } = require('./thread-writer');
const { encodeSpanEntry } = require('./span-attributes');
const { noteSpanResource } = require('../process-context/sdk-resource');
const { noteSpanThread } = require('../native/thread-identity');

// Entries are cached on the objects themselves, under a private symbol: a switch to a context
// seen before costs one property load. (A WeakMap cost 2-4 us per request more in bench:http:
// every new context and span is a young key, and V8 pays an ephemeron write barrier per
// insertion and ephemeron processing in every scavenge. Object.defineProperty, to make the
// property non-enumerable, cost ~450 ns per object: a plain store it is; symbol keys stay out of
// for-in, Object.keys and JSON anyway.) Frozen or sealed objects fall back to a WeakMap, which
// is only probed once something was put in it. Extensibility is learnt from the store itself
// (this module is strict: adding a property to a non-extensible object throws): an
// Object.isExtensible() per new object is a runtime call on current V8s, ~750 instructions per
// request of the span workload.
const kEntry = Symbol('otel-thread-ctx entry');
const entryByObject = new WeakMap();
let weakMapUsed = false;

function cachedEntry(object) {
  const entry = object[kEntry];
  return entry !== undefined || !weakMapUsed ? entry : entryByObject.get(object);
}

function cacheEntry(object, entry) {
  try {
    object[kEntry] = entry;
  } catch {
    weakMapUsed = true;
    entryByObject.set(object, entry);
  }
}

/**
 * The entry of a span (built once per span, again if the arena reused its slot since; NONE for
 * anything that is not a live span, and once it has ended).
 */
function entryForSpan(writer, span) {
  if (span === undefined || span === null || typeof span !== 'object') return NONE;
  let entry = cachedEntry(span);
  if (entry === undefined || !writer.isLive(entry)) {
    entry = buildSpanEntry(writer, span);
    cacheEntry(span, entry);
  }
  return entry;
}

function buildSpanEntry(writer, span) {
  try {
    if (typeof span.spanContext !== 'function') return NONE;
    const spanContext = span.spanContext();
    if (spanContext == null || span.ended === true) return NONE;
    // SDK spans carry their provider's resource: the process context follows it (identity check).
    noteSpanResource(span.resource);
    // The span's first activation is on the thread that started it: it says which (thread.id).
    noteSpanThread(span);
    const entry = encodeSpanEntry(writer, span, spanContext);
    if (entry !== NONE) unpublishOnEnd(span);
    return entry;
  } catch {
    return NONE; // a span implementation that throws publishes nothing rather than failing a hook
  }
}

// Once a span has ended, its record shows none: code that still runs in its context afterwards (a
// timer armed during the request, such as Node's Date-header cache refresh, fires up to a second
// later) is outside the span's window, and a sample there would point at a finished span. The
// span's end() is wrapped (a shared function, the original kept on the span) to turn its entry into
// "none", rewrite the record if that entry is published, and cache none on the span (a context that
// still holds it and whose entry's slot is reused rebuilds none from that). The same wrap ends the
// span's record of the nodejs schema (js/nodejs/frame-writer.js), cached under kFrameRecord: valid
// 0 in place, which every frame and holder that reaches it then shows.
const kOriginalEnd = Symbol('otel-thread-ctx span end');
const kFrameRecord = Symbol('otel-thread-ctx frame record');

function endAndUnpublish(endTime) {
  const entry = cachedEntry(this);
  if (entry !== undefined && entry !== NONE) {
    threadWriter().endEntry(entry);
    cacheEntry(this, NONE);
  }
  const record = this[kFrameRecord];
  if (record !== undefined) record.end();
  const end = this[kOriginalEnd];
  return typeof end === 'function' ? end.call(this, endTime) : undefined;
}

function unpublishOnEnd(span) {
  const end = span.end;
  if (typeof end !== 'function' || end === endAndUnpublish) return;
  try {
    span[kOriginalEnd] = end;
  } catch {
    return; // not extensible: its entry is cached in the WeakMap, and its end() stays as it is
  }
  span.end = endAndUnpublish;
}

/** The entry of a context: its span's, or NONE. The writer remembers the last lookup. */
function entryForContext(writer, context) {
  if (context === writer.lastContext && writer.isLive(writer.lastEntry)) return writer.lastEntry;
  if (context == null) return NONE;
  // A cached entry proves it was a Context, so the full check runs on a cache miss only.
  let entry = cachedEntry(context);
  if (entry === undefined || !writer.isLive(entry)) {
    entry = buildContextEntry(writer, context);
    if (typeof context === 'object') cacheEntry(context, entry);
  }
  writer.lastContext = context;
  writer.lastEntry = entry;
  return entry;
}

function buildContextEntry(writer, context) {
  if (typeof context !== 'object' || typeof context.getValue !== 'function') return NONE;
  try {
    return entryForSpan(writer, trace.getSpan(context));
  } catch {
    return NONE; // a Context implementation whose getValue throws
  }
}

module.exports = { entryForContext, entryForSpan, kFrameRecord, unpublishOnEnd };
