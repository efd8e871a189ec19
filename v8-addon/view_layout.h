// Where a typed array keeps its data pointer. The `nodejs_v1_dev` holder of this writer is a
// BigUint64Array view of one record slot (js/frame-writer.js): on a V8 without the sandbox its data
// pointer is a raw address in the object, the slot's address W, at an offset V8's public headers
// do not give. It is found at init on a live view (the one word that equals the view's data
// address) and then checked end to end by the reader's walk (frame_walk.cc).
#pragma once

#include <node.h>

namespace otel_v8 {

// viewDataOffset(view): the byte offset in the view object of its data pointer, or -1 when no word
// (or more than one) of its first 32 holds it.
void ViewDataOffset(const v8::FunctionCallbackInfo<v8::Value>& args);

}  // namespace otel_v8
