#include "frame_walk.h"

#include "layout.h"

namespace otel_v8 {
namespace {

constexpr uint64_t kHeapObjectTag = 1;
// Smis on a 64-bit V8 without pointer compression: the value in the upper 32 bits, low 32 bits 0.
bool IsSmi(uint64_t tagged) { return (tagged & 0xffffffffu) == 0; }
int64_t SmiValue(uint64_t tagged) { return static_cast<int32_t>(tagged >> 32); }
bool IsHeapObject(uint64_t tagged) { return (tagged & 3) == kHeapObjectTag; }
uint64_t Field(uint64_t object, int offset) { return *reinterpret_cast<const uint64_t*>(object - kHeapObjectTag + offset); }

}  // namespace

int64_t WalkFrame(const otel_thread_ctx_nodejs_v1_t& d) {
  if (d.cped_slot == 0) return kNotPublished;
  const int record_slot_offset = d.record_slot_offset;
  if (record_slot_offset == 0 || record_slot_offset % kTaggedSize != 0) return kNoLayout;
  const uint64_t frame = *reinterpret_cast<const uint64_t*>(d.cped_slot);
  if (frame == d.undefined_addr) return 0;
  if (!IsHeapObject(frame)) return kNotAMap;
  const uint64_t table = Field(frame, kJsMapTableOffset);
  if (!IsHeapObject(table)) return kNotAMap;
  const int counts = kOrderedHashMapHeaderSize;
  const uint64_t elements = Field(table, counts), deleted = Field(table, counts + kTaggedSize),
                 buckets = Field(table, counts + 2 * kTaggedSize);
  if (!IsSmi(elements) || !IsSmi(deleted) || !IsSmi(buckets)) return kBadCounts;
  const int64_t n_buckets = SmiValue(buckets), n_entries = SmiValue(elements) + SmiValue(deleted);
  if (n_buckets <= 0 || (n_buckets & (n_buckets - 1)) != 0 || n_entries < 0) return kBadCounts;
  const int bucket_heads = counts + 3 * kTaggedSize;
  const int entries = bucket_heads + static_cast<int>(n_buckets) * kTaggedSize;
  const uint64_t key = *reinterpret_cast<const uint64_t*>(d.als_handle);
  uint64_t link = Field(table, bucket_heads + static_cast<int>((d.als_identity_hash & (n_buckets - 1)) * kTaggedSize));
  for (int64_t hops = 0; IsSmi(link) && SmiValue(link) >= 0; hops++) {
    const int64_t entry = SmiValue(link);
    if (hops > n_entries || entry >= n_entries) return kChainTooLong;
    const int at = entries + static_cast<int>(entry) * 3 * kTaggedSize;
    if (Field(table, at) == key) {
      const uint64_t store = Field(table, at + kTaggedSize);
      if (store == d.undefined_addr) return 0;
      if (!IsHeapObject(store)) return kNotAHolder;
      return static_cast<int64_t>(Field(store, record_slot_offset));
    }
    link = Field(table, at + 2 * kTaggedSize);
  }
  return kNotFound;
}

}  // namespace otel_v8
