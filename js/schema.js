'use strict';
// Which thread-context schema a ThreadContextManager publishes with:
//   'tls'     the OTEP 4947 record behind otel_thread_ctx_v1, kept current at every async switch
//             (js/context-manager.js): every OTEP 4947 reader, every Node version;
//   'nodejs'  nodejs_v1_dev (js/frame-writer.js): the record hangs off the context and readers
//             find it through V8's AsyncContextFrame; nothing runs per switch.
// 'nodejs' needs AsyncContextFrame and this Node ABI's V8 addon. Where either is missing, the
// manager publishes with 'tls' instead, with one warning per thread saying why: profiling
// correlation never stops a service from starting.

const { v8Addon } = require('./v8-addon');
const { frameWriter } = require('./frame-writer');

const SCHEMAS = ['tls', 'nodejs'];
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

module.exports = { SCHEMAS, nodejsSchema };
