'use strict';
// Encodes attribute values into OTEP 4947 attrs-data: [key index u8][length u8][UTF-8 bytes] ...
// Values are cut at 255 bytes on a character boundary; the attrs-data of a record holds at most
// 612 bytes (640-byte record minus its 28-byte header). An entry that does not fit is dropped
// whole (never cut to fit) and reported; the ones after it may still fit.

const { MAX_ATTRS_SIZE, MAX_KEYS, MAX_VALUE_BYTES } = require('./layout');

const MAX_KEY_INDEX = MAX_KEYS - 1;
const encoder = new TextEncoder();
// encodeInto() writes whole characters only, so a 255-byte target truncates on a boundary.
const valueScratch = new Uint8Array(MAX_VALUE_BYTES);
const attrsScratch = new Uint8Array(MAX_ATTRS_SIZE);

// The common case without a native call: a string of ASCII characters copied at `at`. Returns
// the bytes written (cut at 255), DOES_NOT_FIT, or NOT_ASCII (the caller then uses TextEncoder).
const NOT_ASCII = -1;
const DOES_NOT_FIT = -2;
function asciiInto(value, at) {
  const n = value.length < MAX_VALUE_BYTES ? value.length : MAX_VALUE_BYTES;
  for (let i = 0; i < n; i++) if (value.charCodeAt(i) > 0x7f) return NOT_ASCII;
  if (at + n > MAX_ATTRS_SIZE) return DOES_NOT_FIT;
  for (let i = 0; i < n; i++) attrsScratch[at + i] = value.charCodeAt(i);
  return n;
}

/**
 * @param {Array<[number, string]>} entries key index and value, in priority order
 * @returns {{ bytes: Uint8Array, droppedKeys: number[] | null, truncated: number }} a fresh copy
 *   of the attrs-data, the key indices of the entries dropped (null when none), and how many
 *   values were cut at 255 bytes
 */
function encodeAttributes(entries) {
  let size = 0;
  let droppedKeys = null;
  let truncated = 0;
  for (let i = 0; i < entries.length; i++) {
    const [key, value] = entries[i];
    if (!Number.isInteger(key) || key < 0 || key > MAX_KEY_INDEX) {
      throw new RangeError(`entries[${i}][0]: expected a key index 0-${MAX_KEY_INDEX}, got ${String(key)}`);
    }
    if (typeof value !== 'string') {
      throw new TypeError(`entries[${i}][1]: expected a string value, got ${value === null ? 'null' : typeof value}`);
    }
    let written = asciiInto(value, size + 2);
    if (written === NOT_ASCII) {
      const r = encoder.encodeInto(value, valueScratch);
      written = r.written;
      if (size + 2 + written > MAX_ATTRS_SIZE) {
        (droppedKeys ??= []).push(key);
        continue;
      }
      if (r.read < value.length) truncated++;
      attrsScratch.set(valueScratch.subarray(0, written), size + 2);
    } else if (written === DOES_NOT_FIT) {
      (droppedKeys ??= []).push(key); // ASCII that does not fit where it would go
      continue;
    } else if (written < value.length) {
      truncated++;
    }
    attrsScratch[size] = key;
    attrsScratch[size + 1] = written;
    size += 2 + written;
  }
  return { bytes: attrsScratch.slice(0, size), droppedKeys, truncated };
}

/** Decodes attrs-data back into [key index, value] pairs (tests, debugging). */
function decodeAttributes(bytes) {
  const out = [];
  const decoder = new TextDecoder('utf-8', { fatal: true });
  for (let at = 0; at < bytes.length;) {
    if (at + 2 > bytes.length) throw new RangeError(`attrs-data: truncated entry header at byte ${at}`);
    const len = bytes[at + 1];
    if (at + 2 + len > bytes.length) throw new RangeError(`attrs-data: entry at byte ${at} claims ${len} bytes, ${bytes.length - at - 2} left`);
    out.push([bytes[at], decoder.decode(bytes.subarray(at + 2, at + 2 + len))]);
    at += 2 + len;
  }
  return out;
}

module.exports = { encodeAttributes, decodeAttributes };
