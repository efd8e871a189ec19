'use strict';
// Prototype of a cheaper span lookup for ThreadContextManager (measured as mode g, not shipped):
// loads js/publisher.js with its entryForContext replaced, before js/context-manager.js picks
// it up. The entry of a Context is cached on the Context object under a private symbol instead
// of in the entryByContext WeakMap (2 new contexts per request here, each a WeakMap insertion
// the garbage collector must then process as an ephemeron). Non-extensible contexts fall back
// to js/publisher.js's own lookup. The span-context level is unchanged.

const path = require('node:path');
const { trace } = require('@opentelemetry/api');

const PUBLISHER = path.join(__dirname, '..', '..', '..', 'js', 'publisher.js');
const kEntry = Symbol('otel-thread-ctx entry');

function install() {
  const publisher = require(PUBLISHER);
  const { NONE, entryForSpanContext } = publisher;
  const slow = publisher.entryForContext;
  let lastContext = null;
  let lastEntry = NONE;
  function entryForContext(context) {
    if (context === lastContext) return lastEntry;
    if (context === null || typeof context !== 'object' || typeof context.getValue !== 'function') return NONE;
    let entry = context[kEntry];
    if (entry === undefined) {
      if (!Object.isExtensible(context)) return slow(context);
      const span = trace.getSpan(context);
      const spanContext = span === undefined ? undefined : span.spanContext();
      entry = spanContext == null ? NONE : entryForSpanContext(spanContext, span);
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
