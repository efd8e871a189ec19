'use strict';
// Entries: a span context encoded once into the record words it is stored as (a Uint32Array:
// ids, then the control word valid | flags << 8 | attrs size << 16, then attrs-data). Publishing
// an entry is then a handful of u32 stores. NONE is the entry of "no span": valid 0.

const { CONTROL_WORD, HEADER_WORDS, RECORD_WORDS, MAX_ATTRS_SIZE } = require('./layout');

/** The entry published for "no span": only its control word (valid 0) is ever stored. */
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

// The control word of a valid record: valid 1, the flags byte, the attrs size.
function controlWord(traceFlags, attrsBytes) {
  return (1 | ((traceFlags & 0xff) << 8) | (attrsBytes << 16)) >>> 0;
}

/**
 * The entry of a span context; `attrs` (optional Uint8Array of encoded attrs-data) follows the
 * header. Invalid span contexts give NONE. `fullSize`: allocate the whole record, so that record
 * attributes can later be rewritten in place (caches and stacks hold entries by identity).
 */
function encodeEntry(spanContext, attrs, fullSize = false) {
  if (spanContext == null) return NONE;
  const attrsBytes = attrs === undefined ? 0 : attrs.length;
  if (attrsBytes > MAX_ATTRS_SIZE) {
    throw new RangeError(`attrs: expected at most ${MAX_ATTRS_SIZE} bytes, got ${attrsBytes}`);
  }
  const entry = new Uint32Array(fullSize ? RECORD_WORDS : HEADER_WORDS + Math.ceil(attrsBytes / 4));
  if (decodeHexId(entry, 0, spanContext.traceId, 32) <= 0 || decodeHexId(entry, 4, spanContext.spanId, 16) <= 0) {
    return NONE;
  }
  if (attrsBytes > 0) new Uint8Array(entry.buffer, HEADER_WORDS * 4).set(attrs);
  entry[CONTROL_WORD] = controlWord(spanContext.traceFlags, attrsBytes);
  return entry;
}

module.exports = { NONE, encodeEntry };
