// The V8 part of otel-thread-ctx's `nodejs_v1_dev` schema, built per Node ABI against that
// Node's headers (scripts/build-v8-addon.sh): what Node-API cannot reach (the isolate's CPED slot,
// a global handle's address, an identity hash, embedder fields) and pinned record pages.
// Everything else (records, the context manager, the process context) is the Rust addon's and the
// JS layer's.
#include <node.h>

#include "discovery_api.h"
#include "holder.h"
#include "layout.h"
#include "record_blocks.h"

namespace {

void SetFunction(v8::Isolate* isolate, v8::Local<v8::Context> context, v8::Local<v8::Object> exports, const char* name,
                 v8::FunctionCallback fn) {
  v8::Local<v8::Function> f = v8::FunctionTemplate::New(isolate, fn)->GetFunction(context).ToLocalChecked();
  exports->Set(context, v8::String::NewFromUtf8(isolate, name).ToLocalChecked(), f).Check();
}

void SetInt(v8::Isolate* isolate, v8::Local<v8::Context> context, v8::Local<v8::Object> target, const char* name, int value) {
  target->Set(context, v8::String::NewFromUtf8(isolate, name).ToLocalChecked(), v8::Integer::New(isolate, value)).Check();
}

}  // namespace

// Context-aware: each worker thread loads its own instance, with its own discovery struct.
NODE_MODULE_INIT(/* exports, module, context */) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  SetFunction(isolate, context, exports, "publish", otel_v8::Publish);
  SetFunction(isolate, context, exports, "unpublish", otel_v8::Unpublish);
  SetFunction(isolate, context, exports, "frameHolds", otel_v8::FrameHolds);
  SetFunction(isolate, context, exports, "walkOwnFrame", otel_v8::WalkOwnFrame);
  SetFunction(isolate, context, exports, "walkFrameFor", otel_v8::WalkFrameFor);
  SetFunction(isolate, context, exports, "discoveryInfo", otel_v8::DiscoveryInfo);
  SetFunction(isolate, context, exports, "newBlock", otel_v8::NewBlock);
  SetFunction(isolate, context, exports, "blockPoolInfo", otel_v8::BlockPoolInfo);
  otel_v8::SetHolderExports(isolate, context, exports);
  // Where a holder keeps its record's address: the struct's record_slot_offset (layout.h).
  SetInt(isolate, context, exports, "recordSlotOffset", otel_v8::kRecordSlotOffset);
  SetInt(isolate, context, exports, "nodeMajor", NODE_MAJOR_VERSION);
}
