'use strict';
// The fast path: writes this thread's OTEP 4947 record through a typed-array view of the page.
// A span context is encoded once into an "entry" (the record's words as they must be stored);
// a switch is then a handful of u32 stores, skipped when the entry is already published.

const { trace } = require('@opentelemetry/api');
const { encodeSpanEntry } = require('./span-attributes');

// Record words (u32, little endian): 0-3 trace id, 4-5 span id,
// 6 = valid | flags << 8 | attrs size << 16 (the "last store"), 7.. attrs-data.
const ID_WORDS = 6;
const CONTROL_WORD = 6;
const HEADER_WORDS = 7;
const RECORD_BYTES = 640;
const ATTRS_MAX_BYTES = RECORD_BYTES - HEADER_WORDS * 4;

// The entry published for "no span": valid 0, everything zero.
const NONE = new Uint32Array(HEADER_WORDS);

const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX['0123456789abcdef'.charCodeAt(i)] = i;
  HEX['0123456789ABCDEF'.charCodeAt(i)] = i;
}

// Decodes a hex id of `chars` digits into entry words [firstWord, firstWord + chars / 8), validating
// as it goes (one pass instead of the API's isSpanContextValid plus a decode). Returns 1 for a
// valid id, 0 for an all-zero id, -1 for anything but `chars` hex digits (W3C: both invalid).
function decodeHexId(entry, firstWord, hex, chars) {
  if (typeof hex !== 'string' || hex.length !== chars) return -1;
  let any = 0;
  for (let w = 0; w < chars >> 3; w++) {
    let word = 0;
    for (let b = 3; b >= 0; b--) {
      const at = w * 8 + b * 2;
      const c1 = hex.charCodeAt(at);
      const c2 = hex.charCodeAt(at + 1);
      if ((c1 | c2) > 127) return -1;
      const hi = HEX[c1];
      const lo = HEX[c2];
      if ((hi | lo) < 0) return -1;
      word = (word << 8) | (hi << 4) | lo;
    }
    entry[firstWord + w] = word;
    any |= word;
  }
  return any === 0 ? 0 : 1;
}

// Builds the entry of a span context; `attrs` (optional Uint8Array of encoded attrs-data,
// [key u8][len u8][bytes]...) is appended after the header. Invalid span contexts give NONE.
// `fullSize`: allocate the whole record, so record attributes can be rewritten in place.
function encodeEntry(spanContext, attrs, fullSize = false) {
  if (spanContext == null) return NONE;
  const attrsBytes = attrs === undefined ? 0 : attrs.length;
  if (attrsBytes > ATTRS_MAX_BYTES) {
    throw new RangeError(`attrs: expected at most ${ATTRS_MAX_BYTES} bytes, got ${attrsBytes}`);
  }
  const entry = new Uint32Array(fullSize ? RECORD_BYTES / 4 : HEADER_WORDS + Math.ceil(attrsBytes / 4));
  if (decodeHexId(entry, 0, spanContext.traceId, 32) <= 0 || decodeHexId(entry, 4, spanContext.spanId, 16) <= 0) {
    return NONE;
  }
  if (attrsBytes > 0) new Uint8Array(entry.buffer, HEADER_WORDS * 4).set(attrs);
  entry[CONTROL_WORD] = (1 | ((spanContext.traceFlags & 0xff) << 8) | (attrsBytes << 16)) >>> 0;
  return entry;
}

// Entries are cached on the Context and Span objects themselves, under a private symbol: a
// switch to a context seen before costs one property load. (A WeakMap cost 2-4 us per request
// more in bench:http: every new context and span is a young key, and V8 pays an ephemeron
// write barrier per insertion and ephemeron processing in every scavenge. Object.defineProperty,
// to make the property non-enumerable, cost ~450 ns per object: a plain store it is; symbol keys
// stay out of for-in, Object.keys and JSON anyway.) Frozen or sealed objects, which cannot take
// the property, fall back to a WeakMap.
const kEntry = Symbol('otel-thread-ctx entry');
const entryByObject = new WeakMap();

function cachedEntry(object) {
  const entry = object[kEntry];
  return entry !== undefined ? entry : entryByObject.get(object);
}

function cacheEntry(object, entry) {
  if (Object.isExtensible(object)) {
    object[kEntry] = entry;
  } else {
    entryByObject.set(object, entry);
  }
}

// The entry of a span (built once per span). With record attribute keys registered, it also
// carries the span's values for them (js/span-attributes.js).
function entryForSpan(span) {
  if (span === undefined || span === null || typeof span !== 'object' || typeof span.spanContext !== 'function') {
    return NONE;
  }
  let entry = cachedEntry(span);
  if (entry === undefined) {
    const spanContext = span.spanContext();
    entry = spanContext == null || span.ended === true ? NONE : encodeSpanEntry(span, spanContext, encodeEntry);
    cacheEntry(span, entry);
    if (entry !== NONE) unpublishOnEnd(span);
  }
  return entry;
}

// Once a span has ended, its record shows none: code that still runs in its context afterwards
// (a timer armed during the request, such as Node's Date-header cache refresh, fires up to a
// second later) is outside the span's window, and a sample there would point at a finished span.
// The span's end() is wrapped (a shared function, the original kept on the span) to turn its
// entry into "none" and rewrite the record if that entry is published.
const kOriginalEnd = Symbol('otel-thread-ctx span end');

function endAndUnpublish(endTime) {
  const entry = cachedEntry(this);
  if (entry !== undefined && entry !== NONE && entry[CONTROL_WORD] !== 0) {
    entry[CONTROL_WORD] = 0;
    if (threadPublisher !== null) threadPublisher.refresh(entry);
  }
  const end = this[kOriginalEnd];
  return typeof end === 'function' ? end.call(this, endTime) : undefined;
}

function unpublishOnEnd(span) {
  if (typeof span.end !== 'function' || span.end === endAndUnpublish || !Object.isExtensible(span)) return;
  span[kOriginalEnd] = span.end;
  span.end = endAndUnpublish;
}

// The last lookup, checked first: consecutive switches often enter the same context.
let lastContext = null;
let lastEntry = NONE;

function entryForContext(context) {
  if (context === lastContext) return lastEntry;
  // Called from async hooks, where a throw is fatal: anything but a Context means no span. A
  // cached entry proves it was a Context, so the full check runs on a cache miss only.
  if (context == null) return NONE;
  let entry = cachedEntry(context);
  if (entry === undefined) {
    if (typeof context !== 'object' || typeof context.getValue !== 'function') return NONE;
    entry = entryForSpan(trace.getSpan(context));
    cacheEntry(context, entry);
  }
  lastContext = context;
  lastEntry = entry;
  return entry;
}

class Publisher {
  constructor(view) {
    if (!(view instanceof Uint8Array) || view.byteLength < RECORD_BYTES || view.byteOffset % 4 !== 0) {
      throw new TypeError('view: expected the Uint8Array of the record from recordView() ' +
        `(${RECORD_BYTES} bytes, 4-byte aligned)`);
    }
    this._words = new Uint32Array(view.buffer, view.byteOffset, RECORD_BYTES / 4);
    this.current = NONE;
    this._body = NONE;
    this.clear();
  }

  // Order matters for a reader that interrupts us: valid 0 first, the control word last.
  // "None" is only valid 0 (OTEP 4947's detach); the ids stay, so returning to the span whose
  // body is still in the page (await loops alternate span / none) is a single store.
  publish(entry) {
    if (entry === this.current) return;
    const words = this._words;
    words[CONTROL_WORD] = 0;
    this.current = entry;
    if (entry === NONE) return;
    if (entry !== this._body) {
      for (let i = 0; i < ID_WORDS; i++) words[i] = entry[i];
      // Up to the attrs size: an entry with record attributes is allocated at full record size.
      const end = HEADER_WORDS + (((entry[CONTROL_WORD] >>> 16) + 3) >>> 2);
      for (let i = HEADER_WORDS; i < end; i++) words[i] = entry[i];
      this._body = entry;
    }
    words[CONTROL_WORD] = entry[CONTROL_WORD];
  }

  // `entry` was rewritten in place (its record attributes changed): store it again if it is
  // published, and make sure it is rewritten in full the next time it is.
  refresh(entry) {
    if (entry === this._body) this._body = NONE;
    if (entry !== this.current) return;
    this.current = NONE;
    this.publish(entry);
  }

  // Unconditional clear, ids zeroed too (also when someone else wrote the record behind our back).
  clear() {
    const words = this._words;
    words[CONTROL_WORD] = 0;
    for (let i = 0; i < ID_WORDS; i++) words[i] = 0;
    this.current = NONE;
    this._body = NONE;
  }
}

// One publisher per JS thread: the module is loaded once per thread, and the view must come
// from the thread that writes.
let threadPublisher = null;
function getThreadPublisher() {
  if (threadPublisher === null) threadPublisher = new Publisher(threadRecordView());
  return threadPublisher;
}

// A thread without a record (the addon refused it) still gets working context management, on a
// private buffer nobody reads, and a warning that says why; OTEL_THREAD_CTX_REQUIRE_NATIVE=1 throws.
function threadRecordView() {
  try {
    return require('./native').recordView();
  } catch (error) {
    if (process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE === '1') throw error;
    process.emitWarning(`otel-thread-ctx: no record for this thread (${error.message}); ` +
      'span contexts are not published here', { code: 'OTEL_THREAD_CTX_NO_RECORD' });
    return new Uint8Array(RECORD_BYTES);
  }
}

module.exports = {
  NONE,
  Publisher,
  encodeEntry,
  entryForContext,
  entryForSpan,
  getThreadPublisher,
  ATTRS_MAX_BYTES,
};
