'use strict';
// The span workload's modes: which context manager runs it, and how it is built. None edits the
// package: `hooks` modes are the stock manager plus bench/lib/hook-modes.js; `manager` modes load
// the package from the working tree, or from a patched copy (bench/prototypes/NAME.patch, see
// bench/lib/package-copy.js). `proto:A+B` is the ThreadContextManager with patches A then B;
// `rev:REV` the ThreadContextManager of git revision REV's js/ (before/after in one run);
// `nodejs@rev:REV` the same with schema 'nodejs' (and that revision's V8 addon).

const { buildContextManager, mechanismOf } = require('../lib/managers');

const MODES = Object.freeze({
  stock: { kind: 'stock', label: 'stock AsyncLocalStorageContextManager' },
  floor: { kind: 'hooks', hooks: {}, label: 'stock + the manager\'s hooks, empty bodies (the floor)' },
  lookup: { kind: 'hooks', hooks: { lookup: true }, label: 'floor + the context lookup in every hook' },
  full: { kind: 'manager', patches: [], label: 'ThreadContextManager' },
  'no-span-work': {
    // It publishes one shared entry with made-up ids: the record self-check cannot pass.
    kind: 'manager', patches: ['no-per-span-work'], selfCheck: false,
    label: 'ThreadContextManager without per-span work (no end() wrap, no entry allocation, no cache stores, no attribute watch)',
  },
  'full+attrs': { kind: 'manager', patches: [], attributes: ['http.route'], label: 'ThreadContextManager, record attribute http.route registered' },
  nodejs: { kind: 'manager', patches: [], managerOptions: { schema: 'nodejs' }, label: "ThreadContextManager, schema 'nodejs' (no hooks)" },
  'nodejs+attrs': {
    kind: 'manager', patches: [], managerOptions: { schema: 'nodejs' }, attributes: ['http.route'],
    label: "ThreadContextManager, schema 'nodejs', record attribute http.route registered",
  },
  'floor-no-after': { kind: 'hooks', hooks: { after: false }, label: 'floor without `after` hooks (lazy restore)' },
  'floor-no-init': { kind: 'hooks', hooks: { init: false }, label: 'floor without the `init` hook (where the manager has one)' },
});

const DEFAULT_MODES = ['stock', 'floor', 'lookup', 'full', 'no-span-work'];

function modeByName(name) {
  if (typeof name === 'string' && name.startsWith('nodejs@rev:') && name.length > 'nodejs@rev:'.length) {
    // Schema 'nodejs' of another git revision: its js/ and its V8 addon, built from its sources.
    const revision = name.slice('nodejs@rev:'.length);
    return {
      kind: 'manager', patches: [], revision, managerOptions: { schema: 'nodejs' },
      label: `ThreadContextManager, schema 'nodejs', js/ and v8-addon/ of git revision ${revision}`,
    };
  }
  if (typeof name === 'string' && name.startsWith('rev:') && name.length > 'rev:'.length) {
    // The manager of another git revision's js/ (e.g. the commit before a change), same run.
    const revision = name.slice('rev:'.length);
    return { kind: 'manager', patches: [], revision, label: `ThreadContextManager, js/ of git revision ${revision}` };
  }
  if (typeof name === 'string' && name.startsWith('proto:') && name.length > 'proto:'.length) {
    const patches = name.slice('proto:'.length).split('+');
    return { kind: 'manager', patches, label: `ThreadContextManager + bench/prototypes/${patches.join('.patch + ')}.patch` };
  }
  const mode = MODES[name];
  if (mode === undefined) {
    throw new TypeError(`mode: expected one of ${Object.keys(MODES).join(', ')} or proto:PATCH[+PATCH] or rev:REV or nodejs@rev:REV, got ${JSON.stringify(name)}`);
  }
  return mode;
}

/** The context manager of a mode (not enabled), and the package it came from (null for stock). */
function buildManager(mode, packageDir) {
  const kind = mode.kind === 'hooks' ? (mode.hooks.lookup ? 'lookup' : 'floor') : mode.kind;
  const { manager, pkg } = buildContextManager(kind, {
    packageDir,
    hooks: { after: mode.hooks?.after !== false, init: mode.hooks?.init !== false },
    attributes: mode.attributes,
    managerOptions: mode.managerOptions,
  });
  return { manager, pkg };
}

module.exports = { MODES, DEFAULT_MODES, modeByName, buildManager, mechanismOf };
