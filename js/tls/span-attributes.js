'use strict';
// Record attributes of spans: the values of the registered keys (the attribute key map) that a
// span's record carries. Taken from the span's attributes when its entry is first built (once per
// span), kept current by watching the span's setAttribute/setAttributes (so unsampled,
// non-recording spans carry them too), and settable in the record only with setAttribute(). The
// latest write of a key wins, whichever way it came. A child span created in the same thread
// starts with its parent's values.
// Such an entry's attrs-data is rewritten in place when a value changes (the writer's caches and
// stacks hold entries by handle); an entry whose arena slot was reused is rebuilt from the state.

const { trace } = require('@opentelemetry/api');
const { encodeAttributes } = require('../record/attrs-data');
const { NONE, encodeEntry, attrWords } = require('./entry-encoder');
const { registeredKeys, cachedKeyIndex } = require('../process-context/process-context');
const { threadWriter } = require('./thread-writer');

// A span's record state lives on the span under this symbol (cheaper for the GC than a WeakMap).
const STATE = Symbol('otel-thread-ctx record attributes');

// Record values are strings; other attribute values are shown as text.
function recordValue(value) {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return value.map((v) => (v === null || v === undefined ? '' : String(v))).join(',');
  return undefined;
}

class RecordState {
  constructor(keyCount, setAttribute, setAttributes) {
    // The span's TLS-schema entry and nodejs-schema record (js/nodejs/frame-writer.js), once built.
    this.entry = null;
    this.frameRecord = null;
    // By key index: the value the record carries (undefined: none).
    this.values = new Array(keyCount).fill(undefined);
    // By key index: whether a drop of this key was counted already (each span and key once).
    this.dropCounted = null;
    this.batch = false;
    this.setAttribute = setAttribute;
    this.setAttributes = setAttributes;
  }
}

// attrs-data for a span: registered keys in index order.
const pairs = [];
function encodeState(state) {
  const n = Math.min(registeredKeys().length, state.values.length);
  pairs.length = 0;
  for (let i = 0; i < n; i++) {
    const v = state.values[i];
    if (v !== undefined) pairs.push([i, v]);
  }
  const { bytes, droppedKeys } = encodeAttributes(pairs);
  if (droppedKeys !== null) countDrops(state, droppedKeys);
  return bytes;
}

function countDrops(state, droppedKeys) {
  if (state.dropCounted === null) state.dropCounted = new Array(state.values.length).fill(false);
  for (const i of droppedKeys) {
    if (state.dropCounted[i]) continue;
    state.dropCounted[i] = true;
    threadWriter().droppedAttributes++;
  }
}

function rewrite(state) {
  const bytes = encodeState(state);
  // A record sized before keys were registered has no room: its attributes count as dropped.
  if (state.frameRecord !== null && !state.frameRecord.setAttrs(bytes)) threadWriter().droppedAttributes++;
  const writer = threadWriter();
  const entry = state.entry;
  if (entry === null || entry === NONE || !writer.isLive(entry)) return; // its slot was reused: rebuilt from the state when next needed
  writer.setAttrs(entry, bytes.length === 0 ? null : attrWords(bytes), bytes.length);
  writer.refresh(entry);
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
// then the record. The record part never throws into the caller.
function setAttributeAndRecord(key, value) {
  const state = this[STATE];
  const result = state.setAttribute.call(this, key, value);
  try {
    if (!state.batch && this.ended !== true && capture(state, key, value)) rewrite(state);
  } catch {
    // a value whose text conversion throws: the record keeps its previous value
  }
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
  try {
    if (this.ended === true || attributes === null || typeof attributes !== 'object') return result;
    let changed = false;
    for (const key of Object.keys(attributes)) changed = capture(state, key, attributes[key]) || changed;
    if (changed) rewrite(state);
  } catch {
    // as in setAttributeAndRecord
  }
  return result;
}

/**
 * Builds the entry of a span (once per span, and again if its slot was reused). Without
 * registered keys it is the plain entry; with keys, an entry holding the span's attrs-data,
 * rewritten when they change.
 */
function encodeSpanEntry(writer, span, spanContext) {
  if (registeredKeys().length === 0) return encodeEntry(writer, spanContext); // (keys are never removed: no state either)
  const state = spanRecordState(span);
  if (state === undefined) return encodeEntry(writer, spanContext);
  const entry = encodeEntry(writer, spanContext, encodeState(state));
  if (entry !== NONE) state.entry = entry;
  return entry;
}

/**
 * The record values of a span whose record carries attributes (keys are registered): its state,
 * made on the first call, which from then on watches the span's setAttribute/setAttributes.
 * Undefined for a span that cannot be watched. Shared by both schemas' records of the span.
 */
function spanRecordState(span) {
  const known = span[STATE];
  if (known !== undefined) return known; // the values are the state's, the methods already watched
  const keys = registeredKeys();
  if (typeof span.setAttribute !== 'function' || typeof span.setAttributes !== 'function' ||
      Object.isFrozen(span)) {
    return undefined;
  }
  const state = new RecordState(keys.length, span.setAttribute, span.setAttributes);
  // A local child starts with its parent's record values (a sample in a child span keeps the
  // request's route); its own attributes win.
  const parent = parentState(span);
  if (parent !== undefined) {
    for (let i = 0; i < parent.values.length && i < keys.length; i++) state.values[i] = parent.values[i];
  }
  const attrs = span.attributes; // SDK spans; non-recording spans have none
  if (attrs !== null && typeof attrs === 'object') {
    for (let i = 0; i < keys.length; i++) {
      const text = recordValue(attrs[keys[i]]);
      if (text !== undefined) state.values[i] = text;
    }
  }
  span[STATE] = state;
  span.setAttribute = setAttributeAndRecord;
  span.setAttributes = setAttributesAndRecord;
  return state;
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
 * Sets `key` (a registered key, by index) to `value` (a string, or undefined to remove it) in the
 * record of `span` only. Returns false when the span has no record state (its entry was built
 * before the key was registered, or it is not a span whose record can carry attributes).
 */
function setRecordValue(span, index, value) {
  const state = span[STATE];
  if (state === undefined || index >= state.values.length) return false;
  if (state.values[index] !== value) {
    state.values[index] = value;
    if (span.ended !== true) rewrite(state);
  }
  return true;
}

module.exports = { encodeSpanEntry, spanRecordState, encodeState, setRecordValue };
