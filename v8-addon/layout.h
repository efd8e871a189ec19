// V8 object layout the reader's walk depends on, published in the process context as the
// `threadlocal.*` integers of the `nodejs_v1_dev` schema, and checked against the live heap at
// init (frame_walk.cc) before anything is published.
#pragma once

#include <v8-internal.h>

#include <type_traits>

namespace otel_v8 {

// Where an API object's embedder fields start: after the JSObject header, and from V8 13 (Node 24)
// after one more slot (the CppHeap wrappable pointer of JSAPIObjectWithEmbedderSlots), so 24 on
// Node 22 and 32 on Node 24 and 26, measured. Taken from the headers where they say it.
template <typename I, typename = void>
struct ApiObjectHeader {
  static constexpr int kSize = I::kJSObjectHeaderSize;
};
template <typename I>
struct ApiObjectHeader<I, std::void_t<decltype(I::kJSAPIObjectWithEmbedderSlotsHeaderSize)>> {
  static constexpr int kSize = I::kJSAPIObjectWithEmbedderSlotsHeaderSize;
};

// Where a holder's embedder field 0 (the native pointer W) sits in the object.
constexpr int kWrappedObjectOffset = ApiObjectHeader<v8::internal::Internals>::kSize +
                                     v8::internal::Internals::kEmbedderDataSlotExternalPointerOffset;
constexpr int kTaggedSize = v8::internal::kApiTaggedSize;
// W (the holder's embedder field, holder.cc) points at a record slot whose first word is the
// record's address (record_blocks.cc).
constexpr int kNativeWrapFieldsOffset = 0;
// JSMap::kTableOffset and the OrderedHashMap header before its three Smi counts: not in V8's
// public headers (deps/v8/src/objects/js-collection.h, ordered-hash-table.h); the same values
// Datadog's writer publishes for Node 22-26. A V8 that moved them fails the init check.
constexpr int kJsMapTableOffset = 0x18;
constexpr int kOrderedHashMapHeaderSize = 0x10;

static_assert(kTaggedSize == 8, "Node's standard builds: no pointer compression");
#if defined(V8_COMPRESS_POINTERS) || defined(V8_ENABLE_SANDBOX) || defined(V8_31BIT_SMIS_ON_64BIT_ARCH)
#error "built for a V8 with pointer compression or the sandbox: the nodejs_v1_dev walk assumes neither"
#endif

}  // namespace otel_v8
