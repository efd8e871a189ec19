#include "view_layout.h"

#include <stdint.h>

namespace otel_v8 {

namespace {
constexpr int kScannedWords = 32;  // JSTypedArray is 10-12 words on Node 22-26
constexpr uint64_t kHeapObjectTag = 1;
}  // namespace

void ViewDataOffset(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  if (args.Length() != 1 || !args[0]->IsTypedArray()) {
    isolate->ThrowException(v8::Exception::TypeError(
        v8::String::NewFromUtf8Literal(isolate, "view: expected a typed array over an ArrayBuffer")));
    return;
  }
  v8::Local<v8::TypedArray> view = args[0].As<v8::TypedArray>();
  const uint64_t data = reinterpret_cast<uint64_t>(static_cast<char*>(view->Buffer()->Data()) + view->ByteOffset());
  const uint64_t object = v8::internal::ValueHelper::ValueAsAddress(*view) - kHeapObjectTag;
  int found = -1;
  for (int word = 1; word < kScannedWords; word++) {
    if (*reinterpret_cast<const uint64_t*>(object + word * 8) != data) continue;
    if (found != -1) {
      found = -1;  // ambiguous: refuse rather than guess
      break;
    }
    found = word * 8;
  }
  args.GetReturnValue().Set(found);
}

}  // namespace otel_v8
