// The walk a `nodejs_v1_dev` reader does at sample time (discovery struct -> CPED -> the frame's
// hash table -> the entry keyed by the published AsyncLocalStorage -> the holder -> its internal
// field 0 at the struct's record_slot_offset -> the record),
// done in-process on the thread's own frame. The JS layer runs it once at init on a probe record:
// if it does not land on that record, this V8's layout is not the one published, and the schema is
// refused before any reader is told about it.
#pragma once

#include <stdint.h>

#include "discovery.h"

namespace otel_v8 {

enum FrameWalkError : int64_t {
  kNotPublished = -1,   // cped_slot is 0
  kNotAMap = -2,        // the CPED is not a heap object with a table where a JSMap has one
  kBadCounts = -3,      // a count that is not a Smi, or buckets not a power of two
  kChainTooLong = -4,   // more links than entries
  kNotFound = -5,       // the AsyncLocalStorage is not in the frame
  kNotAHolder = -6,     // the store is not a heap object
  kNoLayout = -7,       // record_slot_offset is 0 or not tagged-aligned
};

// The record address (> 0), 0 when the frame holds no context, or a FrameWalkError.
int64_t WalkFrame(const otel_thread_ctx_nodejs_v1_t& discovery);

}  // namespace otel_v8
