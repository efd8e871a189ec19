// The V8 object layout the `nodejs_v1_dev` walk depends on (RFC #1861 of the OpenTelemetry eBPF
// profiler, latest text): three constants the schema fixes, static-asserted here against the
// headers this addon is built with, and the record slot offset, which moves between V8 versions
// and is published in each thread's discovery struct (discovery.h). The walk is also run
// in-process at init (frame_walk.cc) before anything is published.
#pragma once

#include <v8-internal.h>

#include <type_traits>

namespace otel_v8 {

// Where an API object's embedder fields start: after the JSObject header, and from V8 13 (Node 23
// and later) after one more slot (the CppHeap wrappable pointer of JSAPIObjectWithEmbedderSlots),
// so 24 on Node 22 and 32 on Node 24 and 26, measured. Taken from the headers where they say it.
template <typename I, typename = void>
struct ApiObjectHeader {
  static constexpr int kSize = I::kJSObjectHeaderSize;
};
template <typename I>
struct ApiObjectHeader<I, std::void_t<decltype(I::kJSAPIObjectWithEmbedderSlotsHeaderSize)>> {
  static constexpr int kSize = I::kJSAPIObjectWithEmbedderSlotsHeaderSize;
};

using Internals = v8::internal::Internals;

// Where a holder's internal field 0 (the record's address: holder.cc) sits in the object: the
// struct's record_slot_offset.
constexpr int kRecordSlotOffset = ApiObjectHeader<Internals>::kSize + Internals::kEmbedderDataSlotExternalPointerOffset;
constexpr int kTaggedSize = v8::internal::kApiTaggedSize;
// JSMap::kTableOffset (right after the JSObject header) and the OrderedHashMap's FixedArray header
// before its three Smi counts: the values the schema fixes.
constexpr int kJsMapTableOffset = 0x18;
constexpr int kOrderedHashMapHeaderSize = 0x10;

static_assert(kTaggedSize == 8, "nodejs_v1_dev: Node's standard builds, no pointer compression");
static_assert(kJsMapTableOffset == Internals::kJSObjectHeaderSize, "nodejs_v1_dev fixes the JSMap table offset at 24");
static_assert(kOrderedHashMapHeaderSize == Internals::kFixedArrayHeaderSize, "nodejs_v1_dev fixes the hash map header at 16");
static_assert(kRecordSlotOffset > 0 && kRecordSlotOffset < 256 && kRecordSlotOffset % kTaggedSize == 0,
              "record_slot_offset is one tagged-aligned byte");
#if defined(V8_COMPRESS_POINTERS) || defined(V8_ENABLE_SANDBOX) || defined(V8_31BIT_SMIS_ON_64BIT_ARCH)
#error "built for a V8 with pointer compression or the sandbox: the nodejs_v1_dev walk assumes neither"
#endif

}  // namespace otel_v8
