#include "discovery.h"

#include <node.h>
#include <string.h>

#include <atomic>

#include "frame_walk.h"
#include "layout.h"

extern "C" {
// Exported in .dynsym (default visibility) and reached through TLSDESC (-mtls-dialect=gnu2), the
// way OTEP 4947 readers resolve `otel_thread_ctx_v1`. Plain data: no thread_local destructor, so
// a thread's exit never touches V8.
__attribute__((visibility("default"))) __thread otel_thread_ctx_nodejs_v1_t otel_thread_ctx_nodejs_v1;
}

namespace otel_v8 {
namespace {

// The thread's published AsyncLocalStorage, kept alive and tracked by the GC through a global
// handle whose slot address is what readers dereference. Heap-allocated and dropped by the
// environment's cleanup hook, while the isolate still exists.
struct Published {
  v8::Global<v8::Object> als;
};
__thread Published* published = nullptr;

void Store64(uint64_t* field, uint64_t value) {
  std::atomic_signal_fence(std::memory_order_release);
  *reinterpret_cast<volatile uint64_t*>(field) = value;
  std::atomic_signal_fence(std::memory_order_release);
}

// Teardown (worker exit, main environment cleanup): cped_slot is zeroed first, so a reader
// interrupting from here on finds nothing rather than a handle being reset.
void Teardown(void* /*arg*/) {
  Store64(&otel_thread_ctx_nodejs_v1.cped_slot, 0);
  otel_thread_ctx_nodejs_v1.als_handle = 0;
  otel_thread_ctx_nodejs_v1.als_identity_hash = 0;
  otel_thread_ctx_nodejs_v1.undefined_addr = 0;
  delete published;
  published = nullptr;
}

uint64_t GlobalSlotAddress(const v8::Global<v8::Object>& handle) {
  static_assert(sizeof(handle) == sizeof(uint64_t), "a global handle is one slot pointer");
  uint64_t slot;
  memcpy(&slot, &handle, sizeof(slot));
  return slot;
}

// The struct's fields for `als` on this isolate, except cped_slot (the caller stores it last).
// record_slot_offset is a fact of this build (layout.h), kept at teardown as the RFC allows.
void Fill(v8::Isolate* isolate, v8::Local<v8::Object> als, const v8::Global<v8::Object>& handle,
          otel_thread_ctx_nodejs_v1_t* d) {
  d->als_handle = GlobalSlotAddress(handle);
  d->als_identity_hash = als->GetIdentityHash();
  d->record_slot_offset = kRecordSlotOffset;
  d->undefined_addr = v8::internal::Internals::GetRoot(isolate, v8::internal::Internals::kUndefinedValueRootIndex);
}

uint64_t CpedSlot(v8::Isolate* isolate) {
  return reinterpret_cast<uint64_t>(isolate) + v8::internal::Internals::kContinuationPreservedEmbedderDataOffset;
}

}  // namespace

void Publish(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  if (args.Length() != 1 || !args[0]->IsObject()) {
    isolate->ThrowException(v8::Exception::TypeError(
        v8::String::NewFromUtf8Literal(isolate, "als: expected the AsyncLocalStorage to publish")));
    return;
  }
  v8::Local<v8::Object> als = args[0].As<v8::Object>();
  if (published != nullptr) {
    // One AsyncLocalStorage per thread: every manager on the thread shares it. Published again
    // after unpublish() (a manager enabled after another was disabled or took over).
    if (published->als.Get(isolate) == als) {
      Store64(&otel_thread_ctx_nodejs_v1.cped_slot, CpedSlot(isolate));
      return;
    }
    isolate->ThrowException(v8::Exception::Error(v8::String::NewFromUtf8Literal(
        isolate, "otel-thread-ctx: this thread already publishes another AsyncLocalStorage")));
    return;
  }
  published = new Published();
  published->als.Reset(isolate, als);
  node::AddEnvironmentCleanupHook(isolate, Teardown, nullptr);
  Fill(isolate, als, published->als, &otel_thread_ctx_nodejs_v1);
  // Last: a reader that sees cped_slot sees everything else.
  Store64(&otel_thread_ctx_nodejs_v1.cped_slot, CpedSlot(isolate));
}

void Unpublish(const v8::FunctionCallbackInfo<v8::Value>& args) {
  // Only cped_slot: readers find nothing on this thread, and publish() restores it with the same
  // storage and handle.
  Store64(&otel_thread_ctx_nodejs_v1.cped_slot, 0);
}

void WalkFrameFor(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  if (args.Length() != 1 || !args[0]->IsObject()) {
    isolate->ThrowException(v8::Exception::TypeError(
        v8::String::NewFromUtf8Literal(isolate, "walkFrameFor(als): expected an AsyncLocalStorage")));
    return;
  }
  v8::Local<v8::Object> als = args[0].As<v8::Object>();
  v8::Global<v8::Object> handle(isolate, als);
  otel_thread_ctx_nodejs_v1_t probe = {};
  Fill(isolate, als, handle, &probe);
  probe.cped_slot = CpedSlot(isolate);
  args.GetReturnValue().Set(v8::Number::New(isolate, static_cast<double>(WalkFrame(probe))));
}

// Whether the isolate's continuation-preserved embedder data is a Map that binds `key` to
// `value`: called inside `als.run(value, ...)`, true exactly when AsyncLocalStorage runs on
// AsyncContextFrame (the property the reader's walk needs), whatever the Node version or flags.
void FrameHolds(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  bool holds = false;
  if (args.Length() == 2) {
#if NODE_MAJOR_VERSION >= 26
    v8::Local<v8::Data> data = isolate->GetContinuationPreservedEmbedderDataV2();
    v8::Local<v8::Value> cped = !data.IsEmpty() && data->IsValue() ? data.As<v8::Value>() : v8::Local<v8::Value>();
#else
    v8::Local<v8::Value> cped = isolate->GetContinuationPreservedEmbedderData();
#endif
    v8::Local<v8::Context> context = isolate->GetCurrentContext();
    v8::Local<v8::Value> found;
    if (!cped.IsEmpty() && cped->IsMap() && cped.As<v8::Map>()->Get(context, args[0]).ToLocal(&found)) {
      holds = found->StrictEquals(args[1]);
    }
  }
  args.GetReturnValue().Set(holds);
}

// The reader's walk, run on this thread's own frame (frame_walk.cc): the record address it
// reaches, 0 for "no context", or a negative FrameWalkError.
void WalkOwnFrame(const v8::FunctionCallbackInfo<v8::Value>& args) {
  args.GetReturnValue().Set(v8::Number::New(args.GetIsolate(), static_cast<double>(WalkFrame(otel_thread_ctx_nodejs_v1))));
}

void DiscoveryInfo(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  v8::Local<v8::Context> context = isolate->GetCurrentContext();
  v8::Local<v8::Object> info = v8::Object::New(isolate);
  auto set = [&](const char* key, double value) {
    info->Set(context, v8::String::NewFromUtf8(isolate, key).ToLocalChecked(), v8::Number::New(isolate, value)).Check();
  };
  const otel_thread_ctx_nodejs_v1_t& d = otel_thread_ctx_nodejs_v1;
  set("structAddress", static_cast<double>(reinterpret_cast<uintptr_t>(&otel_thread_ctx_nodejs_v1)));
  set("cpedSlot", static_cast<double>(d.cped_slot));
  set("alsHandle", static_cast<double>(d.als_handle));
  set("alsIdentityHash", d.als_identity_hash);
  set("recordSlotOffset", d.record_slot_offset);
  set("undefinedAddress", static_cast<double>(d.undefined_addr));
  args.GetReturnValue().Set(info);
}

}  // namespace otel_v8
