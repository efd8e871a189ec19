'use strict';
// JSON for the objects that carry BigInts (threadInfo(), processContextInfo()): JSON.stringify
// throws on a BigInt, so they get a non-enumerable toJSON that writes addresses (keys ending in
// "Address") as hex strings ("0x7f...") and other BigInts as decimal strings. Non-enumerable:
// spreads, Object.keys and deepEqual do not see it.

function bigintsAsStrings() {
  const out = {};
  for (const [k, v] of Object.entries(this)) {
    if (typeof v !== 'bigint') out[k] = v;
    else out[k] = k.endsWith('Address') ? `0x${v.toString(16)}` : v.toString();
  }
  return out;
}

function withBigintJson(object) {
  if (object === null || object === undefined) return null;
  Object.defineProperty(object, 'toJSON', { value: bigintsAsStrings, enumerable: false, configurable: true, writable: true });
  return object;
}

module.exports = { withBigintJson };
