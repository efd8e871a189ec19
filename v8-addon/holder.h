// The holder: the object a context's AsyncLocalStorage store is. Its embedder field holds W, the
// address of its span's record slot (record_blocks.cc), which a reader follows from the frame.
// The JS layer keeps the slot's page alive from the holder (js/frame-writer.js: holder.record).
#pragma once

#include <node.h>

namespace otel_v8 {

// The constructor `new Holder(block, byteOffset)`: W = the block's data + byteOffset.
v8::Local<v8::Function> HolderConstructor(v8::Isolate* isolate, v8::Local<v8::Context> context);

}  // namespace otel_v8
