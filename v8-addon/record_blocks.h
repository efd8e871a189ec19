// Record blocks: pinned pages that hold the records of the `nodejs_v1_dev` schema, handed to JS
// as ArrayBuffers (the JS layer writes records through typed arrays, as it writes the TLS record)
// and given back to a process-wide pool when V8 frees the last ArrayBuffer of a page.
#pragma once

#include <node.h>

namespace otel_v8 {

// new ArrayBuffer of one page cut into slots of `slotSize` bytes: each slot's first word holds the
// address of the record right after it (the record's address a reader finds at W + 0).
void NewBlock(const v8::FunctionCallbackInfo<v8::Value>& args);

// { pages, pinnedPages, pinError } of the pool, for threadInfo()-style reporting.
void BlockPoolInfo(const v8::FunctionCallbackInfo<v8::Value>& args);

}  // namespace otel_v8
