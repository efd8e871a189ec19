#include "record_blocks.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <memory>

namespace otel_v8 {
namespace {

constexpr size_t kPageSize = 4096;
// Pages are mapped 16 at a time: one mmap + mlock per 64 KiB (~100 records of 640 bytes, ~1,600 of 40).
constexpr size_t kPagesPerChunk = 16;

// The pool is process-wide: V8 may free an ArrayBuffer's backing store on a background thread,
// and a page freed by one JS thread is as good for another.
pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER;
void* free_pages = nullptr;  // singly linked through each free page's first word
size_t mapped_pages = 0;
size_t pinned_pages = 0;
int pin_errno = 0;  // the last mlock error (0: every chunk pinned)

// A new chunk, pinned when the limit allows: an eBPF program in interrupt context cannot fault a
// page in, so an unpinned record that was swapped out reads as a miss (reported, not fatal).
// MADV_WIPEONFORK: a forked child sees zero records, never its parent's spans.
bool MapChunk() {
  const size_t len = kPageSize * kPagesPerChunk;
  void* chunk = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (chunk == MAP_FAILED) return false;
  if (mlock(chunk, len) == 0) {
    pinned_pages += kPagesPerChunk;
  } else {
    pin_errno = errno;
  }
  madvise(chunk, len, MADV_WIPEONFORK);
  mapped_pages += kPagesPerChunk;
  for (size_t i = 0; i < kPagesPerChunk; i++) {
    void* page = static_cast<char*>(chunk) + i * kPageSize;
    *static_cast<void**>(page) = free_pages;
    free_pages = page;
  }
  return true;
}

void* TakePage() {
  pthread_mutex_lock(&pool_mutex);
  if (free_pages == nullptr && !MapChunk()) {
    pthread_mutex_unlock(&pool_mutex);
    return nullptr;
  }
  void* page = free_pages;
  free_pages = *static_cast<void**>(page);
  pthread_mutex_unlock(&pool_mutex);
  return page;
}

// V8's deleter: the last ArrayBuffer of the page is gone, so no holder (and no frame) reaches a
// record in it any more.
void ReturnPage(void* data, size_t /*length*/, void* /*deleter_data*/) {
  pthread_mutex_lock(&pool_mutex);
  *static_cast<void**>(data) = free_pages;
  free_pages = data;
  pthread_mutex_unlock(&pool_mutex);
}

}  // namespace

void NewBlock(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  if (args.Length() != 1 || !args[0]->IsInt32()) {
    isolate->ThrowException(v8::Exception::TypeError(
        v8::String::NewFromUtf8Literal(isolate, "slotSize: expected an integer")));
    return;
  }
  const int32_t slot_size = args[0].As<v8::Int32>()->Value();
  // A record slot: the record's address (8 bytes), then the 28-byte header and its attrs-data.
  if (slot_size < 8 + 28 || slot_size > static_cast<int32_t>(kPageSize) || slot_size % 8 != 0) {
    isolate->ThrowException(v8::Exception::RangeError(v8::String::NewFromUtf8Literal(
        isolate, "slotSize: expected a multiple of 8 from 36 to 4096")));
    return;
  }
  void* page = TakePage();
  if (page == nullptr) {
    isolate->ThrowException(v8::Exception::Error(
        v8::String::NewFromUtf8Literal(isolate, "otel-thread-ctx: could not map a record page")));
    return;
  }
  // A page back from the pool still holds old records: zero it before any slot can be reached.
  memset(page, 0, kPageSize);
  for (size_t at = 0; at + slot_size <= kPageSize; at += slot_size) {
    char* slot = static_cast<char*>(page) + at;
    *reinterpret_cast<uint64_t*>(slot) = reinterpret_cast<uint64_t>(slot + 8);
  }
  std::unique_ptr<v8::BackingStore> store = v8::ArrayBuffer::NewBackingStore(page, kPageSize, ReturnPage, nullptr);
  args.GetReturnValue().Set(v8::ArrayBuffer::New(isolate, std::move(store)));
}

void BlockPoolInfo(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  v8::Local<v8::Context> context = isolate->GetCurrentContext();
  pthread_mutex_lock(&pool_mutex);
  const double mapped = static_cast<double>(mapped_pages);
  const double pinned = static_cast<double>(pinned_pages);
  const int err = pin_errno;
  pthread_mutex_unlock(&pool_mutex);
  v8::Local<v8::Object> info = v8::Object::New(isolate);
  auto set = [&](const char* key, v8::Local<v8::Value> value) {
    info->Set(context, v8::String::NewFromUtf8(isolate, key).ToLocalChecked(), value).Check();
  };
  set("pages", v8::Number::New(isolate, mapped));
  set("pinnedPages", v8::Number::New(isolate, pinned));
  set("pinError", err == 0 ? v8::Null(isolate).As<v8::Value>()
                           : v8::String::NewFromUtf8(isolate, strerror(err)).ToLocalChecked().As<v8::Value>());
  args.GetReturnValue().Set(info);
}

}  // namespace otel_v8
