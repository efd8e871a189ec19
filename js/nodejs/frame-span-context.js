'use strict';
// What schema 'nodejs' looks like from this thread: getFrameSpanContext(), the span context a
// `nodejs_v1_dev` reader sees now, found the reader's way (otel_thread_ctx_nodejs_v1 -> the
// AsyncContextFrame -> the holder -> the record) in-process; nodejsSchemaInfo(), whether the
// schema is available here, where its struct is, and how its record pages are held.

const { enabledThreadContextManager } = require('../tls/context-manager');
const { nodejsSchema } = require('./availability');

/** @returns {{ traceId: string, spanId: string, traceFlags: number, attrs: Uint8Array } | null} */
function getFrameSpanContext() {
  const owner = enabledThreadContextManager();
  if (owner === null || owner.schema !== 'nodejs') return null;
  return nodejsSchema().frames.readFrame();
}

/**
 * @returns {{ available: boolean, reason: string | null, published: boolean, structAddress: number | null,
 *   recordSlotOffset: number | null, pages: number, pinnedPages: number, pinError: string | null }}
 */
function nodejsSchemaInfo() {
  const { frames, reason } = nodejsSchema();
  if (frames === null) {
    return { available: false, reason, published: false, structAddress: null, recordSlotOffset: null, pages: 0, pinnedPages: 0, pinError: null };
  }
  return {
    available: true, reason: null, published: frames.published,
    structAddress: frames.addon.discoveryInfo().structAddress, recordSlotOffset: frames.recordSlotOffset,
    ...frames.addon.blockPoolInfo(),
  };
}

module.exports = { getFrameSpanContext, nodejsSchemaInfo };
