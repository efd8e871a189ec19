'use strict';
// Every rejected argument throws a TypeError/RangeError whose message is the package's one form
// ("<argument>: expected <what>, got <what>"), and leaves the record byte-for-byte as it was.
const test = require('node:test');
const assert = require('node:assert/strict');
const { api, IDS, snapshot } = require('./helpers/addon');

const T = IDS.traceA;
const S = IDS.spanA;
const cases = [
  // [description, args, error class, message fragment]
  ['traceId missing', [], TypeError, /^traceId: expected a 32-character hex string or a 16-byte Uint8Array, got undefined$/],
  ['traceId a number', [42, S], TypeError, /^traceId: expected .* got a number$/],
  ['traceId null', [null, S], TypeError, /^traceId: expected .* got null$/],
  ['traceId an object', [{}, S], TypeError, /^traceId: expected .* got an object$/],
  ['traceId an Array', [[...Buffer.from(T, 'hex')], S], TypeError, /^traceId: expected .* got an object$/],
  ['traceId a Uint16Array', [new Uint16Array(8), S], TypeError, /^traceId: expected .* got a typed array that is not a Uint8Array$/],
  ['traceId a bigint', [1n, S], TypeError, /^traceId: expected .* got a bigint$/],
  ['traceId too short', [T.slice(1), S], RangeError, /^traceId: expected 32 hex characters, got 31$/],
  ['traceId too long', [T + '0', S], RangeError, /^traceId: expected 32 hex characters, got 33$/],
  ['traceId far too long', [T.repeat(10), S], RangeError, /^traceId: expected 32 hex characters, got 320$/],
  ['traceId with 0x prefix', ['0x' + T.slice(2), S], RangeError, /^traceId: expected only hex digits 0-9a-fA-F, found 'x' at index 1$/],
  ['traceId with trailing junk', [T.slice(0, 31) + ' ', S], RangeError, /^traceId: expected only hex digits .* found ' ' at index 31$/],
  ['traceId with a non-Latin-1 character', [T.slice(0, 31) + '\u0130', S], RangeError, /^traceId: expected only hex digits .* index 31$/],
  ['traceId empty', ['', S], RangeError, /^traceId: expected 32 hex characters, got 0$/],
  ['traceId all zeros', ['0'.repeat(32), S], RangeError, /^traceId: expected an id that is not all zeros/],
  ['traceId bytes too short', [new Uint8Array(15).fill(1), S], RangeError, /^traceId: expected 16 bytes, got 15$/],
  ['traceId bytes all zero', [Buffer.alloc(16), S], RangeError, /^traceId: expected an id that is not all zeros/],
  ['spanId missing', [T], TypeError, /^spanId: expected a 16-character hex string or a 8-byte Uint8Array, got undefined$/],
  ['spanId too long', [T, S + 'a'], RangeError, /^spanId: expected 16 hex characters, got 17$/],
  ['spanId non-hex', [T, S.slice(0, 15) + 'g'], RangeError, /^spanId: expected only hex digits .* found 'g' at index 15$/],
  ['spanId all zeros', [T, '0000000000000000'], RangeError, /^spanId: expected an id that is not all zeros/],
  ['spanId bytes too long', [T, new Uint8Array(9).fill(1)], RangeError, /^spanId: expected 8 bytes, got 9$/],
  ['traceFlags too big', [T, S, 256], RangeError, /^traceFlags: expected an integer from 0 to 255, got 256$/],
  ['traceFlags negative', [T, S, -1], RangeError, /^traceFlags: expected an integer from 0 to 255, got -1$/],
  ['traceFlags fractional', [T, S, 1.5], RangeError, /^traceFlags: expected an integer from 0 to 255, got 1.5$/],
  ['traceFlags NaN', [T, S, NaN], RangeError, /^traceFlags: expected an integer from 0 to 255, got NaN$/],
  ['traceFlags a string', [T, S, '1'], TypeError, /^traceFlags: expected a number .* got a string$/],
  ['traceFlags null', [T, S, null], TypeError, /^traceFlags: expected a number .* got null$/],
  ['extra argument', [T, S, 1, 'junk'], TypeError, /^arguments: expected at most 3 \(traceId, spanId, traceFlags\), got 4$/],
];

for (const [name, args, ErrorClass, message] of cases) {
  test(`bad input: ${name}`, () => {
    // A valid context is in place; the failed call must not disturb a single byte of it.
    api.setSpanContext(IDS.traceB, IDS.spanB, 1);
    const before = snapshot(api);
    assert.throws(() => api.setSpanContext(...args), (err) => {
      assert.ok(err instanceof ErrorClass, `expected ${ErrorClass.name}, got ${err && err.name}: ${err && err.message}`);
      assert.match(err.message, message);
      assert.ok(['ERR_INVALID_ARG_TYPE', 'ERR_INVALID_ARG_VALUE', 'ERR_OUT_OF_RANGE'].includes(err.code), `code ${err.code}`);
      return true;
    });
    assert.equal(snapshot(api), before, 'the record changed after a rejected call');
    api.clearSpanContext();
  });
}
