'use strict';
// The context managers the benchmarks compare, built without editing the package:
//   stock   AsyncLocalStorageContextManager
//   floor   stock + the ThreadContextManager's hook points with empty bodies (hook-modes.js)
//   lookup  floor + the context lookup in every hook
//   manager the package's ThreadContextManager (from `packageDir`: the working tree or a
//           patched copy, package-copy.js), with `options` and record attribute keys
// The hook modes take the mechanism from the package's public `ThreadContextManager#mechanism`.

const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { installHooks } = require('./hook-modes');

const ROOT = require('node:path').join(__dirname, '..', '..');

function mechanismOf(pkg) {
  return new pkg.ThreadContextManager().mechanism;
}

/**
 * @param kind 'stock' | 'floor' | 'lookup' | 'manager'
 * @param options.packageDir where the package is loaded from (default: the working tree)
 * @param options.hooks installHooks() variants for floor/lookup ({ after, init })
 * @param options.managerOptions ThreadContextManager options; options.attributes record keys
 * @returns { manager, pkg, mechanism } (manager not enabled; pkg null for stock)
 */
function buildContextManager(kind, { packageDir = ROOT, hooks = {}, managerOptions = {}, attributes } = {}) {
  if (kind === 'stock') return { manager: new AsyncLocalStorageContextManager(), pkg: null, mechanism: 'AsyncLocalStorage' };
  const pkg = require(packageDir);
  if (kind === 'floor' || kind === 'lookup') {
    const manager = new AsyncLocalStorageContextManager();
    const mechanism = mechanismOf(pkg);
    const enable = manager.enable.bind(manager);
    // Installed after the stock manager's own hooks, as the ThreadContextManager's are.
    manager.enable = () => {
      enable();
      installHooks(mechanism, { ...hooks, active: kind === 'lookup' ? () => manager.active() : null });
      return manager;
    };
    manager.mechanism = mechanism;
    return { manager, pkg, mechanism };
  }
  if (kind !== 'manager') throw new TypeError(`kind: expected stock, floor, lookup or manager, got ${JSON.stringify(kind)}`);
  if (attributes !== undefined) pkg.registerAttributeKeys(attributes);
  const manager = new pkg.ThreadContextManager(managerOptions);
  return { manager, pkg, mechanism: manager.mechanism };
}

module.exports = { buildContextManager, mechanismOf, ROOT };
