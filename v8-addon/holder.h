// The holder: the object a context's AsyncLocalStorage store is. Its embedder field holds W, the
// address of its span's record slot (record_blocks.cc), which a reader follows from the frame; its
// second internal field holds the slot's page (the ArrayBuffer), so that a record is never freed
// while a frame can reach it (an embedder field is a raw address the GC does not follow).
#pragma once

#include <node.h>

namespace otel_v8 {

// exports.Holder, `new Holder(block, byteOffset)`: a holder of the record slot at byteOffset in
// the block (W = the block's data + byteOffset), for a context whose span already has its record.
// exports.spanHolder(block, byteOffset, traceId, spanId, controlWord): the span's record written
// in the slot (ids decoded, the control word last) and its first holder, in one call; null, with
// nothing written, when an id is invalid.
void SetHolderExports(v8::Isolate* isolate, v8::Local<v8::Context> context, v8::Local<v8::Object> exports);

}  // namespace otel_v8
