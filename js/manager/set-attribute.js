'use strict';
// setAttribute(key, value): a record attribute of the active span, set in its record only (its
// span attributes are unchanged); droppedAttributeCount(): what did not fit in this thread's
// records.

const { trace } = require('@opentelemetry/api');
const { keyIndex } = require('../process-context/process-context');
const { entryForSpan } = require('../tls/span-entries');
const { setRecordValue } = require('../tls/span-attributes');
const { threadWriter } = require('../tls/thread-writer');
const { describe } = require('../describe');

/**
 * Sets a record attribute of the active span. `value` undefined removes it. A later
 * span.setAttribute() of the key replaces it again (the latest write wins). Returns false when
 * there is no active span, or its record was built before the key was registered.
 */
function setAttribute(key, value) {
  if (typeof key !== 'string') throw new TypeError(`key: expected a string, got ${describe(key)}`);
  if (value !== undefined && typeof value !== 'string') throw new TypeError(`value: expected a string (or undefined to remove it), got ${describe(value)}`);
  const index = keyIndex(key);
  if (index === undefined) {
    throw new RangeError(`key: expected a key of the attribute key map, got ${JSON.stringify(key)} (add it with register({ attributes: [...] }) or new ThreadContextManager({ attributes: [...] }))`);
  }
  const span = trace.getActiveSpan();
  if (span === undefined) return false;
  entryForSpan(threadWriter(), span);
  return setRecordValue(span, index, value);
}

/**
 * Attribute entries dropped whole from this thread's records (no room left in 612 bytes), each
 * span and key counted once.
 */
function droppedAttributeCount() {
  return threadWriter().droppedAttributes;
}

module.exports = { setAttribute, droppedAttributeCount };
