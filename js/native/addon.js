'use strict';
// Loads the native addon. Where it cannot load (not Linux x86-64 glibc, or not built), the package
// still loads: every call becomes a documented no-op and threadInfo() says why, so a service never
// fails to start because profiling correlation is unavailable. OTEL_THREAD_CTX_REQUIRE_NATIVE=1
// turns that into an error (tests and CI use it).

const { RECORD_SIZE } = require('../record/layout');
const { prebuilt } = require('./platform');

// napi-rs's order: the local file next to the package (`npm run build` in a checkout), then the
// per-platform package (bundled in the release tarball, or installed from a registry).
function requireAddon() {
  const p = prebuilt();
  if (!p.supported) throw new Error(p.reason);
  const errors = [];
  for (const id of [p.localAddon, p.platformPackage]) {
    try {
      return require(id);
    } catch (err) {
      errors.push({ id, err });
    }
  }
  // A file that exists but does not load (an older glibc, a truncated copy) says more than "not found".
  const found = errors.filter((e) => !(e.err.code === 'MODULE_NOT_FOUND' && e.err.message.includes(`'${e.id}'`)));
  const detail = found.length > 0
    ? found.map((e) => e.err.message).join('; ')
    : `neither ${p.localAddon} nor the package ${p.platformPackage} is installed`;
  throw new Error(`no loadable addon for ${p.tuple}: ${detail}`, { cause: errors.map((e) => e.err) });
}

function load() {
  try {
    return { native: requireAddon(), error: null };
  } catch (err) {
    if (process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE === '1') throw err;
    return { native: null, error: err };
  }
}

const { native, error } = load();

function unavailable() {
  const reason = `otel-thread-ctx: native addon unavailable (${error && error.message}); span contexts are not published`;
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
