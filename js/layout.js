'use strict';
// Byte offsets of the OTEP 4947 Thread-Local Context Record (host endian; little endian here).
module.exports = Object.freeze({
  TRACE_ID_OFFSET: 0, // 16 bytes
  SPAN_ID_OFFSET: 16, // 8 bytes
  VALID_OFFSET: 24, // 1 byte: 1 = valid, anything else = reader ignores the record
  FLAGS_OFFSET: 25, // 1 byte: W3C trace flags
  ATTRS_SIZE_OFFSET: 26, // u16: bytes of attrs-data that follow
  ATTRS_OFFSET: 28, // [key u8][len u8][len bytes UTF-8] ...
  HEADER_SIZE: 28,
  RECORD_SIZE: 640, // the eBPF profiler's limit; attrs-data <= 612 bytes
  MAX_ATTRS_SIZE: 612,
});
