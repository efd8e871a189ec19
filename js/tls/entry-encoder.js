'use strict';
// Entries: a span context encoded once into the record words it is stored as (ids, then the
// control word valid | flags << 8 | attrs size << 16, then attrs-data), in the thread writer's
// arena. Publishing an entry is then a handful of u32 stores. NONE is the entry of "no span".

const { CONTROL_WORD, ID_WORDS, MAX_ATTRS_SIZE } = require('../record/layout');
const { NONE } = require('./thread-writer');

const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX['0123456789abcdef'.charCodeAt(i)] = i;
  HEX['0123456789ABCDEF'.charCodeAt(i)] = i;
}
// The byte of two hex digits, by their char codes (c1 << 8 | c2, both below 256), or -1: one table
// load per byte instead of two, and one range check per word (~15 % fewer instructions per id;
// String#charCodeAt is most of what is left). 128 KiB per JS thread.
const BYTE = new Int16Array(1 << 16).fill(-1);
for (let c1 = 0; c1 < 128; c1++) {
  for (let c2 = 0; c2 < 128; c2++) {
    if (HEX[c1] >= 0 && HEX[c2] >= 0) BYTE[(c1 << 8) | c2] = (HEX[c1] << 4) | HEX[c2];
  }
}

// Decodes a hex id of `chars` digits into words [firstWord, firstWord + chars / 8), validating
// as it goes (one pass instead of the API's isSpanContextValid plus a decode). Returns 1 for a
// valid id, 0 for an all-zero id, -1 for anything but `chars` hex digits (W3C: both invalid).
// The words are little-endian, as the record's bytes are in id order.
function decodeHexId(words, firstWord, hex, chars) {
  if (typeof hex !== 'string' || hex.length !== chars) return -1;
  let any = 0;
  for (let w = 0, at = 0; w < chars >> 3; w++, at += 8) {
    const c0 = hex.charCodeAt(at), c1 = hex.charCodeAt(at + 1), c2 = hex.charCodeAt(at + 2), c3 = hex.charCodeAt(at + 3);
    const c4 = hex.charCodeAt(at + 4), c5 = hex.charCodeAt(at + 5), c6 = hex.charCodeAt(at + 6), c7 = hex.charCodeAt(at + 7);
    if ((c0 | c1 | c2 | c3 | c4 | c5 | c6 | c7) > 255) return -1;
    const b0 = BYTE[(c0 << 8) | c1], b1 = BYTE[(c2 << 8) | c3], b2 = BYTE[(c4 << 8) | c5], b3 = BYTE[(c6 << 8) | c7];
    if ((b0 | b1 | b2 | b3) < 0) return -1;
    const word = (b3 << 24) | (b2 << 16) | (b1 << 8) | b0;
    words[firstWord + w] = word;
    any |= word;
  }
  return any === 0 ? 0 : 1;
}

// The spans of a trace share its trace id (the SDK hands the parent's string to the child): the
// last valid trace ids decoded are kept, direct-mapped on their last three hex digits, so a trace's
// later spans copy four words instead of decoding 32 digits again (the decode was ~40 % of the
// cost of building an entry). A different string with the same digits also hits (=== compares
// contents); a slot is only ever filled from a successful decode.
const TRACE_SLOTS = 1024; // 16 KiB of words; with 50 traces in flight, ~95 % of later spans hit
const traceIds = new Array(TRACE_SLOTS).fill('');
const traceWords = new Uint32Array(TRACE_SLOTS * 4);

function decodeTraceId(words, hex) {
  if (typeof hex !== 'string' || hex.length !== 32) return -1;
  // Three random hex digits (any other character maps to -1: a valid slot all the same).
  const slot = ((HEX[hex.charCodeAt(29) & 0x7f] << 8) ^ (HEX[hex.charCodeAt(30) & 0x7f] << 4) ^ HEX[hex.charCodeAt(31) & 0x7f]) & (TRACE_SLOTS - 1);
  const at = slot * 4;
  if (traceIds[slot] === hex) {
    words[0] = traceWords[at];
    words[1] = traceWords[at + 1];
    words[2] = traceWords[at + 2];
    words[3] = traceWords[at + 3];
    return 1;
  }
  const valid = decodeHexId(words, 0, hex, 32);
  if (valid === 1) {
    traceIds[slot] = hex;
    traceWords[at] = words[0];
    traceWords[at + 1] = words[1];
    traceWords[at + 2] = words[2];
    traceWords[at + 3] = words[3];
  }
  return valid;
}

// The control word of a valid record: valid 1, the flags byte, the attrs size.
function controlWord(traceFlags, attrsBytes) {
  return (1 | ((traceFlags & 0xff) << 8) | (attrsBytes << 16)) >>> 0;
}

// The ids of the entry being encoded: decoded here first, so an invalid span context takes no slot.
const ids = new Uint32Array(ID_WORDS);

/** Decodes a span context's trace and span ids into `ids`; false when either is invalid (W3C). */
function decodeSpanContextIds(spanContext) {
  return decodeTraceId(ids, spanContext.traceId) > 0 && decodeHexId(ids, 4, spanContext.spanId, 16) > 0;
}

/**
 * A new entry in `writer`'s arena for a span context (js/tls/thread-writer.js); `attrs` (optional
 * Uint8Array of encoded attrs-data) follows the header. Invalid span contexts give NONE.
 */
function encodeEntry(writer, spanContext, attrs) {
  if (spanContext == null) return NONE;
  const attrsBytes = attrs === undefined ? 0 : attrs.length;
  if (attrsBytes > MAX_ATTRS_SIZE) {
    throw new RangeError(`attrs: expected at most ${MAX_ATTRS_SIZE} bytes, got ${attrsBytes}`);
  }
  if (!decodeSpanContextIds(spanContext)) return NONE;
  const entry = writer.allocate();
  const entries = writer.entries;
  const at = writer.wordsAt(entry);
  for (let i = 0; i < ID_WORDS; i++) entries[at + i] = ids[i];
  entries[at + CONTROL_WORD] = controlWord(spanContext.traceFlags, 0);
  if (attrsBytes > 0) writer.setAttrs(entry, attrWords(attrs), attrsBytes);
  return entry;
}

/** attrs-data bytes as the whole words the writer stores (zero-padded). */
function attrWords(attrs) {
  const words = new Uint32Array((attrs.length + 3) >>> 2);
  new Uint8Array(words.buffer).set(attrs);
  return words;
}

// decodeHexId and BYTE also for bench/span-workload/decode.js, which times the decode against
// the alternatives; controlWord for the nodejs schema's records (js/nodejs/frame-writer.js).
module.exports = { NONE, encodeEntry, attrWords, decodeHexId, BYTE, controlWord };
