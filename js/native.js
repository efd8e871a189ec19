'use strict';
// Loads the native addon. Where it cannot load (not Linux x86-64 glibc, or not built), the package
// still loads: every call becomes a documented no-op and threadInfo() says why, so a service never
// fails to start because profiling correlation is unavailable. OTEL_THREAD_CTX_REQUIRE_NATIVE=1
// turns that into an error (tests and CI use it).

const path = require('node:path');
const { RECORD_SIZE } = require('./layout');

const ADDON_PATH = path.join(__dirname, '..', 'otel-thread-ctx.node');

function load() {
  try {
    return { native: require(ADDON_PATH), error: null };
  } catch (err) {
    if (process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE === '1') throw err;
    return { native: null, error: err };
  }
}

const { native, error } = load();

function unavailable() {
  const reason = `otel-thread-ctx: native addon unavailable on ${process.platform}-${process.arch} ` +
    `(${error && error.message}); span contexts are not published`;
  process.emitWarning(reason, { code: 'OTEL_THREAD_CTX_NATIVE_UNAVAILABLE' });
  // A private, unread buffer keeps the JS fast path working unchanged.
  const views = new WeakMap();
  return {
    setSpanContext() {},
    getSpanContext() { return null; },
    recordView() {
      let v = views.get(globalThis);
      if (!v) views.set(globalThis, (v = new Uint8Array(RECORD_SIZE)));
      return v;
    },
    threadInfo() {
      return {
        tid: null, recordAddress: null, pinned: false, pinError: null, wipeOnFork: false,
        tlsOffset: null, tlsModel: 'unknown', pageBacking: null, error: reason,
      };
    },
  };
}

module.exports = native || unavailable();
module.exports.supported = native !== null;
