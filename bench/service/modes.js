'use strict';
// The service benchmark's modes: the context manager NodeSDK runs with (bench/lib/managers.js),
// or no OpenTelemetry at all.

const MODES = Object.freeze({
  stock: { kind: 'stock', label: 'stock AsyncLocalStorageContextManager' },
  floor: { kind: 'floor', label: 'stock + the manager\'s hooks, empty bodies (the floor)' },
  full: { kind: 'manager', label: 'ThreadContextManager' },
  'full+attrs': { kind: 'manager', attributes: ['http.route', 'http.request.method'], label: 'ThreadContextManager, record attributes http.route and http.request.method' },
  'full+alloc': { kind: 'manager', managerOptions: { allocations: true }, label: 'ThreadContextManager, allocations: true (V8\'s sampling heap profiler, 512 KiB mean)' },
  nodejs: { kind: 'manager', managerOptions: { schema: 'nodejs' }, label: "ThreadContextManager, schema 'nodejs' (no hooks)" },
  'nodejs+attrs': {
    kind: 'manager', managerOptions: { schema: 'nodejs' }, attributes: ['http.route', 'http.request.method'],
    label: "ThreadContextManager, schema 'nodejs', record attributes http.route and http.request.method",
  },
  none: { kind: null, label: 'no OpenTelemetry (for scale)' },
});

const DEFAULT_MODES = ['stock', 'floor', 'full'];

// proto:A+B: the ThreadContextManager from a copy of js/ with bench/prototypes/A.patch, B.patch.
// rev:REV: the ThreadContextManager of git revision REV's js/ (a before/after pair in one run).
function modeByName(name) {
  if (typeof name === 'string' && name.startsWith('rev:') && name.length > 'rev:'.length) {
    const revision = name.slice('rev:'.length);
    return { kind: 'manager', patches: { revision }, label: `ThreadContextManager, js/ of git revision ${revision}` };
  }
  if (typeof name === 'string' && name.startsWith('proto:') && name.length > 'proto:'.length) {
    const patches = name.slice('proto:'.length).split('+');
    return { kind: 'manager', patches, label: `ThreadContextManager + bench/prototypes/${patches.join('.patch + ')}.patch` };
  }
  const mode = MODES[name];
  if (mode === undefined) throw new TypeError(`mode: expected one of ${Object.keys(MODES).join(', ')}, or proto:PATCH[+PATCH] or rev:REV, got ${JSON.stringify(name)}`);
  return mode;
}

module.exports = { MODES, DEFAULT_MODES, modeByName };
