'use strict';
// The record, directly (no OpenTelemetry needed): setSpanContext / clearSpanContext /
// getSpanContext, and facts about the thread's record. Writes go through the thread's writer, so
// that a context manager enabled on the thread knows what is published: a direct write lasts
// until the manager's next switch (callback entry or exit, with() entry or exit), which publishes
// what the manager says again.

const native = require('../native/addon');
const { threadWriter } = require('./thread-writer');
const { withBigintJson } = require('../bigint-json');
const { allocationSamplingInfo } = require('../profiling/allocations');

/**
 * Publishes a span context for the calling thread. Ids as hex strings or Uint8Arrays, validated
 * by the addon before a byte is written (its SSE2 hex decoder costs less than a JS one).
 */
function setSpanContext(traceId, spanId, traceFlags) {
  if (arguments.length > 3) {
    const error = new TypeError(`arguments: expected at most 3 (traceId, spanId, traceFlags), got ${arguments.length}`);
    error.code = 'ERR_INVALID_ARG_TYPE';
    throw error;
  }
  const writer = threadWriter(); // first: creating the writer detaches the record
  native.setSpanContext(traceId, spanId, traceFlags);
  writer.wroteDirectly();
}

/** Detaches: valid 0 (OTEP 4947's detach), the one meaning of "none" everywhere. */
function clearSpanContext() {
  threadWriter().detach();
}

/** The span context a reader sees now, read back from the page by the addon, or null. */
function getSpanContext() {
  return native.getSpanContext();
}

/** Where this thread's record is and how it is held; JSON.stringify writes addresses as hex. */
function threadInfo() {
  return withBigintJson({ supported: native.supported, ...native.threadInfo(), allocations: allocationSamplingInfo() });
}

/** A read-only look at this thread's record (640 bytes aliasing the page). */
function recordView() {
  return native.recordView();
}

module.exports = { setSpanContext, clearSpanContext, getSpanContext, threadInfo, recordView };
