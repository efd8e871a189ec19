// The discovery struct of the `nodejs_v1_dev` schema: one per JS thread, exported as the TLS
// symbol `otel_thread_ctx_nodejs_v1` so that a reader outside the process finds, for each thread,
// the isolate's ContinuationPreservedEmbedderData slot (the running AsyncContextFrame), the
// AsyncLocalStorage whose entry in that frame holds the record, that object's identity hash, where
// a holder keeps its record's address, and the isolate's `undefined`. Layout (32 bytes) as RFC
// #1861's latest text gives it; Datadog's writer (dd-trace 6.21) has the same words and leaves the
// record_slot_offset byte 0 (its padding then).
#pragma once

#include <stddef.h>
#include <stdint.h>

extern "C" {
struct otel_thread_ctx_nodejs_v1_t {
  uint64_t cped_slot;          // address of the isolate's CPED slot; 0 = not published
  uint64_t als_handle;         // address of a global-handle slot holding the ALS's tagged pointer
  int32_t als_identity_hash;   // the ALS's identity hash: the frame's bucket is hash & (buckets - 1)
  uint8_t record_slot_offset;  // byte offset of a holder's internal field 0 (its record's address)
  uint8_t reserved[3];         // zero
  uint64_t undefined_addr;     // tagged `undefined`: the frame has no context
};
static_assert(sizeof(otel_thread_ctx_nodejs_v1_t) == 32, "readers copy 32 bytes");
static_assert(offsetof(otel_thread_ctx_nodejs_v1_t, record_slot_offset) == 2 * sizeof(void*) + 4, "RFC #1861: 2 * ptr + 4");

extern __thread otel_thread_ctx_nodejs_v1_t otel_thread_ctx_nodejs_v1;
}
