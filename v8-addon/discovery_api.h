// The JS-facing functions of discovery.cc.
#pragma once

#include <node.h>

namespace otel_v8 {

// publish(als): fills this thread's otel_thread_ctx_nodejs_v1 (cped_slot last) and unpublishes it
// at environment cleanup (cped_slot first).
void Publish(const v8::FunctionCallbackInfo<v8::Value>& args);
// unpublish(): cped_slot 0 (no manager of the schema owns the thread); publish(als) restores it.
void Unpublish(const v8::FunctionCallbackInfo<v8::Value>& args);
// frameHolds(key, value): whether the running AsyncContextFrame binds key to value.
void FrameHolds(const v8::FunctionCallbackInfo<v8::Value>& args);
// walkOwnFrame(): the reader's walk on this thread's frame (frame_walk.h).
void WalkOwnFrame(const v8::FunctionCallbackInfo<v8::Value>& args);
// walkFrameFor(als): the same walk with a struct filled for `als` but not published: the check
// that runs before anything is published.
void WalkFrameFor(const v8::FunctionCallbackInfo<v8::Value>& args);
// discoveryInfo(): the struct's address and fields, as numbers.
void DiscoveryInfo(const v8::FunctionCallbackInfo<v8::Value>& args);

}  // namespace otel_v8
