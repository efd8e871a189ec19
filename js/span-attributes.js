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

const RECORD_WORDS = 640 / 4;
const CONTROL_WORD = 6;
const HEADER_BYTES = 28;

const stateBySpanContext = new WeakMap();
let droppedAttributes = 0;

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

// attrs-data for a span: registered keys in index order, explicit values over the span's own.
function encodeState(state) {
  const keys = registeredKeys();
  const entries = [];
  for (let i = 0; i < keys.length; i++) {
    const v = state.overrides.has(keys[i]) ? state.overrides.get(keys[i]) : state.values.get(keys[i]);
    if (v !== undefined) entries.push([i, v]);
  }
  const { bytes, dropped } = encodeAttributes(entries);
  droppedAttributes += dropped;
  return bytes;
}

function rewrite(state) {
  const bytes = encodeState(state);
  const entry = state.entry;
  new Uint8Array(entry.buffer, entry.byteOffset + HEADER_BYTES, bytes.length).set(bytes);
  entry[CONTROL_WORD] = ((entry[CONTROL_WORD] & 0xffff) | (bytes.length << 16)) >>> 0;
  require('./publisher').getThreadPublisher().refresh(entry);
}

// Returns whether the value of a registered key changed.
function capture(state, key, value) {
  if (cachedKeyIndex(key) === undefined) return false;
  const text = recordValue(value);
  if (state.values.get(key) === text) return false;
  if (text === undefined) state.values.delete(key);
  else state.values.set(key, text);
  return true;
}

function watch(span, state) {
  const { setAttribute, setAttributes } = span;
  if (typeof setAttribute === 'function') {
    span.setAttribute = function setAttributeAndRecord(key, value) {
      const result = setAttribute.call(this, key, value);
      if (!state.batch && span.ended !== true && capture(state, key, value)) rewrite(state);
      return result;
    };
  }
  if (typeof setAttributes === 'function') {
    span.setAttributes = function setAttributesAndRecord(attributes) {
      state.batch = true; // the SDK's setAttributes calls setAttribute per key
      let result;
      try {
        result = setAttributes.call(this, attributes);
      } finally {
        state.batch = false;
      }
      if (span.ended === true || attributes === null || typeof attributes !== 'object') return result;
      let changed = false;
      for (const key of Object.keys(attributes)) changed = capture(state, key, attributes[key]) || changed;
      if (changed) rewrite(state);
      return result;
    };
  }
}

/**
 * Builds the publisher entry of a span (once per span). Without registered keys it is the plain
 * entry; with keys, a full-size entry holding the span's attrs-data, rewritten when they change.
 * @param encodeEntry publisher.js's encodeEntry(spanContext, attrs)
 */
function encodeSpanEntry(span, spanContext, encodeEntry) {
  const keys = registeredKeys();
  if (keys.length === 0 || span === null || typeof span !== 'object') return encodeEntry(spanContext);
  const state = { entry: null, values: new Map(), overrides: new Map(), batch: false };
  // A local child starts with its parent's record values (a sample in a child span keeps the
  // request's route); its own attributes win.
  const parent = span.parentSpanContext !== undefined ? stateBySpanContext.get(span.parentSpanContext) : undefined;
  if (parent !== undefined) {
    for (const [key, text] of parent.values) state.values.set(key, text);
    for (const [key, text] of parent.overrides) state.values.set(key, text);
  }
  const attrs = span.attributes; // SDK spans; non-recording spans have none
  if (attrs !== null && typeof attrs === 'object') {
    for (const key of keys) {
      const text = recordValue(attrs[key]);
      if (text !== undefined) state.values.set(key, text);
    }
  }
  const plain = encodeEntry(spanContext, encodeState(state));
  if (plain === require('./publisher').NONE) return plain; // invalid span context
  state.entry = new Uint32Array(RECORD_WORDS);
  state.entry.set(plain);
  stateBySpanContext.set(spanContext, state);
  watch(span, state);
  return state.entry;
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
  const spanContext = span.spanContext();
  if (!stateBySpanContext.has(spanContext)) require('./publisher').entryForSpanContext(spanContext, span);
  const state = stateBySpanContext.get(spanContext);
  if (state === undefined) return false;
  if (value === undefined) state.overrides.delete(key);
  else state.overrides.set(key, value);
  rewrite(state);
  return true;
}

/** Attribute values dropped whole from this thread's records (no room left in 612 bytes). */
function droppedAttributeCount() {
  return droppedAttributes;
}

module.exports = { encodeSpanEntry, setAttribute, droppedAttributeCount };
