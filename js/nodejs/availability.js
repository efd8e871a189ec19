'use strict';
// Whether schema 'nodejs' can publish on this thread, and if so its frame writer. It needs
// AsyncContextFrame (AsyncLocalStorage must run on it) and this Node ABI's V8 addon
// (js/nodejs/v8-addon.js), and the reader's walk with the addon's layout must land on a probe
// record. Where any of that fails, the reason is warned once per thread and the manager publishes
// with 'tls' instead (js/manager/thread-context-manager.js): profiling correlation never stops a
// service from starting.

const { v8Addon } = require('./v8-addon');
const { frameWriter } = require('./frame-writer');

const WARNING_CODE = 'OTEL_THREAD_CTX_SCHEMA_FALLBACK';

let resolved = null;

function resolveNodejs() {
  const { addon, reason } = v8Addon();
  if (addon === null) return { frames: null, reason };
  try {
    const frames = frameWriter(addon);
    const why = frames.check();
    return why === null ? { frames, reason: null } : { frames: null, reason: why };
  } catch (error) {
    return { frames: null, reason: `its V8 part failed (${error && error.message})` };
  }
}

/**
 * This thread's frame writer for the nodejs schema, or null and why not (warned once per thread).
 * @returns {{ frames: import('./frame-writer').FrameWriter | null, reason: string | null }}
 */
function nodejsSchema() {
  if (resolved === null) {
    resolved = resolveNodejs();
    if (resolved.reason !== null) {
      process.emitWarning(`otel-thread-ctx: schema 'nodejs' is not available here: ${resolved.reason}. ` +
        "Spans are published with schema 'tls' instead.", { code: WARNING_CODE });
    }
  }
  return resolved;
}

module.exports = { nodejsSchema };
