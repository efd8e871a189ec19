'use strict';
// The thread's writer, the record's one owner: the bytes it stores in the page (read back through
// the addon and through recordView()), the store-skipping, direct writes, and the entry cache.

const test = require('node:test');
const assert = require('node:assert/strict');
const { trace, ROOT_CONTEXT } = require('@opentelemetry/api');
const { lib } = require('./context-helpers');
const { NONE, encodeEntry } = require('../js/tls/entry-encoder');

// The bytes of an entry's first `n` header bytes, as its arena slot holds them.
function entryBytes(entry, n) {
  const writer = threadWriter();
  return Buffer.from(writer.entries.buffer, writer.wordsAt(entry) * 4, n).toString('hex');
}
const { entryForContext } = require('../js/tls/span-entries');
const { threadWriter } = require('../js/tls/thread-writer');
const { MAX_ATTRS_SIZE } = require('../js/record/layout');

const SC = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1 };
const view = lib.recordView();

test('publish() writes the OTEP 4947 header byte for byte; none zeroes valid, flags and attrs size', () => {
  const writer = threadWriter();
  writer.publish(encodeEntry(threadWriter(), { ...SC, traceFlags: 0x03 }));
  assert.deepEqual(Buffer.from(view.subarray(0, 16)).toString('hex'), SC.traceId, 'trace id bytes at 0..16');
  assert.deepEqual(Buffer.from(view.subarray(16, 24)).toString('hex'), SC.spanId, 'span id bytes at 16..24');
  assert.deepEqual([...view.subarray(24, 28)], [1, 3, 0, 0], 'valid 1, flags 3, attrs size 0');
  assert.deepEqual(lib.getSpanContext(), { ...SC, traceFlags: 3 });
  writer.publish(NONE);
  assert.deepEqual([...view.subarray(24, 28)], [0, 0, 0, 0], 'expected valid, flags and attrs size 0 for none');
  assert.deepEqual(Buffer.from(view.subarray(0, 24)).toString('hex'), SC.traceId + SC.spanId, 'expected the ids left in place');
  assert.equal(lib.getSpanContext(), null);
  // clearSpanContext() is the same detach, stored unconditionally.
  writer.publish(encodeEntry(threadWriter(), SC));
  lib.clearSpanContext();
  assert.deepEqual([...view.subarray(24, 28)], [0, 0, 0, 0], 'expected clearSpanContext() to store the same none');
  assert.equal(writer.current, NONE);
});

test('a direct setSpanContext() is known to the writer: the next publish rewrites the record in full', () => {
  const writer = threadWriter();
  const entry = encodeEntry(threadWriter(), SC);
  writer.publish(entry);
  writer.publish(NONE);
  lib.setSpanContext('4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7', 0);
  assert.equal(lib.getSpanContext().spanId, '00f067aa0ba902b7');
  writer.publish(entry);
  assert.deepEqual(lib.getSpanContext(), SC, 'the body of the entry must be stored again, not assumed in the page');
  lib.clearSpanContext();
});

test('one writer per thread, even for a second copy of the module', () => {
  const path = require.resolve('../js/tls/thread-writer');
  const cached = require.cache[path];
  delete require.cache[path];
  try {
    const copy = require('../js/tls/thread-writer');
    assert.notEqual(copy.threadWriter, threadWriter, 'premise: a second copy of the module');
    assert.equal(copy.threadWriter(), threadWriter(), 'expected the same writer for the same record');
  } finally {
    require.cache[path] = cached;
  }
});

test('publish() skips the stores when the entry is already published', () => {
  const writer = threadWriter();
  const entry = encodeEntry(threadWriter(), SC);
  writer.publish(entry);
  view[0] = 0xee; // a foreign write the writer does not know about
  writer.publish(entry);
  assert.equal(view[0], 0xee, 'expected no store for an unchanged entry');
  writer.publish(NONE);
  writer.publish(entry);
  assert.equal(view[0], 0xee, 'expected the body kept when returning to the entry whose body is in the page');
  writer.publish(encodeEntry(threadWriter(), { ...SC, spanId: '00000000000000aa' }));
  writer.publish(entry);
  assert.equal(view[0], 0x0a, 'expected the body rewritten after another span');
  lib.clearSpanContext();
});

test('entries are encoded once per context and per span context', () => {
  const span = trace.wrapSpanContext(SC);
  const ctx = trace.setSpan(ROOT_CONTEXT, span);
  const writer = threadWriter();
  const entry = entryForContext(writer, ctx);
  assert.equal(entryForContext(writer, ctx), entry, 'expected the cached entry for the same context');
  assert.equal(entryForContext(writer, trace.setSpan(ROOT_CONTEXT, span)), entry, 'expected the cached entry for the same span context');
  assert.equal(entryForContext(writer, ROOT_CONTEXT), NONE);
  assert.equal(entryForContext(writer, undefined), NONE);
  assert.equal(entryForContext(writer, 'not a context'), NONE);
  const throwing = { getValue() { throw new Error('a broken Context'); } };
  assert.equal(entryForContext(writer, throwing), NONE, 'a Context that throws publishes none instead of throwing into a hook');
});

test('attrs-data bytes follow the header and set the size (for record attributes)', () => {
  const attrs = Uint8Array.from([0, 3, 0x47, 0x45, 0x54, 1, 1, 0x2f]); // key 0 "GET", key 1 "/"
  const writer = threadWriter();
  writer.publish(encodeEntry(threadWriter(), SC, attrs));
  assert.deepEqual([...view.subarray(24, 28)], [1, 1, attrs.length, 0]);
  assert.deepEqual([...view.subarray(28, 28 + attrs.length)], [...attrs]);
  lib.clearSpanContext();
  assert.throws(() => encodeEntry(threadWriter(), SC, new Uint8Array(MAX_ATTRS_SIZE + 1)),
    { name: 'RangeError', message: /^attrs: expected at most 612 bytes, got 613/ });
});

test('encodeEntry accepts exactly the span contexts the API calls valid, and decodes them', () => {
  const { isSpanContextValid } = require('@opentelemetry/api');
  const T = SC.traceId;
  const S = SC.spanId;
  const cases = [
    [T, S], [T.toUpperCase(), S.toUpperCase()], ['0'.repeat(32), S], [T, '0'.repeat(16)],
    ['0'.repeat(31) + '1', '0'.repeat(15) + '1'], [T.slice(1), S], [T + '0', S], [T, S.slice(1)],
    [T.slice(0, 31) + 'g', S], [T, S.slice(0, 15) + 'G'], [T.slice(0, 31) + '\u0130', S],
    [T.slice(0, 31) + '\u0661', S], [T, S.slice(0, 15) + '\uff10'], [T.slice(0, 31) + ' ', S],
    [T, S.slice(0, 15) + '-'], [T, '\u00e9' + S.slice(1)], [T.slice(0, 30) + '\u00ff' + T[31], S],
    ['\u0100' + T.slice(1), S], [undefined, S], [T, null], [123, S], ['', ''],
  ];
  for (const [traceId, spanId] of cases) {
    const sc = { traceId, spanId, traceFlags: 1 };
    const entry = encodeEntry(threadWriter(), sc);
    const label = JSON.stringify([traceId, spanId]);
    assert.equal(entry !== NONE, isSpanContextValid(sc), `${label}: encodeEntry and isSpanContextValid disagree`);
    if (entry === NONE) continue;
    const bytes = entryBytes(entry, 24);
    assert.equal(bytes, (traceId + spanId).toLowerCase(), `${label}: decoded id bytes`);
  }
});

test('broken spans and attribute values never throw out of the package (hooks and patched methods)', async () => {
  const { ThreadContextManager } = lib;
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  lib.registerAttributeKeys(['http.route']);
  const manager = new ThreadContextManager().enable();
  try {
    const throwingSpan = { spanContext() { throw new Error('broken span'); }, end() {} };
    await manager.with(trace.setSpan(ROOT_CONTEXT, throwingSpan), async () => {
      assert.equal(lib.getSpanContext(), null, 'a span whose spanContext() throws publishes none');
      await null; // the hooks run with it too
      assert.equal(lib.getSpanContext(), null);
    });
    const span = new BasicTracerProvider().getTracer('broken').startSpan('s');
    manager.with(trace.setSpan(ROOT_CONTEXT, span), () => {
      const hostile = [{ toString() { throw new Error('hostile toString'); } }];
      // The SDK keeps or rejects the value as it would anyway; the record part never throws.
      assert.doesNotThrow(() => span.setAttribute('http.route', hostile));
      assert.doesNotThrow(() => span.setAttributes({ 'http.route': hostile }));
      assert.equal(lib.getSpanContext().spanId, span.spanContext().spanId, 'the span stays published');
    });
    span.end();
  } finally {
    manager.disable();
  }
});

test('trace ids decoded once are reused for the same digits only (cache slots shared by other ids)', () => {
  const hexOf = (entry) => entryBytes(entry, 16);
  // Same last three digits (the same cache slot), different trace ids, alternately.
  const ids = ['0af7651916cd43dd8448eb211c80319c', 'ffffffffffffffffffffffffffff319c', '1000000000000000000000000000019c'];
  for (let round = 0; round < 3; round++) {
    for (const traceId of ids) {
      // A fresh string with the same digits (not the cached object) decodes to the same bytes.
      const copy = (traceId + ' ').slice(0, 32);
      assert.equal(hexOf(encodeEntry(threadWriter(), { ...SC, traceId })), traceId);
      assert.equal(hexOf(encodeEntry(threadWriter(), { ...SC, traceId: copy })), traceId);
    }
  }
  // Uppercase digits decode as the same bytes; invalid ids never enter the cache.
  assert.equal(hexOf(encodeEntry(threadWriter(), { ...SC, traceId: ids[0].toUpperCase() })), ids[0]);
  for (let i = 0; i < 2; i++) {
    assert.equal(encodeEntry(threadWriter(), { ...SC, traceId: '0'.repeat(32) }), NONE, 'all-zero trace id: none');
    assert.equal(encodeEntry(threadWriter(), { ...SC, traceId: '0af7651916cd43dd8448eb211c8031\u0100c' }), NONE, 'non-hex digit: none');
    assert.equal(encodeEntry(threadWriter(), { ...SC, traceId: 'x' + ids[0].slice(1) }), NONE, 'non-hex digit in the same slot: none');
  }
  assert.equal(hexOf(encodeEntry(threadWriter(), { ...SC, traceId: ids[0] })), ids[0], 'still decoded right after the invalid ones');
});
