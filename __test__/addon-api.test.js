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

test('clearSpanContext is detach: valid 0, so readers see none', () => {
  api.setSpanContext(IDS.traceA, IDS.spanA, 1);
  const before = Buffer.from(api.recordView().subarray(0, 28));
  api.clearSpanContext();
  assert.equal(api.getSpanContext(), null);
  const after = api.recordView().subarray(0, 28);
  // "None" is the same everywhere (the context manager's none too): valid, flags and attrs size
  // zero; the ids are left as they were, and every reader ignores them.
  assert.deepEqual([...after.subarray(24, 28)], [0, 0, 0, 0], 'expected valid, flags and attrs size 0');
  assert.deepEqual([...after.subarray(0, 24)], [...before.subarray(0, 24)], 'expected the ids left in place');
  api.clearSpanContext(); // idempotent
  assert.equal(api.getSpanContext(), null);
});

test('the record view aliases the page: what getSpanContext (and a reader) sees', () => {
  api.setSpanContext(IDS.traceB, IDS.spanB, 1);
  const v = api.recordView();
  assert.equal(Buffer.from(v.subarray(0, 16)).toString('hex'), IDS.traceB.toLowerCase());
  assert.equal(Buffer.from(v.subarray(16, 24)).toString('hex'), IDS.spanB.toLowerCase());
  assert.deepEqual([...v.subarray(24, 28)], [1, 1, 0, 0]);
  api.clearSpanContext();
  assert.equal(v[24], 0);
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
  const json = JSON.parse(JSON.stringify(info));
  assert.equal(json.recordAddress, `0x${info.recordAddress.toString(16)}`, 'JSON.stringify writes the address as hex');
  assert.equal(json.tid, info.tid);
  if (info.tlsModel === 'static') {
    assert.ok(Number.isInteger(info.tlsOffset) && info.tlsOffset < 0, `static offset ${info.tlsOffset}`);
  } else {
    assert.equal(info.tlsModel, 'dynamic');
    assert.equal(info.tlsOffset, null);
  }
});
