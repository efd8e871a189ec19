'use strict';
// The fast path itself: the bytes it stores in this thread's page (read back through the addon
// and through recordView()), the store-skipping, and the encoding cache.

const test = require('node:test');
const assert = require('node:assert/strict');
const { trace, ROOT_CONTEXT } = require('@opentelemetry/api');
const { lib } = require('./context-helpers');
const { NONE, encodeEntry, entryForContext, getThreadPublisher, ATTRS_MAX_BYTES } = require('../js/publisher');

const SC = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1 };
const view = lib.recordView();

test('publish() writes the OTEP 4947 header byte for byte; none is valid 0', () => {
  const publisher = getThreadPublisher();
  publisher.publish(encodeEntry({ ...SC, traceFlags: 0x03 }));
  assert.deepEqual(Buffer.from(view.subarray(0, 16)).toString('hex'), SC.traceId, 'trace id bytes at 0..16');
  assert.deepEqual(Buffer.from(view.subarray(16, 24)).toString('hex'), SC.spanId, 'span id bytes at 16..24');
  assert.deepEqual([...view.subarray(24, 28)], [1, 3, 0, 0], 'valid 1, flags 3, attrs size 0');
  assert.deepEqual(lib.getSpanContext(), { ...SC, traceFlags: 3 });
  publisher.publish(NONE);
  assert.equal(view[24], 0, 'expected valid 0 for none');
  assert.equal(lib.getSpanContext(), null);
  publisher.clear();
  assert.deepEqual([...view.subarray(0, 28)], new Array(28).fill(0), 'expected clear() to zero the header');
});

test('publish() skips the stores when the entry is already published', () => {
  const publisher = getThreadPublisher();
  const entry = encodeEntry(SC);
  publisher.publish(entry);
  view[0] = 0xee; // a foreign write the publisher does not know about
  publisher.publish(entry);
  assert.equal(view[0], 0xee, 'expected no store for an unchanged entry');
  publisher.publish(NONE);
  publisher.publish(entry);
  assert.equal(view[0], 0xee, 'expected the body kept when returning to the entry whose body is in the page');
  publisher.publish(encodeEntry({ ...SC, spanId: '00000000000000aa' }));
  publisher.publish(entry);
  assert.equal(view[0], 0x0a, 'expected the body rewritten after another span');
  publisher.clear();
});

test('entries are encoded once per context and per span context', () => {
  const span = trace.wrapSpanContext(SC);
  const ctx = trace.setSpan(ROOT_CONTEXT, span);
  const entry = entryForContext(ctx);
  assert.equal(entryForContext(ctx), entry, 'expected the cached entry for the same context');
  assert.equal(entryForContext(trace.setSpan(ROOT_CONTEXT, span)), entry, 'expected the cached entry for the same span context');
  assert.equal(entryForContext(ROOT_CONTEXT), NONE);
  assert.equal(entryForContext(undefined), NONE);
  assert.equal(entryForContext('not a context'), NONE);
});

test('attrs-data bytes follow the header and set the size (for record attributes)', () => {
  const attrs = Uint8Array.from([0, 3, 0x47, 0x45, 0x54, 1, 1, 0x2f]); // key 0 "GET", key 1 "/"
  const publisher = getThreadPublisher();
  publisher.publish(encodeEntry(SC, attrs));
  assert.deepEqual([...view.subarray(24, 28)], [1, 1, attrs.length, 0]);
  assert.deepEqual([...view.subarray(28, 28 + attrs.length)], [...attrs]);
  publisher.clear();
  assert.throws(() => encodeEntry(SC, new Uint8Array(ATTRS_MAX_BYTES + 1)),
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
    [T, S.slice(0, 15) + '-'], [undefined, S], [T, null], [123, S], ['', ''],
  ];
  for (const [traceId, spanId] of cases) {
    const sc = { traceId, spanId, traceFlags: 1 };
    const entry = encodeEntry(sc);
    const label = JSON.stringify([traceId, spanId]);
    assert.equal(entry !== NONE, isSpanContextValid(sc), `${label}: encodeEntry and isSpanContextValid disagree`);
    if (entry === NONE) continue;
    const bytes = Buffer.from(entry.buffer, 0, 24).toString('hex');
    assert.equal(bytes, (traceId + spanId).toLowerCase(), `${label}: decoded id bytes`);
  }
});
