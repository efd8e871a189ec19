// A span's OTEP 4947 record header written from its span context's hex ids, for the `nodejs`
// schema's one native call per span (holder.cc): reading the 48 hex digits (a copy through V8's
// API) and decoding them here costs ~420 instructions per span, ~140 of them the decode (callgrind,
// span workload, Node 24); the JS decode it replaced cost more and needed its result copied into
// the record.
#pragma once

#include <node.h>
#include <stdint.h>

namespace otel_v8 {

// The record header: trace id (16 bytes), span id (8), then the control word (valid | flags << 8 |
// attrs size << 16).
constexpr int kRecordHeaderSize = 28;
constexpr int kControlWordOffset = 24;

// Decodes `trace_id` (32 hex digits) and `span_id` (16) into the record at `record`, then stores
// `control` last (a reader that sees valid 1 sees the ids). Returns false, with nothing written,
// when either id is not exactly that many hex digits or is all zero (W3C: invalid).
bool WriteSpanRecord(v8::Isolate* isolate, v8::Local<v8::Value> trace_id, v8::Local<v8::Value> span_id, uint32_t control,
                     uint8_t* record);

}  // namespace otel_v8
