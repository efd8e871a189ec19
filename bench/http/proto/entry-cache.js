'use strict';
// Prototype of a cheaper span lookup for ThreadContextManager (measured as mode g, not shipped):
// loads js/publisher.js with its entryForContext replaced, before js/context-manager.js picks
// it up. The entry is cached on the Context object and on the Span object under a private
// symbol instead of in the entryByContext / entryBySpanContext WeakMaps: here 2 new contexts
// and 2 new spans per request, each WeakMap insertion of a young key paying V8's ephemeron
// write barrier and then ephemeron processing in every scavenge. Non-extensible objects fall
// back to js/publisher.js's own lookup.

const path = require('node:path');
const { trace } = require('@opentelemetry/api');

const PUBLISHER = path.join(__dirname, '..', '..', '..', 'js', 'publisher.js');
const { encodeSpanEntry } = require(path.join(PUBLISHER, '..', 'span-attributes.js'));
const kEntry = Symbol('otel-thread-ctx entry');

function install() {
  const publisher = require(PUBLISHER);
  const { NONE, encodeEntry, entryForSpanContext } = publisher;
  // The span level the same way: the entry on the Span object (built once per span).
  function entryForSpan(span) {
    if (span === undefined || span === null || typeof span !== 'object') return NONE;
    let entry = span[kEntry];
    if (entry === undefined) {
      const spanContext = span.spanContext();
      if (spanContext == null) return NONE;
      if (!Object.isExtensible(span)) return entryForSpanContext(spanContext, span);
      entry = encodeSpanEntry(span, spanContext, encodeEntry);
      span[kEntry] = entry;
    }
    return entry;
  }
  const slow = publisher.entryForContext;
  let lastContext = null;
  let lastEntry = NONE;
  function entryForContext(context) {
    if (context === lastContext) return lastEntry;
    if (context === null || typeof context !== 'object' || typeof context.getValue !== 'function') return NONE;
    let entry = context[kEntry];
    if (entry === undefined) {
      if (!Object.isExtensible(context)) return slow(context);
      entry = entryForSpan(trace.getSpan(context));
      context[kEntry] = entry;
    }
    lastContext = context;
    lastEntry = entry;
    return entry;
  }
  // context-manager.js destructures entryForContext at load: it must see the replacement.
  require.cache[PUBLISHER].exports = { ...publisher, entryForContext };
}

module.exports = { install };
