#include "holder.h"

#include <stdint.h>

namespace otel_v8 {
namespace {

constexpr int kSlotField = 0;
// The smallest slot: the record address and the 28-byte record header (record_blocks.cc).
constexpr size_t kMinSlot = 8 + 28;

void Throw(v8::Isolate* isolate, bool range, const char* message) {
  v8::Local<v8::String> text = v8::String::NewFromUtf8(isolate, message).ToLocalChecked();
  isolate->ThrowException(range ? v8::Exception::RangeError(text) : v8::Exception::TypeError(text));
}

void SetSlot(v8::Local<v8::Object> holder, void* slot) {
#if NODE_MAJOR_VERSION >= 26
  holder->SetAlignedPointerInInternalField(kSlotField, slot, v8::kEmbedderDataTypeTagDefault);
#else
  holder->SetAlignedPointerInInternalField(kSlotField, slot);
#endif
}

// Checked in full although only the package's JS calls it: a wrong W would send readers into
// memory that is not a record.
void Construct(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  if (!args.IsConstructCall()) return Throw(isolate, false, "Holder: expected to be called with new");
  if (args.Length() != 2 || !args[0]->IsArrayBuffer()) {
    return Throw(isolate, false, "block: expected a record block (ArrayBuffer)");
  }
  if (!args[1]->IsInt32()) return Throw(isolate, false, "byteOffset: expected an integer");
  v8::Local<v8::ArrayBuffer> block = args[0].As<v8::ArrayBuffer>();
  const int32_t offset = args[1].As<v8::Int32>()->Value();
  if (offset < 0 || offset % 8 != 0 || static_cast<size_t>(offset) + kMinSlot > block->ByteLength() ||
      block->Data() == nullptr) {
    return Throw(isolate, true, "byteOffset: expected a slot's offset in the block (a multiple of 8 inside it)");
  }
  v8::Local<v8::Object> self = args.This();
  SetSlot(self, static_cast<char*>(block->Data()) + offset);
}

}  // namespace

v8::Local<v8::Function> HolderConstructor(v8::Isolate* isolate, v8::Local<v8::Context> context) {
  v8::Local<v8::FunctionTemplate> tpl = v8::FunctionTemplate::New(isolate, Construct);
  tpl->SetClassName(v8::String::NewFromUtf8Literal(isolate, "OtelThreadCtxHolder"));
  v8::Local<v8::ObjectTemplate> instance = tpl->InstanceTemplate();
  instance->SetInternalFieldCount(1);
  // No template properties: V8 adds those to each new instance on a slow path (~450 ns per holder,
  // measured on Node 24); the JS layer's stores right after construction take cached transitions.
  return tpl->GetFunction(context).ToLocalChecked();
}

}  // namespace otel_v8
