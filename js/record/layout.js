'use strict';
// The OTEP 4947 Thread-Local Context Record, defined once for the JS layer: every other module
// imports its sizes and offsets from here. (The addon has its own single definition, src/record.rs.)
// Host endian; little endian on every supported platform.

const HEADER_SIZE = 28;
const RECORD_SIZE = 640; // the OpenTelemetry eBPF profiler reads at most this much

/** Byte offsets, as the package exports them (`require('otel-thread-ctx').layout`). */
const layout = Object.freeze({
  TRACE_ID_OFFSET: 0, // 16 bytes
  SPAN_ID_OFFSET: 16, // 8 bytes
  VALID_OFFSET: 24, // 1 byte: 1 = valid, anything else = readers ignore the record
  FLAGS_OFFSET: 25, // 1 byte: W3C trace flags
  ATTRS_SIZE_OFFSET: 26, // u16: bytes of attrs-data that follow
  ATTRS_OFFSET: HEADER_SIZE, // [key u8][len u8][len bytes UTF-8] ...
  HEADER_SIZE,
  RECORD_SIZE,
  MAX_ATTRS_SIZE: RECORD_SIZE - HEADER_SIZE, // 612
});

module.exports = {
  layout,
  HEADER_SIZE,
  RECORD_SIZE,
  MAX_ATTRS_SIZE: layout.MAX_ATTRS_SIZE,
  // The record as u32 words, the unit the writer stores: 0-3 trace id, 4-5 span id,
  // 6 = valid | flags << 8 | attrs size << 16 (the "control word", stored last), 7.. attrs-data.
  ID_WORDS: 6,
  CONTROL_WORD: 6,
  HEADER_WORDS: HEADER_SIZE / 4,
  RECORD_WORDS: RECORD_SIZE / 4,
  // attrs-data entries: a key byte (the key's index in the attribute key map) and a length byte.
  MAX_KEYS: 256,
  MAX_VALUE_BYTES: 255,
};
