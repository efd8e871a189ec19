'use strict';
// getFrameSpanContext(): the span context a `nodejs_v1_dev` reader sees on this thread now, found
// the reader's way (otel_thread_ctx_nodejs_v1 -> the AsyncContextFrame -> the holder -> the
// record), in-process. Null when a schema 'nodejs' manager never published on this thread, or the
// frame holds no live span.

const { enabledThreadContextManager } = require('./context-manager');
const { nodejsSchema } = require('./schema');

/** @returns {{ traceId: string, spanId: string, traceFlags: number, attrs: Uint8Array } | null} */
function getFrameSpanContext() {
  const owner = enabledThreadContextManager();
  if (owner === null || owner.schema !== 'nodejs') return null;
  return nodejsSchema().frames.readFrame();
}

module.exports = { getFrameSpanContext };
