'use strict';
// Record attributes of spans: the values of the registered keys (the attribute key map) that a
// span's record carries. Taken from the span's attributes when its entry is first built (once per
// span), kept current by watching the span's setAttribute/setAttributes (so unsampled,
// non-recording spans carry them too), and overridable per span with setAttribute(). A child
// span created in the same thread starts with its parent's values.
// Such an entry is allocated at the full record size and rewritten in place when a value
// changes: the context manager's caches and stacks hold entries by identity.

const { trace } = require('@opentelemetry/api');
const { encodeAttributes } = require('./attributes');
const { registeredKeys, cachedKeyIndex, keyIndex } = require('./process-context');

const CONTROL_WORD = 6;
const HEADER_BYTES = 28;

// A span's record state lives on the span under this symbol (cheaper for the GC than a WeakMap).
const STATE = Symbol('otel-thread-ctx record attributes');
let droppedAttributes = 0;

// publisher.js requires this module: resolved on first use (require() itself costs microseconds).
let publisherModule = null;
function publisher() {
  if (publisherModule === null) publisherModule = require('./publisher');
  return publisherModule;
}

// Record values are strings; other attribute values are shown as text.
function recordValue(value) {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return value.map((v) => (v === null || v === undefined ? '' : String(v))).join(',');
  return undefined;
}

function describe(value) {
  if (value === null) return 'null';
  return typeof value === 'object' ? (Array.isArray(value) ? 'an array' : 'an object') : `${typeof value} ${String(value)}`;
}

class RecordState {
  constructor(keys, setAttribute, setAttributes) {
    this.entry = null;
    // By key index: the span's own values, and values set with setAttribute() (they win).
    this.values = new Array(keys.length).fill(undefined);
    this.overrides = null;
    this.batch = false;
    this.setAttribute = setAttribute;
    this.setAttributes = setAttributes;
  }

  value(i) {
    const o = this.overrides;
    return o !== null && o[i] !== undefined ? o[i] : this.values[i];
  }
}

// attrs-data for a span: registered keys in index order.
const pairs = [];
function encodeState(state) {
  const n = Math.min(registeredKeys().length, state.values.length);
  pairs.length = 0;
  for (let i = 0; i < n; i++) {
    const v = state.value(i);
    if (v !== undefined) pairs.push([i, v]);
  }
  const { bytes, dropped } = encodeAttributes(pairs);
  droppedAttributes += dropped;
  return bytes;
}

function rewrite(state) {
  const bytes = encodeState(state);
  const entry = state.entry;
  new Uint8Array(entry.buffer, entry.byteOffset + HEADER_BYTES, bytes.length).set(bytes);
  entry[CONTROL_WORD] = ((entry[CONTROL_WORD] & 0xffff) | (bytes.length << 16)) >>> 0;
  publisher().getThreadPublisher().refresh(entry);
}

// Returns whether the value of a registered key changed.
function capture(state, key, value) {
  const i = cachedKeyIndex(key);
  if (i === undefined || i >= state.values.length) return false;
  const text = recordValue(value);
  if (state.values[i] === text) return false;
  state.values[i] = text;
  return true;
}

// Installed on watched spans (shared functions, no closure per span): the span's own method,
// then the record.
function setAttributeAndRecord(key, value) {
  const state = this[STATE];
  const result = state.setAttribute.call(this, key, value);
  if (!state.batch && this.ended !== true && capture(state, key, value)) rewrite(state);
  return result;
}

function setAttributesAndRecord(attributes) {
  const state = this[STATE];
  state.batch = true; // the SDK's setAttributes calls setAttribute per key
  let result;
  try {
    result = state.setAttributes.call(this, attributes);
  } finally {
    state.batch = false;
  }
  if (this.ended === true || attributes === null || typeof attributes !== 'object') return result;
  let changed = false;
  for (const key of Object.keys(attributes)) changed = capture(state, key, attributes[key]) || changed;
  if (changed) rewrite(state);
  return result;
}

/**
 * Builds the publisher entry of a span (once per span). Without registered keys it is the plain
 * entry; with keys, a full-size entry holding the span's attrs-data, rewritten when they change.
 * @param encodeEntry publisher.js's encodeEntry(spanContext, attrs, fullSize)
 */
function encodeSpanEntry(span, spanContext, encodeEntry) {
  const keys = registeredKeys();
  if (keys.length === 0 || span === null || typeof span !== 'object' ||
      typeof span.setAttribute !== 'function' || typeof span.setAttributes !== 'function' || Object.isFrozen(span)) {
    return encodeEntry(spanContext);
  }
  const state = new RecordState(keys, span.setAttribute, span.setAttributes);
  // A local child starts with its parent's record values (a sample in a child span keeps the
  // request's route); its own attributes win.
  const parent = parentState(span);
  if (parent !== undefined) {
    for (let i = 0; i < parent.values.length && i < keys.length; i++) state.values[i] = parent.value(i);
  }
  const attrs = span.attributes; // SDK spans; non-recording spans have none
  if (attrs !== null && typeof attrs === 'object') {
    for (let i = 0; i < keys.length; i++) {
      const text = recordValue(attrs[keys[i]]);
      if (text !== undefined) state.values[i] = text;
    }
  }
  const entry = encodeEntry(spanContext, encodeState(state), true);
  if (entry === publisher().NONE) return entry; // invalid span context
  state.entry = entry;
  span[STATE] = state;
  span.setAttribute = setAttributeAndRecord;
  span.setAttributes = setAttributesAndRecord;
  return state.entry;
}

// The parent's state: a span's entry is normally built on its first activation, while its
// parent is still the active span (checked by identity, so anything else means no parent).
function parentState(span) {
  const parentContext = span.parentSpanContext;
  if (parentContext === undefined) return undefined;
  const active = trace.getActiveSpan();
  if (active === undefined || active === span || active.spanContext() !== parentContext) return undefined;
  return active[STATE];
}

/**
 * Sets a record attribute of the active span (only in the thread-context record: the span's own
 * attributes are unchanged). `value` undefined removes it. Returns false when there is no active
 * span, or its record was built before any key was registered.
 */
function setAttribute(key, value) {
  if (typeof key !== 'string') throw new TypeError(`key: expected a string, got ${describe(key)}`);
  if (value !== undefined && typeof value !== 'string') throw new TypeError(`value: expected a string (or undefined to remove), got ${describe(value)}`);
  if (keyIndex(key) === undefined) {
    throw new RangeError(`key: ${JSON.stringify(key)} is not in the attribute key map; add it first with register({ attributes: [...] })`);
  }
  const span = trace.getActiveSpan();
  if (span === undefined) return false;
  if (span[STATE] === undefined) publisher().entryForSpan(span);
  const state = span[STATE];
  const i = cachedKeyIndex(key);
  if (state === undefined || i >= state.values.length) return false;
  if (state.overrides === null) state.overrides = new Array(state.values.length).fill(undefined);
  state.overrides[i] = value;
  rewrite(state);
  return true;
}

/**
 * Attribute entries dropped whole from this thread's records (no room left in 612 bytes), counted
 * at each encoding: a span's first activation, then each change of its values.
 */
function droppedAttributeCount() {
  return droppedAttributes;
}

module.exports = { encodeSpanEntry, setAttribute, droppedAttributeCount };
