'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { api, IDS } = require('./helpers/addon');

test('setSpanContext with hex strings publishes and reads back lowercase', () => {
  api.setSpanContext(IDS.traceB, IDS.spanB, 0);
  assert.deepEqual(api.getSpanContext(), { traceId: IDS.traceB.toLowerCase(), spanId: IDS.spanB.toLowerCase(), traceFlags: 0 });
  api.clearSpanContext();
});

test('traceFlags defaults to 1 (sampled)', () => {
  api.setSpanContext(IDS.traceA, IDS.spanA);
  assert.equal(api.getSpanContext().traceFlags, 1);
  api.setSpanContext(IDS.traceA, IDS.spanA, undefined);
  assert.equal(api.getSpanContext().traceFlags, 1);
  api.clearSpanContext();
});

test('setSpanContext accepts Uint8Array and Buffer ids', () => {
  const trace = Uint8Array.from(Buffer.from(IDS.traceA, 'hex'));
  api.setSpanContext(trace, Buffer.from(IDS.spanA, 'hex'), 255);
  assert.deepEqual(api.getSpanContext(), { traceId: IDS.traceA, spanId: IDS.spanA, traceFlags: 255 });
  // A view into a larger buffer: only its own bytes count.
  const big = Buffer.alloc(64, 0x11);
  api.setSpanContext(big.subarray(8, 24), big.subarray(30, 38), 1);
  assert.deepEqual(api.getSpanContext(), { traceId: '11'.repeat(16), spanId: '11'.repeat(8), traceFlags: 1 });
  api.clearSpanContext();
});

test('the record bytes are exactly OTEP 4947', () => {
  api.setSpanContext(IDS.traceA, IDS.spanA, 3);
  const v = api.recordView();
  assert.equal(v.length, 640);
  assert.equal(v.buffer.byteLength % 4096, 0);
  assert.equal(Buffer.from(v.subarray(0, 16)).toString('hex'), IDS.traceA);
  assert.equal(Buffer.from(v.subarray(16, 24)).toString('hex'), IDS.spanA);
  assert.deepEqual([...v.subarray(24, 28)], [1, 3, 0, 0], 'valid=1, flags=3, attrs size=0');
  assert.equal(api.recordView(), v, 'recordView returns the same view every time');
});

test('clearSpanContext sets valid 0 and zeroes ids and flags', () => {
  api.setSpanContext(IDS.traceA, IDS.spanA, 1);
  api.clearSpanContext();
  assert.equal(api.getSpanContext(), null);
  assert.ok(api.recordView().subarray(0, 28).every((b) => b === 0));
  api.clearSpanContext(); // idempotent
  assert.equal(api.getSpanContext(), null);
});

test('JS stores through recordView are what getSpanContext (and a reader) sees', () => {
  const v = api.recordView();
  v[24] = 0;
  v.set(Buffer.from(IDS.traceB, 'hex'), 0);
  v.set(Buffer.from(IDS.spanB, 'hex'), 16);
  v[25] = 1;
  v[24] = 1;
  assert.deepEqual(api.getSpanContext(), { traceId: IDS.traceB.toLowerCase(), spanId: IDS.spanB.toLowerCase(), traceFlags: 1 });
  v[24] = 2; // any value other than 1 means "ignore"
  assert.equal(api.getSpanContext(), null);
  api.clearSpanContext();
});

test('threadInfo describes the page and the TLS placement', () => {
  const info = api.threadInfo();
  assert.equal(info.supported, true);
  assert.equal(typeof info.tid, 'number');
  assert.equal(typeof info.recordAddress, 'bigint');
  assert.equal(info.recordAddress % 4096n, 0n, 'record at the start of a page');
  assert.equal(info.pinned, true, `expected the page to be pinned: ${info.pinError}`);
  assert.equal(info.pinError, null);
  assert.equal(info.wipeOnFork, true);
  assert.equal(info.pageBacking, 'mmap');
  assert.equal(info.error, null);
  if (info.tlsModel === 'static') {
    assert.ok(Number.isInteger(info.tlsOffset) && info.tlsOffset < 0, `static offset ${info.tlsOffset}`);
  } else {
    assert.equal(info.tlsModel, 'dynamic');
    assert.equal(info.tlsOffset, null);
  }
});
