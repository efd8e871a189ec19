'use strict';
// register(): one call for apps that do not pass a context manager to NodeSDK or to
// provider.register(). Installs a ThreadContextManager as the global OpenTelemetry context
// manager, delegating to the manager already installed (if any) or to a new
// AsyncLocalStorageContextManager, enables it and returns it.
//
// With NodeSDK or NodeTracerProvider, pass a manager instead of calling register():
//   new NodeSDK({ contextManager: new ThreadContextManager(), ... }).start();
//   provider.register({ contextManager: new ThreadContextManager() });
// (both call enable() and install it globally).

const { context, ROOT_CONTEXT, createContextKey } = require('@opentelemetry/api');
const { ThreadContextManager, checkOptions } = require('./thread-context-manager');
const { prepareProcessContext } = require('../process-context/process-context');
const { checkAllocations, resolveAllocations, startAllocationSampling } = require('../profiling/allocations');

const PROBE_KEY = createContextKey('otel-thread-ctx register probe');

// The API's no-op manager (what it returns when none is installed) cannot hold a context.
function holdsContexts(manager) {
  const probe = ROOT_CONTEXT.setValue(PROBE_KEY, true);
  try {
    return manager.with(probe, () => manager.active() === probe) === true;
  } catch {
    return false;
  }
}

/**
 * @param {{ schema?: 'tls' | 'nodejs', tlsSchemaVersion?: 'tlsdesc_v1_dev' | 'tls_v1', contextManager?: ContextManager, asyncTracking?: boolean,
 *   resource?: Resource, attributes?: string[], allocations?: boolean | { samplingIntervalBytes?: number } }} [options]
 *   schema: js/manager/thread-context-manager.js; resource / attributes: the OTEP 4719 process
 *   context's resource and the attribute keys records carry (js/process-context/); allocations:
 *   js/profiling/allocations.js
 * @returns {ThreadContextManager} the enabled, globally installed manager
 */
function register(options = {}) {
  checkOptions(options);
  const installed = typeof context._getContextManager === 'function' ? context._getContextManager() : undefined;
  if (installed instanceof ThreadContextManager && installed.enabled && options.contextManager === undefined &&
      (options.schema === undefined || installed.schema === options.schema || installed.schemaFallback !== null) &&
      (options.tlsSchemaVersion === undefined || installed.tlsSchemaVersion === options.tlsSchemaVersion)) {
    prepareProcessContext(options)();
    startAllocationSampling(resolveAllocations(checkAllocations(options.allocations)));
    return installed;
  }
  let delegate = options.contextManager;
  // Schema 'nodejs' keeps contexts in its own storage: an installed manager is replaced, not wrapped.
  const wrapsInstalled = delegate === undefined && options.schema !== 'nodejs' && installed !== undefined &&
    !(installed instanceof ThreadContextManager) && holdsContexts(installed);
  if (wrapsInstalled) delegate = installed;
  // Validates every option before anything global changes.
  const manager = new ThreadContextManager({ ...options, contextManager: delegate });
  // Unregisters the installed manager (the API allows one registration); it lives on as our
  // delegate, or (a ThreadContextManager) is taken over by enable().
  context.disable();
  manager.enable();
  if (!context.setGlobalContextManager(manager)) {
    manager.disable();
    throw new Error('register(): @opentelemetry/api refused to install the global context manager');
  }
  return manager;
}

module.exports = { register };
