'use strict';
// Record attributes: the attrs-data encoding (limits, truncation, overflow) and, with the real
// SDK and the ThreadContextManager, the values of registered keys in this thread's record.
const test = require('node:test');
const assert = require('node:assert/strict');
const { trace, context } = require('@opentelemetry/api');
const { BasicTracerProvider, AlwaysOffSampler } = require('@opentelemetry/sdk-trace-base');
const { lib } = require('./context-helpers');
const { encodeAttributes, decodeAttributes } = require('../js/record/attrs-data');
const { setAttribute, droppedAttributeCount } = lib;

const KEYS = ['http.route', 'http.request.method', 'k2', 'k3', 'k4'];
lib.register({ attributes: KEYS });
trace.setGlobalTracerProvider(new BasicTracerProvider());
const tracer = trace.getTracer('otel-thread-ctx-attributes-test');
const unsampled = new BasicTracerProvider({ sampler: new AlwaysOffSampler() }).getTracer('unsampled');
const view = lib.recordView();

// What the record shows: [key, value] pairs decoded from its attrs-data, or null when not valid.
function recordAttrs() {
  if (view[24] !== 1) return null;
  const size = view[26] | (view[27] << 8);
  return decodeAttributes(view.subarray(28, 28 + size)).map(([k, v]) => [KEYS[k], v]);
}

// UTF-8 bytes of `s` cut at `max` bytes, backing off to a character boundary (independent of
// the encoder under test).
function truncatedUtf8(s, max = 255) {
  const b = Buffer.from(s, 'utf8');
  if (b.length <= max) return b;
  let end = max;
  while (end > 0 && (b[end] & 0xc0) === 0x80) end--;
  return b.subarray(0, end);
}

test('attrs-data layout: [key][len][UTF-8 bytes], in the given order', () => {
  const { bytes, droppedKeys, truncated } = encodeAttributes([[0, '/users/:id'], [3, 'GET'], [1, 'ü€😀'], [2, '']]);
  const expected = Buffer.concat([
    Buffer.from([0, 10]), Buffer.from('/users/:id'), Buffer.from([3, 3]), Buffer.from('GET'),
    Buffer.from([1, 9]), Buffer.from('ü€😀'), Buffer.from([2, 0]),
  ]);
  assert.deepEqual(Buffer.from(bytes), expected);
  assert.deepEqual([droppedKeys, truncated], [null, 0]);
});

test('values over 255 bytes are cut on a character boundary', () => {
  for (const ch of ['a', 'é', '€', '😀']) {
    const value = ch.repeat(300);
    const { bytes, truncated } = encodeAttributes([[0, value]]);
    const want = truncatedUtf8(value);
    assert.ok(want.length <= 255 && want.length > 251, `${ch}: test premise (${want.length})`);
    assert.equal(bytes[1], want.length, `${JSON.stringify(ch)}: expected a length byte of ${want.length}, got ${bytes[1]}`);
    assert.deepEqual(Buffer.from(bytes.subarray(2)), want, `${JSON.stringify(ch)}: bytes differ`);
    assert.equal(truncated, 1);
    new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(2)); // whole characters only
  }
});

test('612 bytes at most: entries that do not fit are dropped whole and counted, smaller later ones still fit', () => {
  const v200 = 'x'.repeat(200); // 202 bytes an entry: three fill 606
  const r = encodeAttributes([[0, v200], [1, v200], [2, v200], [3, 'sevenb'], [4, 'ab']]);
  // 606 + 8 > 612: "sevenb" is dropped whole (not cut to fit); "ab" (4 bytes) still fits.
  assert.equal(r.bytes.length, 606 + 4);
  assert.deepEqual(decodeAttributes(r.bytes), [[0, v200], [1, v200], [2, v200], [4, 'ab']]);
  assert.deepEqual(r.droppedKeys, [3]);
  // Exactly 612 fits.
  const exact = encodeAttributes([[0, v200], [1, v200], [2, 'y'.repeat(206)]]);
  assert.deepEqual([exact.bytes.length, exact.droppedKeys], [612, null]);
  const over = encodeAttributes([[0, v200], [1, v200], [2, 'y'.repeat(207)]]);
  assert.deepEqual([over.bytes.length, over.droppedKeys], [404, [2]]);
});

test('bad entries throw before anything is encoded', () => {
  assert.throws(() => encodeAttributes([[0, 'a'], [256, 'b']]), { name: 'RangeError', message: /^entries\[1\]\[0\]: expected a key index 0-255, got 256/ });
  assert.throws(() => encodeAttributes([[0, 5]]), { name: 'TypeError', message: /^entries\[0\]\[1\]: expected a string value, got number/ });
});

test("a span's registered attributes are in its record, kept current, restored after a child", () => {
  tracer.startActiveSpan('GET', { attributes: { 'http.request.method': 'GET', 'not.registered': 'x' } }, (span) => {
    assert.deepEqual(recordAttrs(), [['http.request.method', 'GET']]);
    span.setAttribute('http.route', '/users/:id');
    assert.deepEqual(recordAttrs(), [['http.route', '/users/:id'], ['http.request.method', 'GET']], 'setAttribute on the active span');
    span.setAttributes({ k3: 3, 'http.request.method': 'POST' });
    assert.deepEqual(recordAttrs(), [['http.route', '/users/:id'], ['http.request.method', 'POST'], ['k3', '3']], 'setAttributes');
    tracer.startActiveSpan('child', (child) => {
      assert.deepEqual(recordAttrs(), [['http.route', '/users/:id'], ['http.request.method', 'POST'], ['k3', '3']], 'a child starts with its parent\'s values');
      child.setAttribute('http.route', '/other');
      assert.equal(recordAttrs()[0][1], '/other');
      child.end();
    });
    assert.deepEqual(recordAttrs()[0], ['http.route', '/users/:id'], 'the parent record is back after the child');
    span.end();
  });
  assert.equal(recordAttrs(), null);
});

test('setAttribute(key, value): the active span only, record only; errors name the argument', () => {
  assert.equal(setAttribute('http.route', '/none'), false, 'no active span: nothing to set');
  const span = tracer.startSpan('s');
  context.with(trace.setSpan(context.active(), span), () => {
    assert.equal(setAttribute('http.route', '/ü/€'), true);
    assert.deepEqual(recordAttrs(), [['http.route', '/ü/€']]);
    assert.equal(span.attributes['http.route'], undefined, "the span's own attributes are unchanged");
    setAttribute('http.route', undefined);
    assert.deepEqual(recordAttrs(), []);
  });
  span.end();
  assert.throws(() => setAttribute(1, 'x'), { name: 'TypeError', message: /^key: expected a string, got number 1/ });
  assert.throws(() => setAttribute('http.route', 2), { name: 'TypeError', message: /^value: expected a string/ });
  assert.throws(() => setAttribute('nope', 'x'), { name: 'RangeError', message: /^key: expected a key of the attribute key map, got "nope"/ });
});

test('unsampled (non-recording) spans carry their route too', () => {
  unsampled.startActiveSpan('GET', (span) => {
    assert.equal(span.isRecording(), false);
    span.setAttribute('http.route', '/unsampled');
    assert.deepEqual(recordAttrs(), [['http.route', '/unsampled']]);
    span.end();
  });
});

test('an overflowing record drops whole entries and counts each span and key once', () => {
  const before = droppedAttributeCount();
  const big = Object.fromEntries(KEYS.map((k, i) => [k, String(i).repeat(200)]));
  tracer.startActiveSpan('big', { attributes: big }, (span) => {
    assert.deepEqual(recordAttrs().map(([k]) => k), KEYS.slice(0, 3), 'three 202-byte entries fit in 612 bytes');
    assert.equal(view[26] | (view[27] << 8), 606);
    assert.equal(droppedAttributeCount() - before, 2, 'expected the two entries that did not fit to be counted');
    // Every change re-encodes the record; k3 and k4 stay dropped, and are not counted again.
    span.setAttribute('http.request.method', 'M'.repeat(200));
    span.setAttributes({ k2: 'K'.repeat(200) });
    setAttribute('http.route', 'r'.repeat(200));
    assert.deepEqual(recordAttrs().map(([k]) => k), KEYS.slice(0, 3));
    assert.equal(droppedAttributeCount() - before, 2, 'expected no second count for the same drops');
    span.end();
  });
  tracer.startActiveSpan('big again', { attributes: big }, (span) => {
    assert.equal(droppedAttributeCount() - before, 4, 'another span\'s drops count');
    span.end();
  });
});

test('the latest write of a key wins: span.setAttribute after a record-only setAttribute updates the record', () => {
  tracer.startActiveSpan('latest', (span) => {
    span.setAttribute('http.route', '/from-span');
    assert.equal(setAttribute('http.route', '/record-only'), true);
    assert.deepEqual(recordAttrs(), [['http.route', '/record-only']]);
    assert.equal(span.attributes['http.route'], '/from-span', 'setAttribute() leaves the span attributes alone');
    span.setAttribute('http.route', '/from-span');
    assert.deepEqual(recordAttrs(), [['http.route', '/from-span']], 'span.setAttribute() updates the record again');
    setAttribute('http.route', '/record-only');
    span.setAttributes({ 'http.route': '/batch' });
    assert.deepEqual(recordAttrs(), [['http.route', '/batch']], 'span.setAttributes() too');
    span.end();
  });
});
