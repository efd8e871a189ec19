'use strict';
// The benchmark's modes: which context manager the OpenTelemetry SDK runs with, or no
// OpenTelemetry at all. Names are what run.js and server.js accept.

const MODES = Object.freeze({
  a: { name: 'als', label: '(a) stock AsyncLocalStorageContextManager' },
  b: { name: 'tcm', label: '(b) ThreadContextManager (async tracking)' },
  c: { name: 'tcm-cheap', label: '(c) ThreadContextManager({ asyncTracking: false })' },
  d: { name: 'none', label: '(d) no OpenTelemetry' },
  // (e) is in the default run (the floor); (f) is a diagnostic. (a) plus the hooks of (b) with empty bodies, then plus
  // the active-context lookup each hook of (b) does. (b) − (f) is then the publishing itself,
  // (f) − (e) the lookup, (e) − (a) what the runtime charges for dispatching the hooks.
  e: { name: 'als+hooks', label: '(e) (a) + the hooks of (b), empty' },
  f: { name: 'als+hooks+lookup', label: '(f) (a) + the hooks of (b) reading the context' },
});

function modeByKey(key) {
  const mode = MODES[key];
  if (mode === undefined) {
    throw new TypeError(`mode: expected one of ${Object.keys(MODES).join(', ')}, got ${JSON.stringify(key)}`);
  }
  return mode;
}

module.exports = { MODES, modeByKey };
