#include "holder.h"

#include <stdint.h>
#include <v8-version.h>

#include "span_record.h"

namespace otel_v8 {
namespace {

constexpr int kRecordField = 0;
constexpr int kBlockField = 1;
// A slot's first word: the address of the record right after it (record_blocks.cc).
constexpr size_t kAddressSize = 8;
// The smallest slot: the record address and the record header.
constexpr size_t kMinSlot = kAddressSize + kRecordHeaderSize;

// A holder of this environment that was never given a slot nor a property: spanHolder's holders
// are copies of it (v8::Object::Clone, a copy of the object's words, as V8's own template
// instantiation does from its cached boilerplate, without the template lookup and context save
// around it: ~400 instructions per holder through ObjectTemplate::NewInstance). Dropped at the
// environment's cleanup, while the isolate still exists.
struct HolderTemplate {
  v8::Global<v8::Object> pristine;
};

v8::Local<v8::External> WrapTemplate(v8::Isolate* isolate, HolderTemplate* t) {
#if NODE_MAJOR_VERSION >= 26
  return v8::External::New(isolate, t, v8::kExternalPointerTypeTagDefault);
#else
  return v8::External::New(isolate, t);
#endif
}

HolderTemplate* TemplateOf(const v8::FunctionCallbackInfo<v8::Value>& args) {
#if NODE_MAJOR_VERSION >= 26
  return static_cast<HolderTemplate*>(args.Data().As<v8::External>()->Value(v8::kExternalPointerTypeTagDefault));
#else
  return static_cast<HolderTemplate*>(args.Data().As<v8::External>()->Value());
#endif
}

void Throw(v8::Isolate* isolate, bool range, const char* message) {
  v8::Local<v8::String> text = v8::String::NewFromUtf8(isolate, message).ToLocalChecked();
  isolate->ThrowException(range ? v8::Exception::RangeError(text) : v8::Exception::TypeError(text));
}

// The slot at args[0] (a record block) + args[1], checked in full although only the package's JS
// calls it: a wrong W would send readers into memory that is not a record. Null after a throw.
char* SlotOf(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  if (!args[0]->IsArrayBuffer()) {
    Throw(isolate, false, "block: expected a record block (ArrayBuffer)");
    return nullptr;
  }
  if (!args[1]->IsInt32()) {
    Throw(isolate, false, "byteOffset: expected an integer");
    return nullptr;
  }
  v8::Local<v8::ArrayBuffer> block = args[0].As<v8::ArrayBuffer>();
  const int32_t offset = args[1].As<v8::Int32>()->Value();
  if (offset < 0 || offset % 8 != 0 || static_cast<size_t>(offset) + kMinSlot > block->ByteLength() ||
      block->Data() == nullptr) {
    Throw(isolate, true, "byteOffset: expected a slot's offset in the block (a multiple of 8 inside it)");
    return nullptr;
  }
  return static_cast<char*>(block->Data()) + offset;
}

// Internal field 0 is the record's address (right after the slot's address word), which a reader
// finds at the struct's record_slot_offset in the holder.
void Hold(v8::Local<v8::Object> holder, char* slot, v8::Local<v8::Value> block) {
  char* record = slot + kAddressSize;
#if NODE_MAJOR_VERSION >= 26
  holder->SetAlignedPointerInInternalField(kRecordField, record, v8::kEmbedderDataTypeTagDefault);
#else
  holder->SetAlignedPointerInInternalField(kRecordField, record);
#endif
  holder->SetInternalField(kBlockField, block);
}

void Construct(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  if (!args.IsConstructCall()) return Throw(isolate, false, "Holder: expected to be called with new");
  if (args.Length() != 2) return Throw(isolate, false, "Holder(block, byteOffset): expected 2 arguments");
  char* slot = SlotOf(args);
  if (slot != nullptr) Hold(args.This(), slot, args[0]);
}

void SpanHolder(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  if (args.Length() != 5) {
    return Throw(isolate, false, "spanHolder(block, byteOffset, traceId, spanId, controlWord): expected 5 arguments");
  }
  char* slot = SlotOf(args);
  if (slot == nullptr) return;
  if (!args[4]->IsUint32()) return Throw(isolate, false, "controlWord: expected an unsigned 32-bit integer");
  if (!WriteSpanRecord(isolate, args[2], args[3], args[4].As<v8::Uint32>()->Value(),
                       reinterpret_cast<uint8_t*>(slot + kAddressSize))) {
    args.GetReturnValue().SetNull();
    return;
  }
#if V8_MAJOR_VERSION >= 13
  v8::Local<v8::Object> holder = TemplateOf(args)->pristine.Get(isolate)->Clone(isolate);
#else
  v8::Local<v8::Object> holder = TemplateOf(args)->pristine.Get(isolate)->Clone();
#endif
  Hold(holder, slot, args[0]);
  args.GetReturnValue().Set(holder);
}

void DropTemplate(void* t) { delete static_cast<HolderTemplate*>(t); }

}  // namespace

void SetHolderExports(v8::Isolate* isolate, v8::Local<v8::Context> context, v8::Local<v8::Object> exports) {
  v8::Local<v8::FunctionTemplate> tpl = v8::FunctionTemplate::New(isolate, Construct);
  tpl->SetClassName(v8::String::NewFromUtf8Literal(isolate, "OtelThreadCtxHolder"));
  v8::Local<v8::ObjectTemplate> instance = tpl->InstanceTemplate();
  instance->SetInternalFieldCount(2);
  // No template properties: V8 adds those to each new instance on a slow path (~450 ns per holder,
  // measured on Node 24); the JS layer's store of the context right after creation takes a cached
  // transition.
  exports->Set(context, v8::String::NewFromUtf8Literal(isolate, "Holder"), tpl->GetFunction(context).ToLocalChecked())
      .Check();
  auto* t = new HolderTemplate();
  t->pristine.Reset(isolate, instance->NewInstance(context).ToLocalChecked());
  node::AddEnvironmentCleanupHook(isolate, DropTemplate, t);
  v8::Local<v8::Function> span_holder =
      v8::FunctionTemplate::New(isolate, SpanHolder, WrapTemplate(isolate, t))->GetFunction(context).ToLocalChecked();
  exports->Set(context, v8::String::NewFromUtf8Literal(isolate, "spanHolder"), span_holder).Check();
}

}  // namespace otel_v8
